"""Units under faults, with real gateway processes on one PostgreSQL (a one-second lease): the run
holding a unit keeps it through a kill -9 of its gateway and through a SIGSTOP past its lease, the
gateway that takes the run over releases it, and the waiter on another gateway is granted only then;
the frozen gateway, continued, releases and writes nothing. Cancel and STOP of a holder and of a
waiter from the command line; waiting runs on two gateways granted in order of priority, then
request time; a gateway killed between a holder's end and the release of its units strands no
waiter (the live gateways release them). A holder's block that ends while PostgreSQL is down (its
release fails with the store) releases once when the store is back; no run fails for the outage.

Every hold is logged from a step inside the ``with`` (``begin``, ``end``; fsync'd, with the pid that
executed it): per unit, the span from a run's first ``begin`` to its last ``end`` never overlaps
another run's. Each test takes its own unit, so the tests share the store and the two gateways of the
module (``w`` serving the waiters' queue, ``p`` the holders' queue); the fault tests start their own
pair of gateways on a queue of their own (the victim first, so it is the one that claims the holder).
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PostgresServer
from tests.fault.crash_points import read_fault_log
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, Gateway, read_lines, wait_until
from tests.integrations.fixtures import controlled_postgres, running_postgres  # noqa: F401
from tests.integrations.pg_control import ControlledPostgres
from tests.waiting import holds_for

LEASE_SECONDS = 1.0
UNITS = ["R1", "R2", "R3", "R4", "R5"]  # one a test
OUTAGE_SECONDS = 2.5  # the store outage: past two leases

APP = """
import os
import time

from exchange.errors import Cancelled, StopRequested
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import units
from testapps.sidefx import append_line


def line(log, unit, what):
    append_line(log, "%s %s %s %d %r" % (getWorkflows().runId, unit, what, os.getpid(), time.time()))


@step(name="uf.mark")
def mark(log, unit, what):
    line(log, unit, what)
    return os.getpid()


@workflow(name="uf.hold")
def hold(log, unit, gate):
    rt = getWorkflows()
    try:
        with units.acquire(unit):
            mark(log, unit, "begin")
            try:
                while not os.path.exists(gate):
                    if os.path.exists("%s.%d" % (gate, os.getpid())):
                        return "left at once"  # the gate of this process only: the release is its next write
                    cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.05, maxMessages=1)
                    if cmd and cmd["cmd"] == "STOP":
                        mark(log, unit, "end")
                        return "stopped while holding"
            except Cancelled:
                line(log, unit, "end")  # the run's end releases the unit, after this line
                raise
            mark(log, unit, "end")
        return "held"
    except StopRequested:
        return "stopped while waiting"


@workflow(name="uf.hold_quiet")
def hold_quiet(log, unit, gate):
    with units.acquire(unit):
        mark(log, unit, "begin")
        while not os.path.exists(gate):
            time.sleep(0.01)  # no store call: the block ends, and releases, whatever the store is doing
        line(log, unit, "end")  # not a step: the release is the block's first write
    return "held"
