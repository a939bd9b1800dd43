"""Electronic signatures in a real engine: a verification signed with its meaning, QA's custom role
signing and releasing a finished run (on SQLite and PostgreSQL), each signature listed in the record
(and its printable HTML) with a ``record_hash`` this test recomputes itself; a release twice, or of
a running run, refused; a role without the right refused; ``[signatures] required_for`` STOP
refusing an unsigned STOP (nothing sent) and storing the signed one with its command; the audit
chain intact after signing and catching a signature's meaning changed straight in the database."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from exchange._config import config_from_dict
from exchange._engine import Runtime, Signing
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._record import render_document
from exchange.errors import ConfigError, InvalidArgument, NotAllowed, WorkflowError
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import set_runtime
from exchange.workflows.steps import control, operator
from tests.waiting import wait_until


@workflow(name="sign.batch")
def batch() -> Any:
    answer = operator.prompt("dose", "Dose 12 kg of salt", fields={"kg": {"type": "float"}}, verify_role="operator")
    return answer["values"]


@workflow(name="sign.long")
def long_batch() -> Any:
    control.checkpoint(wait_ms=20_000)  # takes a STOP
    return "not stopped"


def make_runtime(store_url: str, tmp_path: Path, required_for: list[str]) -> Runtime:
    config = config_from_dict({
        "store": {"url": store_url}, "apps": {"paths": []},
        "engine": {"workers": 4, "progress_interval_ms": 0, "node_id": "test-node"},
        "roles": {"qa": {"rights": ["read", "sign", "release"]}},
        "signatures": {"required_for": required_for},
    }, base_dir=tmp_path)
    return Runtime(config)


@pytest.fixture
def required_for() -> list[str]:
    return []


@pytest.fixture
def runtime(request: pytest.FixtureRequest, tmp_path: Path, required_for: list[str]) -> Iterator[Runtime]:
    url = request.getfixturevalue(getattr(request, "param", "sqlite_url"))
    rt = make_runtime(url, tmp_path, required_for)
    dispatcher = Dispatcher(rt)
    set_runtime(rt)
    dispatcher.start()
    yield rt
    dispatcher.stop()
    rt.close()
    set_runtime(None)


def recomputed_hash(record: dict[str, Any], index: int) -> str:
    """What signature ``index`` hashed, rebuilt from today's record as docs/batch-record.md says."""
    earlier = {s["event_id"] for s in record["signatures"][:index]}
    document = dict(record, signatures=record["signatures"][:index],
                    audit_head=record["signatures"][index]["audit_head"],
                    prompts=[dict(p, signatures=[s for s in p["signatures"] if s["event_id"] in earlier])
                             for p in record["prompts"]])
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def finished_batch(runtime: Runtime) -> tuple[str, dict[str, Any]]:
    run_id = runtime.start("sign.batch", {})
    wait_until(lambda: runtime.open_prompts(run_id), 20, message="the prompt to open")
    runtime.answer_prompt(run_id, "dose", {"kg": 12.0}, actor="anna", role="operator")
    before = runtime.record(run_id)
    verified = runtime.verify_prompt(run_id, "dose", role="operator", signing=Signing("eve", "dose checked"))
    assert verified["verified_by"] == "eve"
    assert runtime.wait_for(run_id, 20)["status"] == "SUCCESS"
    return run_id, before


