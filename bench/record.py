"""The batch record and the audit chain's check at scale (issue 44's figures).

    .venv/bin/python bench/record.py [--backends sqlite,postgresql] [--store-url URL]
                                     [--steps 10000] [--events 1000000] [--runs 1000]

- The record of one run of ``--steps`` steps (a real run, executed here): ``Runtime.record`` (what
  ``exchange record --json`` and ``GET /api/v1/runs/{id}/record`` call), its JSON text, and the
  HTML of ``exchange record --html``. Target: the record of a 10,000-step run in <= 2 s.
- ``exchange audit verify`` (``Runtime.verify_audit``, every run) of ``--events`` events spread over
  ``--runs`` runs. The store is filled by direct inserts whose links are computed here as Exchange
  computes them (:mod:`exchange._store.sql.chain`), then checked to be ``ok``. Target: 1,000,000
  events in <= 30 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from common import add_store_args, installed_runtime, machine_note, stores
from sqlalchemy import insert, select, update
from steps import held_run  # the workflow bench.many_steps, held by this process

from exchange._engine.gateway.executor import execute_run
from exchange._engine.operator.runtime import Runtime
from exchange._store.runs.runs import NewRun
from exchange._store.sql.chain import event_entry, link_hash
from exchange._store.tables import events, runs

RECORD_TARGET_S = 2.0
VERIFY_TARGET_S = 30.0
INSERT_BATCH = 20_000


def record_figures(url: str, steps: int) -> str:
    # executed here without a dispatcher to renew the lease: one that outlasts the run
    with installed_runtime(url, lease_seconds=3600.0) as runtime:
        started = time.perf_counter()
        lease = held_run(runtime, steps)
        assert execute_run(runtime, lease) == "SUCCESS"
        ran_s = time.perf_counter() - started
        started = time.perf_counter()
        record = runtime.record(lease.run_id)
        record_s = time.perf_counter() - started
        started = time.perf_counter()
        text = json.dumps(record, ensure_ascii=False, default=str)
        json_s = time.perf_counter() - started
        from exchange._record import render_document

        started = time.perf_counter()
        page = render_document(record)
        html_s = time.perf_counter() - started
    assert len(record["steps"]) == steps, len(record["steps"])
    verdict = "met" if record_s + json_s <= RECORD_TARGET_S else "MISSED"
    return (f"record of a {steps}-step run (ran in {ran_s:.1f} s): Runtime.record {record_s:.3f} s + JSON "
            f"{json_s:.3f} s ({len(text) / 1e6:.1f} MB) = {record_s + json_s:.3f} s (target <= {RECORD_TARGET_S} s: "
            f"{verdict}); the HTML {html_s:.3f} s more ({len(page) / 1e6:.1f} MB)")


def fill_events(runtime: Runtime, total: int, run_count: int) -> None:
    """``run_count`` finished runs holding ``total`` chained events between them, inserted
    directly (one transaction per INSERT_BATCH events), each run's head set as Exchange sets it."""
    store = runtime.store
    template_id, _ = store.create_run(NewRun("bench.audit", "{}", "v1", "bench"))
    with store.db.read() as conn:
        template = dict(conn.execute(select(runs).where(runs.c.id == template_id)).mappings().one())
    per_run = total // run_count
    now = store.clock.now()
    pending: list[dict[str, object]] = []
    heads: list[dict[str, object]] = []

    def flush() -> None:
        with store.db.transaction("bench: events") as conn:
            if pending:
                conn.execute(insert(events), pending)
            for head in heads:
                conn.execute(update(runs).where(runs.c.id == head["run"])
                             .values(audit_seq=head["seq"], audit_head=head["hash"], audit_prev=head["prev"]))
        pending.clear()
        heads.clear()

    with store.db.transaction("bench: runs") as conn:
        ids = [str(uuid.uuid4()) for _ in range(run_count)]
        conn.execute(insert(runs), [{**template, "id": run_id, "status": "SUCCESS", "dedup_id": None,
                                     "audit_seq": None, "audit_head": None, "audit_prev": None,
                                     "created_at": now + i * 1e-3} for i, run_id in enumerate(ids)])
    for run_id in ids:
        prev: str | None = None
        before: str | None = None
        for seq in range(1, per_run + 1):
            kind, actor, reason = (("command", "ann", "sampling") if seq % 50 == 0 else ("status", None, None))
            at = now + seq * 1e-3
            payload = '{"cmd":"HOLD"}' if kind == "command" else '{"status":"RUNNING"}'
            link = link_hash(prev, event_entry(run_id, kind, at, actor, reason, seq, payload), None)
            pending.append({"run_id": run_id, "kind": kind, "at": at, "actor": actor, "reason": reason,
                            "step_seq": seq, "payload": payload, "chain_seq": seq, "chain_prev": prev,
                            "chain_hash": link})
            before, prev = prev, link
        heads.append({"run": run_id, "seq": per_run, "hash": prev, "prev": before})
        if len(pending) >= INSERT_BATCH:
            flush()
    flush()
    with store.db.transaction("bench: the template") as conn:  # its own chain: keep it out of the count
        conn.execute(update(runs).where(runs.c.id == template_id).values(status="SUCCESS"))


def verify_figures(url: str, total: int, run_count: int) -> str:
    with installed_runtime(url) as runtime:
        started = time.perf_counter()
        fill_events(runtime, total, run_count)
        filled_s = time.perf_counter() - started
        started = time.perf_counter()
        found = runtime.verify_audit()
        verify_s = time.perf_counter() - started
    bad = [check for check in found if check["state"] != "ok"]
    assert not bad, bad[:3]
    links = sum(check["links"] for check in found)
    verdict = "met" if verify_s <= VERIFY_TARGET_S else "MISSED"
    return (f"audit verify of {links} links ({total} inserted events in {run_count} runs, filled in "
            f"{filled_s:.1f} s): {verify_s:.2f} s, {links / verify_s:.0f} links/s, all ok "
            f"(target <= {VERIFY_TARGET_S:.0f} s for 1,000,000: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--steps", type=int, default=10_000, help="Steps of the run whose record is taken.")
    parser.add_argument("--events", type=int, default=1_000_000, help="Events audit verify checks.")
    parser.add_argument("--runs", type=int, default=1000, help="Runs the events are spread over.")
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            print(f"[{backend}] {record_figures(s.fresh_url(backend), args.steps)}")
            sys.stdout.flush()
            print(f"[{backend}] {verify_figures(s.fresh_url(backend), args.events, args.runs)}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