"""

START = """
import json, sys
from exchange._config import load_config
from exchange.workflows import apps
from exchange.workflows.engine.instance import configure, getWorkflows
job = json.loads(sys.stdin.read())
runtime = configure(load_config(job["config"]))
apps.load(runtime.config)
ids = [getWorkflows().start(job["workflow"], params, **options) for params, options in job["runs"]]
runtime.close()
print(json.dumps(ids))
"""


@dataclass
class Cluster:
    root: Path
    store_url: str
    zygote: ForkServer
    log: Path
    envs: dict[str, ExchangeEnv] = field(default_factory=dict)
    gateways: list[Gateway] = field(default_factory=list)
    runtime: Any = None

    def env(self, node: str) -> ExchangeEnv:
        if node not in self.envs:
            env = ExchangeEnv.create(self.root / node, store_url=self.store_url, zygote=self.zygote, engine={
                "node_id": node, "lease_seconds": LEASE_SECONDS, "dispatch_poll_ms": 10, "cancel_poll_ms": 20})
            env.write_app("sidefx", SIDE_EFFECT_MODULE)
            env.write_app("uf", APP)
            with env.config_path.open("a", encoding="utf-8") as config:
                config.write("".join(f'\n[units.{unit}]\nclass = "reactor"\n' for unit in UNITS))
            self.envs[node] = env
        return self.envs[node]

    def gateway(self, node: str, *queues: str, extra_env: dict[str, str] | None = None) -> Gateway:
        """A gateway of its own node serving ``queues``, started (``extra_env``: a fault to inject)."""
        gateway = self.env(node).gateway(*[arg for q in queues for arg in ("--queue", q)], name=node)
        self.gateways.append(gateway)
        return gateway.start(extra_env=extra_env)

    def start(self, unit: str, *runs: tuple[str, str, int], workflow: str = "uf.hold") -> list[str]:
        """Start a ``workflow`` of ``unit`` per (queue, gate name, priority), in this order."""
        job = {"config": str(self.env("w").config_path), "workflow": workflow, "runs": [
            ({"log": str(self.log), "unit": unit, "gate": str(self.root / gate)}, {"queue": queue, "priority": prio})
            for queue, gate, prio in runs]}
        done = self.zygote.run_python(textwrap.dedent(START), cwd=self.root, env=self.env("w").process_env(),
                                      timeout=60, input=json.dumps(job))
        assert done.returncode == 0, done.stderr
        ids: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
        return ids

    def stop(self, *gateways: Gateway) -> None:
        """Kill a test's own gateways once it is done with them (fewer gateways ticking for the next)."""
        for gateway in gateways:
            gateway.__exit__()
            self.gateways.remove(gateway)

    def open(self, gate: str, pid: int | None = None) -> None:
        (self.root / (gate if pid is None else f"{gate}.{pid}")).touch()

    def holder(self, unit: str) -> str | None:
        return next((h.run_id for h in self.runtime.store.units.holders() if h.unit == unit), None)

    def waiting(self, unit: str) -> list[str]:
        return [w.run_id for w in self.runtime.store.units.waiting() if unit in w.wanted]

    def run(self, run_id: str) -> dict[str, Any]:
        view: dict[str, Any] = self.runtime.get_run(run_id)
        return view

    def finished(self, run_id: str, timeout_s: float = 20) -> dict[str, Any]:
        view: dict[str, Any] = wait_until(
            lambda: (v := self.run(run_id))["status"] in ("SUCCESS", "ERROR", "CANCELLED") and v, timeout_s,
            message=f"run {run_id} to finish")
        return view

    def marks(self, unit: str) -> list[tuple[str, str, int, float]]:
        """(run, begin|end, pid, time) of ``unit``'s log lines, in the order written."""
        return [(run, what, int(pid), float(at)) for run, u, what, pid, at in read_lines(self.log) if u == unit]

    def began(self, run_id: str, unit: str) -> bool:
        return any(run == run_id and what == "begin" for run, what, _pid, _at in self.marks(unit))

    def spans(self, unit: str) -> list[tuple[float, float, str]]:
        """Each run's hold of ``unit`` (first begin, last end), in order; none may overlap the next."""
        ends: dict[str, list[float]] = {}
        for run, what, _pid, at in self.marks(unit):
            ends.setdefault(run, [])
            if what == "end":
                ends[run].append(at)
        begins = {run: min(at for r, w, _p, at in self.marks(unit) if r == run and w == "begin") for run in ends}
        assert all(ends[run] for run in ends), f"{unit}: a hold never ended: {self.marks(unit)}"
        spans = sorted((begins[run], max(ends[run]), run) for run in ends)
        overlaps = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
        assert not overlaps, f"{unit} had two holders at once: {overlaps}"
        return spans

    def unit_events(self, run_id: str) -> list[tuple[str, str | None]]:
        return [(e["kind"], e["actor"]) for e in self.run(run_id)["events"] if e["kind"].startswith("unit_")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer,
            exchange_zygote: ForkServer) -> Iterator[Cluster]:
    database = postgres.create_store_database("units_faults")
    root = tmp_path_factory.mktemp("units_faults")
    cluster = Cluster(root, postgres.url(database), exchange_zygote, root / "holds.txt")
    try:
        cluster.gateway("w", "w")
        cluster.gateway("p", "p")
        cluster.runtime = cluster.env("w").runtime()
        yield cluster
    finally:
        if cluster.runtime is not None:
            cluster.runtime.close()
        for gateway in cluster.gateways:
            gateway.__exit__()
        postgres.drop_database(database)


def owner(cluster: Cluster, run_id: str) -> str:
    return str(cluster.runtime.get_run(run_id, steps=False, events=False)["owner"] or "")


