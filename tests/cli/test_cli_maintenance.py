"""``exchange maintenance`` and ``exchange retention`` through the real command, with real gateways:
drain with runs in flight (running runs finish, nothing new starts, on every gateway of a
PostgreSQL store), cancel one queue, exit; retention applied by the command and by a gateway."""

from __future__ import annotations

from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, operator_loop_app, wait_until
from tests.waiting import holds_for

LOOP = operator_loop_app("mnt.loop")
QUICK = """
from exchange.workflows.bootstrap import workflow


@workflow(name="mnt.quick")
def quick(i=0):
    return i
"""


def _env(root: Path, zygote: ForkServer | None, store_url: str | None = None, node: str | None = None) -> ExchangeEnv:
    env = ExchangeEnv.create(root, store_url=store_url, zygote=zygote, engine={"node_id": node} if node else None)
    env.write_app("loop_app", LOOP)
    env.write_app("quick_app", QUICK)
    return env


def _status(env: ExchangeEnv, run_id: str) -> str:
    status: str = env.runtime().get_run(run_id, steps=False, events=False)["status"]
    return status


def test_drain_lets_running_runs_finish_and_starts_nothing_until_exit(tmp_path: Path,
                                                                       exchange_zygote: ForkServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote)
    with env.gateway() as gateway:
        gateway.start()
        (running,) = env.start_runs("mnt.loop", [{}])
        wait_until(lambda: _status(env, running) == "RUNNING", 20, message="RUNNING")
        drained = env.cli("maintenance", "drain", "--reason", "gateway update").check()
        assert "maintenance: drain" in drained.stdout and "gateway update" in drained.stdout
        (queued,) = env.start_runs("mnt.quick", [{"i": 1}])
        refused = env.cli("run", "mnt.quick")
        assert refused.returncode == 1 and "maintenance drain is in force" in refused.stderr
        status = env.cli("maintenance", "status", "--json").check().json()
        assert (status["mode"], status["active"], status["queued"]) == ("drain", 1, 1)
        assert status["reason"] == "gateway update" and "@" in status["set_by"]
        assert [r["id"] for runs in status["running_by_node"].values() for r in runs] == [running]
        env.cli("send", running, "STOP").check()
        wait_until(lambda: _status(env, running) == "SUCCESS", 20, message="the running run to finish")
        assert holds_for(lambda: _status(env, queued) == "ENQUEUED", 2.0)
        env.cli("maintenance", "exit", "--reason", "updated").check()
        wait_until(lambda: _status(env, queued) == "SUCCESS", 20, message="the queued run after exit")
    audit = env.runtime().store.audit
    changes = [(e.action, e.reason) for action in ("maintenance_drain", "maintenance_normal")
               for e in audit.entries(action=action)]
    assert changes == [("maintenance_drain", "gateway update"), ("maintenance_normal", "updated")]
    assert all("@" in e.actor for e in audit.entries(action="maintenance_drain"))  # user@host of the command


def test_every_gateway_on_one_postgresql_obeys_and_cancel_takes_one_queue(tmp_path: Path, pg_url: str,
                                                                          exchange_zygote: ForkServer) -> None:
    first = _env(tmp_path / "a", exchange_zygote, pg_url, "node-a")
    second = _env(tmp_path / "b", exchange_zygote, pg_url, "node-b")
    with first.gateway() as gateway_a, second.gateway() as gateway_b:
        gateway_a.start()
        gateway_b.start()
        first.cli("maintenance", "drain").check()
        in_q1 = first.start_runs("mnt.quick", [{"i": i} for i in range(3)], queue="q1")
        in_q2 = first.start_runs("mnt.quick", [{"i": i} for i in range(3)], queue="q2")
        assert holds_for(lambda: all(_status(first, r) == "ENQUEUED" for r in in_q1 + in_q2), 2.0)
        cancelled = second.cli("maintenance", "cancel", "--queue", "q1", "--json").check().json()
        assert sorted(cancelled["cancelled"]) == sorted(in_q1) and cancelled["mode"] == "cancel"
        assert all(_status(first, r) == "CANCELLED" for r in in_q1)
        assert holds_for(lambda: all(_status(first, r) == "ENQUEUED" for r in in_q2), 1.0)
        second.cli("maintenance", "exit").check()
        wait_until(lambda: all(_status(first, r) == "SUCCESS" for r in in_q2), 20, message="q2 after exit")


def _age_finished_runs(env: ExchangeEnv, hours: float) -> int:
    """Move the finish time of every finished run ``hours`` back in the store (retention keeps a run
    at least an hour: a test does not wait that long). Returns how many were moved."""
    from sqlalchemy import update

    from exchange._store.tables.schema import runs

    runtime = env.runtime()
    try:
        with runtime.store.db.transaction("test: age finished runs") as conn:
            moved = conn.execute(update(runs).where(runs.c.finished_at.is_not(None))
                                 .values(finished_at=runs.c.finished_at - hours * 3600.0)).rowcount
    finally:
        runtime.close()
    return int(moved)


def test_retention_apply_and_the_gateways_own_retention(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write("\n[retention]\nfinished_runs_days = 0.05\ninterval_minutes = 0.02\n")  # 72 min; 1.2 s
    bad = tmp_path / "bad.toml"
    for days in ("-1", "1e-9"):
        bad.write_text(env.config_path.read_text().replace("finished_runs_days = 0.05", f"finished_runs_days = {days}"))
        refused = env.cli("--config", str(bad), "retention", "apply")
        assert refused.returncode != 0 and "retention.finished_runs_days" in refused.stderr
    env.start_runs("mnt.quick", [{"i": i} for i in range(5)])
    (waiting,) = env.start_runs("mnt.loop", [{}])
    dry = env.cli("retention", "apply", "--dry-run", "--json").check().json()
    assert dry["by_age"] == 0  # nothing finished yet: no gateway ran them
    with env.gateway() as gateway:
        gateway.start()
        wait_until(lambda: _status(env, waiting) == "RUNNING", 20, message="RUNNING")
        wait_until(lambda: {r["status"] for r in env.runtime().list_runs(workflow="mnt.quick")} == {"SUCCESS"}, 20,
                   message="the quick runs to finish")
        assert holds_for(lambda: len(env.runtime().list_runs(workflow="mnt.quick")) == 5, 2.5)  # too new to go
        assert _age_finished_runs(env, 2) == 5
        # the gateway deletes the finished runs once they are old enough, on its own
        wait_until(lambda: env.runtime().list_runs(workflow="mnt.quick") == [], 30,
                   message=f"the gateway's retention\n{gateway.log_text()}")
        # ... and says so once its pass is over (after the deletes and the audit log's pruning)
        wait_until(lambda: "retention: 5 runs older than" in gateway.log_text(), 20,
                   message=lambda: f"the retention's report\n{gateway.log_text()}")
        assert _status(env, waiting) == "RUNNING"  # never an unfinished run
        env.cli("send", waiting, "STOP").check()
        wait_until(lambda: _status(env, waiting) == "SUCCESS", 20, message="the loop to stop")
    env.cli("run", "mnt.quick").check()  # a finished run, with no gateway to delete it
    assert "deleted 0 run(s)" in env.cli("retention", "apply").check().stdout  # not an hour old yet
    assert _age_finished_runs(env, 2) == 2
    report = env.cli("retention", "apply").check().stdout
    assert "2 run(s) by age" in report, report
    assert env.runtime().list_runs(workflow="mnt.quick") == [] == env.runtime().list_runs(workflow="mnt.loop")
