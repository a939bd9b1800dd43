"""A gateway killed with SIGKILL in the middle of an HTTP call: after the restart the call is made
again with the SAME Idempotency-Key, and the db step recorded before it is not executed again."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, toml_value, wait_until
from tests.integrations.http_server import Reply, ScriptedHttpServer

APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import db, http


@workflow(name="crash.book_and_post")
def book_and_post(code, url):
    key = db.update("mes", "INSERT INTO bookings (code) VALUES (?)", [code], getKey=True)
    answer = http.request("POST", url, json_body={"booking": key, "code": code}, timeout_ms=30000)
    return {"key": key, "status": answer["status"], "json": answer["json"]}
"""


def test_idempotency_key_survives_a_gateway_kill_during_the_call(
    tmp_path: Path, http_server: ScriptedHttpServer, exchange_zygote: ForkServer
) -> None:
    mes = tmp_path / "mes.db"
    with sqlite3.connect(mes) as conn:
        conn.execute("CREATE TABLE bookings (id INTEGER PRIMARY KEY AUTOINCREMENT, code TEXT UNIQUE)")
    env = ExchangeEnv.create(tmp_path / "env", zygote=exchange_zygote)  # gateway and start_runs forked
    with open(env.config_path, "a", encoding="utf-8") as config:
        config.write(f"\n[databases.mes]\nurl = {toml_value(f'sqlite:///{mes}')}\n")
    env.write_app("crash", APP)

    never_answered = threading.Event()  # the first gateway dies while the server holds its request
    http_server.script("/bookings", Reply(500, "unused", hold=never_answered), Reply(201, {"accepted": True}))
    runtime = env.runtime()
    try:
        with env.gateway() as gateway:
            gateway.start()
            (run_id,) = env.start_runs("crash.book_and_post", [{"code": "BK-1", "url": http_server.url("/bookings")}])
            wait_until(
                lambda: len(http_server.received("/bookings")) == 1,
                20,
                message=lambda: f"the first POST\n{gateway.log_text()}",
            )
            gateway.kill9()
            never_answered.set()

            gateway.start()
            wait_until(
                lambda: runtime.get_run(run_id, steps=False, events=False)["status"] == "SUCCESS",
                30,
                message=lambda: f"the run to succeed: {runtime.get_run(run_id)}\n{gateway.all_logs()}",
            )
            gateway.stop()
        view = runtime.get_run(run_id)
    finally:
        runtime.close()

    first, second = http_server.received("/bookings")
    assert first.header("Idempotency-Key") == second.header("Idempotency-Key")
    assert first.header("Idempotency-Key")
    assert first.body == second.body  # the same request, built from the replayed key
    assert view["result"] == {"key": 1, "status": 201, "json": {"accepted": True}}
    assert [s["name"] for s in view["steps"]] == ["db.update", "http.request"]
    with sqlite3.connect(mes) as conn:
        assert list(conn.execute("SELECT id, code FROM bookings")) == [(1, "BK-1")]