@pytest.mark.timeout(60)
def test_the_holder_keeps_its_unit_through_a_kill_9_of_its_gateway(cluster: Cluster) -> None:
    victim = cluster.gateway("v1", "h1")
    (holder,) = cluster.start("R1", ("h1", "g-holder1", 0))
    wait_until(lambda: cluster.began(holder, "R1"), 20, message="the holder in its with block")
    taker = cluster.gateway("t1", "h1")
    (waiter,) = cluster.start("R1", ("w", "g-waiter1", 0))
    cluster.open("g-waiter1")  # it goes on as soon as it is granted
    wait_until(lambda: cluster.waiting("R1") == [waiter], 20, message="the waiter to wait for R1")
    victim.kill9()
    killed_at = time.time()

    def taken_over() -> bool:  # until then, and at every look, R1 stays the holder's
        assert cluster.holder("R1") == holder and cluster.waiting("R1") == [waiter]
        return owner(cluster, holder).startswith("t1/")

    wait_until(taken_over, LEASE_SECONDS + 10, interval_s=0.02, message="the taker to take the holder over")
    taken_at = time.time()
    assert holds_for(lambda: cluster.holder("R1") == holder and not cluster.began(waiter, "R1"), 0.2)
    cluster.open("g-holder1")
    assert cluster.finished(holder)["status"] == "SUCCESS"
    view = cluster.finished(waiter)
    assert view["status"] == "SUCCESS" and view["result"] == "held", view["error"]
    (h_begin, h_end, first), (w_begin, _w_end, second) = cluster.spans("R1")
    assert (first, second) == (holder, waiter)
    assert [pid for run, what, pid, _at in cluster.marks("R1") if run == holder] == [victim.killed_pids[-1], taker.pid]
    taker_owner = owner_of_release(cluster, holder)
    assert taker_owner.startswith("t1/")
    print(f"\nkill -9 -> takeover {taken_at - killed_at:.2f} s; release -> the waiter's hold "
          f"{(w_begin - h_end) * 1000:.0f} ms (across gateways)")
    cluster.stop(victim, taker)


def owner_of_release(cluster: Cluster, run_id: str) -> str:
    """The actor of the run's one ``unit_released`` (the owner whose execution released it)."""
    events = cluster.unit_events(run_id)
    assert [kind for kind, _actor in events] == ["unit_granted", "unit_released"], events
    return str(events[1][1])


@pytest.mark.timeout(60)
def test_a_gateway_frozen_past_its_lease_releases_nothing_when_it_continues(cluster: Cluster) -> None:
    frozen = cluster.gateway("v2", "h2")
    (holder,) = cluster.start("R2", ("h2", "g-holder2", 0))
    wait_until(lambda: cluster.began(holder, "R2"), 20, message="the holder in its with block")
    taker = cluster.gateway("t2", "h2")
    (waiter,) = cluster.start("R2", ("w", "g-waiter2", 0))
    wait_until(lambda: cluster.waiting("R2") == [waiter], 20, message="the waiter to wait for R2")
    os.kill(frozen.pid, signal.SIGSTOP)
    stopped_at = time.time()
    try:
        cluster.open("g-holder2", frozen.pid)  # continued, the frozen process leaves its with block and releases

        def taken_over() -> bool:
            assert cluster.holder("R2") == holder and cluster.waiting("R2") == [waiter]
            return owner(cluster, holder).startswith("t2/")

        wait_until(taken_over, LEASE_SECONDS + 10, interval_s=0.02, message="the taker to take the holder over")
        taken_at = time.time()
        assert cluster.holder("R2") == holder  # not lost, not doubled: the run holds it, on its new gateway
        cluster.open("g-holder2")
        assert cluster.finished(holder)["status"] == "SUCCESS"
        wait_until(lambda: cluster.began(waiter, "R2"), 20, message="the waiter granted on the taker's release")
        assert cluster.holder("R2") == waiter
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    continued_at = time.time()
    # Continued, the frozen process finds its gate open and leaves the with block, its lease gone:
    # its release is refused (it would be refused by the fence, too) and never frees R2, which the
    # waiter holds now; it writes no mark.
    wait_until(lambda: f"{holder}: execution stopped" in frozen.log_text(), 10,
               message=lambda: f"the frozen gateway to drop the run\n{frozen.log_text()}")
    assert holds_for(lambda: cluster.holder("R2") == waiter, 0.5)
    assert frozen.alive()
    assert [x for x in cluster.marks("R2") if x[2] == frozen.pid and x[3] >= continued_at] == []
    assert owner_of_release(cluster, holder).startswith("t2/")
    assert [kind for kind, _actor in cluster.unit_events(waiter)] == ["unit_granted"]
    cluster.open("g-waiter2")
    assert cluster.finished(waiter)["status"] == "SUCCESS"
    assert [run for _b, _e, run in cluster.spans("R2")] == [holder, waiter]
    print(f"\nSIGSTOP -> takeover {taken_at - stopped_at:.2f} s")
    assert taker.alive()
    cluster.stop(frozen, taker)