@pytest.mark.parametrize("runtime", ["sqlite_url", "pg_url"], indirect=True)
def test_qa_signs_and_releases_and_each_signature_binds_the_record(runtime: Runtime) -> None:
    run_id, seen_by_verifier = finished_batch(runtime)
    with pytest.raises(NotAllowed, match="right 'sign'"):  # an operator may verify, not sign
        runtime.sign(run_id, Signing("olga", "reviewed"), role="operator")
    with pytest.raises(NotAllowed, match="right 'release'"):
        runtime.release(run_id, Signing("ed"), role="engineer")
    with pytest.raises(InvalidArgument, match="meaning"):
        runtime.sign(run_id, Signing("quinn", " "), role="qa")
    signed = runtime.sign(run_id, Signing("quinn", "reviewed", name="Quinn Q. Assurance"), role="qa")
    released = runtime.release(run_id, Signing("quinn"), role="qa")
    with pytest.raises(WorkflowError, match="released already, by quinn"):
        runtime.release(run_id, Signing("rita"), role="admin")

    record = runtime.record(run_id)
    listed = [(s["user"], s["name"], s["meaning"], s["action"], s["prompt"]) for s in record["signatures"]]
    assert listed == [("eve", "eve", "dose checked", "verify", "dose"),
                      ("quinn", "Quinn Q. Assurance", "reviewed", "sign", None),
                      ("quinn", "quinn", "released", "release", None)]
    assert record["prompts"][0]["signatures"] == record["signatures"][:1]
    assert record["signatures"][1] == signed and record["signatures"][2] == released
    assert runtime.released(run_id) == released and runtime.signatures(run_id) == record["signatures"]
    # The verification hashed the record its verifier saw; the others rebuild from today's record.
    verification = record["signatures"][0]
    canonical = json.dumps(seen_by_verifier, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert verification["record_hash"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert verification["audit_head"] == seen_by_verifier["audit_head"]
    assert [recomputed_hash(record, i) == s["record_hash"] for i, s in enumerate(record["signatures"])][1:] == [
        True, True]
    assert all(len(s["record_hash"]) == 64 for s in record["signatures"])
    assert runtime.signature_checks(run_id) == [None, True, True]

    page = render_document(record)  # the printable record shows each: signer, meaning, time, hash
    assert "Quinn Q. Assurance" in page and "user quinn" in page and "reviewed" in page
    assert all(s["record_hash"] in page for s in record["signatures"])
    assert "of prompt <code>dose</code>" in page and "dose checked" in page

    assert runtime.verify_audit([run_id])[0]["state"] == "ok"
    with runtime.store.db.engine.begin() as conn:  # a signature's meaning changed outside Exchange
        changed = conn.execute(text("UPDATE exchange_events SET payload = REPLACE(payload, 'reviewed', 'approved') "
                                    "WHERE run_id = :run AND kind = 'signature'"), {"run": run_id})
        assert changed.rowcount == 1
    check = runtime.verify_audit([run_id])[0]
    assert check["state"] == "tampered" and "signature" in check["problem"], check


def test_a_running_run_is_not_released_and_review_lists_the_runs_not_released(runtime: Runtime) -> None:
    running = runtime.start("sign.long", {})
    wait_until(lambda: runtime.get_run(running, steps=False, events=False)["status"] == "RUNNING", 20,
               message="the run to run")
    with pytest.raises(WorkflowError, match="only a finished run can be released"):
        runtime.release(running, Signing("quinn"), role="qa")
    assert runtime.signatures(running) == []
    run_id, _ = finished_batch(runtime)
    pending = runtime.review(pending=True)
    assert [item["run"] for item in pending] == [run_id]
    assert pending[0]["released"] is None and pending[0]["signatures"] == 1
    runtime.release(run_id, Signing("quinn"), role="qa")
    assert runtime.review(pending=True) == []
    assert runtime.review(pending=False)[0]["released"]["user"] == "quinn"
    runtime.send_command(running, "STOP", actor="olga")  # not required here: no signature asked


@pytest.mark.parametrize("required_for", [["STOP"]])
def test_required_for_stop_refuses_an_unsigned_stop_and_keeps_the_signed_one_with_it(runtime: Runtime) -> None:
    run_id = runtime.start("sign.long", {})
    wait_until(lambda: runtime.get_run(run_id, steps=False, events=False)["status"] == "RUNNING", 20,
               message="the run to run")
    assert runtime.signature_required("STOP") == "ordered STOP" and runtime.signature_required("HOLD") is None
    with pytest.raises(NotAllowed, match=r"STOP of run .* needs an electronic signature"):
        runtime.send_command(run_id, "stop", "leak", actor="olga")
    events = runtime.get_run(run_id)["events"]
    assert not [e for e in events if e["kind"] == "command_sent"]
    runtime.send_command(run_id, "STOP", "leak", signing=Signing("olga", "stopped for the leak"))
    assert runtime.wait_for(run_id, 20)["status"] in ("SUCCESS", "ERROR")
    (signature,) = runtime.record(run_id)["signatures"]
    assert (signature["user"], signature["meaning"], signature["action"]) == ("olga", "stopped for the leak", "STOP")
    commands = runtime.record(run_id)["commands"]
    assert [(c["cmd"], c["actor"]) for c in commands] == [("STOP", "olga")]
    assert runtime.verify_audit([run_id])[0]["state"] == "ok"


def test_unknown_required_for_entries_are_config_errors_naming_them(tmp_path: Path) -> None:
    for entry, words in (("STPO", "unknown action 'STPO' (did you mean 'STOP'?)"),
                         ("answer:", "names no prompt key"), (3, "each action is a string")):
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
            config_from_dict({"signatures": {"required_for": [entry]}}, base_dir=tmp_path)
    config = config_from_dict({"signatures": {"required_for": ["verify", "stop", "answer:dose"]}}, base_dir=tmp_path)
    assert config.signatures.required_for == {"verify", "STOP", "answer:dose"}
    assert config.signatures.requires("answer:dose") and not config.signatures.requires("answer:other")


def test_the_config_lists_every_operator_command_as_an_action() -> None:
    from exchange._config_signatures import COMMAND_ACTIONS
    from exchange._engine.model import commands

    assert COMMAND_ACTIONS == commands.COMMANDS
