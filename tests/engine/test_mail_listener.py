"""PostgreSQL: a message committed while the gateway's mail listener was reconnecting still wakes
its run, even when its id is below the highest id the watcher had seen (a sequence hands out ids
when a transaction asks, and transactions commit in any order)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from exchange._engine.gateway.watcher import MailWatcher
from exchange.workflows.bootstrap import getWorkflows, workflow
from tests.engine.conftest import Engine
from tests.waiting import wait_until


@workflow(name="listener.wait_for_lab")
def wait_for_lab() -> Any:
    return getWorkflows().recv("lab", timeoutSeconds=60)


@pytest.fixture
def pg_engine(pg_url: str, tmp_path: Path) -> Iterator[Engine]:
    eng = Engine(pg_url, tmp_path)
    yield eng
    eng.close()


def test_a_message_committed_out_of_id_order_while_the_listener_reconnects_is_delivered(
    pg_engine: Engine, pg_url: str, mocker: Any
) -> None:
    runtime = pg_engine.runtime
    watcher = pg_engine.dispatcher.watcher
    run_id = runtime.start("listener.wait_for_lab", {})
    wait_until(lambda: runtime.get_run(run_id, events=False)["status"] == "RUNNING", 20, message="RUNNING")

    # A sender takes the lower id and has not committed yet ...
    sql = runtime.store.db.sql.mail
    assert sql.notify_mail is not None
    slow = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"))
    with slow.cursor() as cur:
        early_id = sql.add_message(cur, run_id, "lab", {"density": 1.02}, "slow sender", None)
        sql.notify_mail.run(cur, {"payload": run_id})
    # ... while a later message (to another topic) commits and the watcher moves past both ids.
    late_id = runtime.send(run_id, "other", "later")
    assert late_id > early_id
    wait_until(lambda: watcher._known_id >= late_id, 20, message="the watcher saw the later id")

    # The listener's session ends; it reconnects only once the slow sender committed (its NOTIFY went
    # to nobody), as a reconnect that takes longer than the commit would.
    committed = threading.Event()
    connect = runtime.store.db.dedicated_connection

    def reconnect_after_the_commit() -> Any:
        committed.wait(20)
        return connect()

    mocker.patch.object(runtime.store.db, "dedicated_connection", side_effect=reconnect_after_the_commit)
    reconnects = mocker.spy(MailWatcher, "_poll")
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as admin:
        # Ended for certain before the commit below: a signalled backend lives on for a moment, and a
        # NOTIFY it delivered then would wake the run without the reconnect this test is about.
        ended = admin.execute("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                              "WHERE query LIKE 'LISTEN%' AND datname = current_database() "
                              "AND pid <> pg_backend_pid()").fetchall()
    assert ended == [(True,)], ended
    slow.commit()
    slow.close()
    committed.set()

    view = runtime.wait_for(run_id, 20)
    assert reconnects.call_count >= 1
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"density": 1.02}