@pytest.mark.timeout(60)
def test_cancel_and_stop_of_waiters_and_holders_from_the_command_line(cluster: Cluster) -> None:
    cli = cluster.env("w").cli
    (holder,) = cluster.start("R3", ("p", "g-h3", 0))
    wait_until(lambda: cluster.holder("R3") == holder, 20, message="R3 held")
    # their priorities put them in this order, whichever gateway asks first
    cancelled, stopped, next_, last = cluster.start("R3", ("w", "g-c3", 4), ("p", "g-s3", 3), ("w", "g-n3", 2),
                                                    ("p", "g-l3", 1))
    wait_until(lambda: cluster.waiting("R3") == [cancelled, stopped, next_, last], 20, message="four waiting in order")
    listed = {u["unit"]: u for u in cli("units", "--json").check().json()}
    assert listed["R3"]["holder"] == holder and listed["R3"]["waiting"] == [cancelled, stopped, next_, last]
    cli("cancel", cancelled, "--reason", "wrong batch").check()  # a waiter, on gateway w
    cli("send", stopped, "STOP", "--reason", "not today").check()  # a waiter, on gateway p
    assert cluster.finished(cancelled)["status"] == "CANCELLED"
    view = cluster.finished(stopped)
    assert (view["status"], view["result"]) == ("SUCCESS", "stopped while waiting")
    assert cluster.waiting("R3") == [next_, last] and cluster.holder("R3") == holder
    cli("send", holder, "STOP", "--reason", "end the reaction").check()  # the holder, on gateway p
    view = cluster.finished(holder)
    assert (view["status"], view["result"]) == ("SUCCESS", "stopped while holding")
    wait_until(lambda: cluster.began(next_, "R3"), 20, message="the next waiter granted on the STOP")
    assert cluster.holder("R3") == next_ and cluster.waiting("R3") == [last]
    cli("cancel", next_, "--reason", "abandon").check()  # a holder, on gateway w
    assert cluster.finished(next_)["status"] == "CANCELLED"
    wait_until(lambda: cluster.began(last, "R3"), 20, message="the last waiter granted on the cancel")
    cluster.open("g-l3")
    assert cluster.finished(last)["status"] == "SUCCESS"
    assert [run for _b, _e, run in cluster.spans("R3")] == [holder, next_, last]
    for run_id in (cancelled, stopped):
        events = cluster.unit_events(run_id)
        assert [kind for kind, _actor in events] == ["unit_request_ended"], events
    assert [kind for kind, _actor in cluster.unit_events(next_)] == ["unit_granted", "unit_released"]
    assert cluster.holder("R3") is None and cluster.waiting("R3") == []


@pytest.mark.timeout(60)
def test_waiting_runs_on_two_gateways_are_granted_by_priority_then_request_time(cluster: Cluster) -> None:
    (holder,) = cluster.start("R4", ("p", "g-h4", 0))
    wait_until(lambda: cluster.holder("R4") == holder, 20, message="R4 held")
    # Two batches, the second asking after the first: ties of priority go to the earlier request.
    first = cluster.start("R4", ("w", "g-open4", 0), ("p", "g-open4", 5), ("w", "g-open4", 1))
    wait_until(lambda: len(cluster.waiting("R4")) == 3, 20, message="the first three to wait")
    second = cluster.start("R4", ("w", "g-open4", 5), ("p", "g-open4", 9), ("p", "g-open4", 0))
    expected = [second[1], first[1], second[0], first[2], first[0], second[2]]
    wait_until(lambda: cluster.waiting("R4") == expected, 20, message="the six in the order of priority, then time")
    cluster.open("g-open4")
    cluster.open("g-h4")
    for run_id in [holder, *expected]:
        assert cluster.finished(run_id)["status"] == "SUCCESS"
    assert [run for _b, _e, run in cluster.spans("R4")] == [holder, *expected]



# The write the victim dies before (its label: exchange._store.runs.units.UnitTable.release_run).
RELEASE_WRITE = "the release of its units"


@pytest.mark.timeout(60)
def test_a_gateway_killed_between_a_holders_end_and_its_release_strands_no_waiter(cluster: Cluster) -> None:
    """The run's end and the release of its units are two writes: a kill -9 between them leaves the
    holder row of a finished run, which counts as free; the live gateways grant what waits for it
    (before, nothing did until some other run asked for or released a unit: the waiter waited on)."""
    faults = cluster.root / "faults-v5.log"
    victim = cluster.gateway("v5", "h5", extra_env={"EXCHANGE_FAULT_KILL_BEFORE_LABELLED": RELEASE_WRITE,
                                                    "EXCHANGE_FAULT_WRITE_LOG": str(faults)})
    (holder,) = cluster.start("R5", ("h5", "g-h5", 0))
    wait_until(lambda: cluster.began(holder, "R5"), 20, message="the holder in its with block")
    (waiter,) = cluster.start("R5", ("w", "g-w5", 0))
    cluster.open("g-w5")
    wait_until(lambda: cluster.waiting("R5") == [waiter], 20, message="the waiter to wait for R5")
    cluster.runtime.cancel(holder, "wrong batch", actor="op")
    wait_until(lambda: not victim.alive(), 20, message="the victim killed before the release")
    killed_at = time.time()
    assert read_fault_log(faults)[1] == f"run {holder}: {RELEASE_WRITE}", faults.read_text()
    assert cluster.run(holder)["status"] == "CANCELLED"
    view = cluster.finished(waiter, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert [run for _b, _e, run in cluster.spans("R5")] == [holder, waiter]
    (_h_begin, _h_end, _), (w_begin, _w_end, _) = cluster.spans("R5")
    print(f"\nkilled before the release -> the waiter's hold {w_begin - killed_at:.2f} s")
    cluster.stop(victim)


@pytest.mark.timeout(90)
def test_a_release_during_a_store_outage_is_made_once_when_the_store_is_back(
    tmp_path: Path, running_postgres: ControlledPostgres, exchange_zygote: ForkServer  # noqa: F811
) -> None:
    """The holder's ``with`` block ends while PostgreSQL is down (its release is the block's first
    write: it fails) and the server comes back a few seconds later, past every lease: the release is
    made once, the waiter on the other gateway is granted only then and ends SUCCESS, and R1 is free
    at the end. No run fails for the outage."""
    store_url = running_postgres.socket_url(running_postgres.create_database("units_outage"))
    cluster = Cluster(tmp_path, store_url, exchange_zygote, tmp_path / "holds.txt")
    try:
        holding = cluster.gateway("a", "a")
        waiting = cluster.gateway("b", "b")
        cluster.runtime = cluster.env("w").runtime()
        (holder,) = cluster.start("R1", ("a", "g-holder", 0), workflow="uf.hold_quiet")
        wait_until(lambda: cluster.began(holder, "R1"), 20, message="the holder in its with block")
        (waiter,) = cluster.start("R1", ("b", "g-waiter", 0))
        cluster.open("g-waiter")  # it goes on as soon as it is granted
        wait_until(lambda: cluster.waiting("R1") == [waiter], 20, message="the waiter to wait for R1")
        running_postgres.stop()
        stopped_at = time.time()
        cluster.open("g-holder")
        ended = wait_until(lambda: [at for run, what, _pid, at in cluster.marks("R1")
                                    if run == holder and what == "end"], 10, message="the holder's block to end")
        # Its release failed: the execution stopped (the store error, or its lease run out waiting for it).
        wait_until(lambda: f"run {holder}" in holding.log_text(), 10,
                   message=lambda: f"the holder's release to fail\n{holding.log_text()}")
        assert f"run {holder} of uf.hold_quiet failed" not in holding.log_text(), holding.log_text()
        # The outage lasts past every lease (fault injection, not a wait for a condition).
        time.sleep(max(0.0, stopped_at + OUTAGE_SECONDS - time.time()))
        running_postgres.start()
        restarted_at = time.time()
        assert stopped_at < ended[0] < restarted_at
        view = cluster.finished(holder, 30)
        assert (view["status"], view["result"]) == ("SUCCESS", "held"), view["error"]
        view = cluster.finished(waiter, 30)
        assert (view["status"], view["result"]) == ("SUCCESS", "held"), view["error"]
        (_h_begin, h_end, first), (w_begin, _w_end, second) = cluster.spans("R1")
        assert (first, second) == (holder, waiter)
        # Released once, by the with block's release made again (not by a repair after the run's end).
        assert owner_of_release(cluster, holder) != "exchange"
        assert [kind for kind, _actor in cluster.unit_events(waiter)] == ["unit_granted", "unit_released"]
        listed = {u["unit"]: u for u in cluster.env("w").cli("units", "--json").check().json()}
        assert listed["R1"]["holder"] is None and listed["R1"]["waiting"] == [], listed["R1"]
        assert holding.alive() and waiting.alive()
        print(f"\nstore back -> the waiter's hold {w_begin - restarted_at:.2f} s "
              f"(the holder's last end {h_end - restarted_at:+.2f} s)")
    finally:
        if cluster.runtime is not None:
            cluster.runtime.close()
        for gateway in cluster.gateways:
            gateway.__exit__()
