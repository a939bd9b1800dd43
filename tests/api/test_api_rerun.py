"""``POST /api/v1/runs/{id}/retry`` and ``/fork`` against a real gateway process: engineers only,
audited with the caller and the reason, 409 for a run that did not fail, 400 naming a bad field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import ApiGateway, start_api_gateway
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, read_lines, wait_until

RERUN_APP = """
import os

from exchange.workflows.bootstrap import step, workflow


@step(name="apirerun.mark")
def mark(path, label):
    with open(path, "a") as f:
        f.write(label + "\\n")
    return label


@step(name="apirerun.post")
def post(path, flag):
    mark(path, "post")
    if not os.path.exists(flag):
        raise ConnectionError("MES refused the connection")
    return "posted"


@workflow(name="apirerun.batch")
def batch(path, flag):
    return [mark(path, "a"), post(path, flag), mark(path, "c")]
"""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("api-rerun")), zygote=exchange_zygote)
    env.write_app("rerun_app", RERUN_APP)
    yield from start_api_gateway(env)


def _failed_run(api: ApiGateway, tmp_path: Path) -> tuple[str, Path, Path]:
    side, flag = tmp_path / "side.txt", tmp_path / "mes-is-back"
    answer = api.call("POST", "/api/v1/runs", "engineer",
                      json={"workflow": "apirerun.batch", "params": {"path": str(side), "flag": str(flag)}})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    wait_until(lambda: api.run(run_id)["status"] == "ERROR", 20, message="the run to fail")
    return run_id, side, flag


def _finished(api: ApiGateway, run_id: str) -> dict[str, Any]:
    view: dict[str, Any] = wait_until(
        lambda: (v := api.run(run_id))["status"] in ("SUCCESS", "ERROR", "CANCELLED") and v, 20,
        message="the run to finish")
    return view


def test_an_engineer_retries_a_failed_run_and_the_retry_is_audited(api: ApiGateway, tmp_path: Path) -> None:
    run_id, side, flag = _failed_run(api, tmp_path)
    for role in ("viewer", "operator"):
        refused = api.call("POST", f"/api/v1/runs/{run_id}/retry", role, json={"reason": "no"})
        assert refused.status_code == 403, refused.text
        assert role in refused.json()["error"] and "engineer" in refused.json()["error"]
    typo = api.call("POST", f"/api/v1/runs/{run_id}/retry", "engineer", json={"reasn": "MES back"})
    assert typo.status_code == 400 and 'unknown field "reasn" (did you mean "reason"?)' in typo.json()["error"]
    assert api.run(run_id)["status"] == "ERROR"  # nothing of the refusals changed it

    flag.touch()
    answer = api.call("POST", f"/api/v1/runs/{run_id[:8]}/retry", "engineer", json={"reason": "MES back"})
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"id": run_id, "status": "ENQUEUED"}
    done = _finished(api, run_id)
    assert done["status"] == "SUCCESS" and done["result"] == ["a", "posted", "c"]
    assert [line[0] for line in read_lines(side)] == ["a", "post", "post", "c"]
    (event,) = [e for e in done["events"] if e["kind"] == "retried"]
    assert (event["actor"], event["reason"]) == ("token:engineer-token", "MES back")

    refused = api.call("POST", f"/api/v1/runs/{run_id}/retry", "engineer", json={})
    assert refused.status_code == 409
    assert refused.json()["error"] == (f"run {run_id} is SUCCESS: only an ERROR or CANCELLED run can be retried; "
                                       f"nothing changed")
    no_body = api.call("POST", "/api/v1/runs/ffffffff-0000-0000-0000-000000000000/retry", "admin")
    assert no_body.status_code == 404


def test_a_retry_of_a_running_run_is_refused_with_409(api: ApiGateway) -> None:
    run_id = api.start(target_level=1000.0)
    wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="RUNNING")
    refused = api.call("POST", f"/api/v1/runs/{run_id}/retry", "engineer", json={"reason": "no"})
    assert refused.status_code == 409 and f"run {run_id} is RUNNING" in refused.json()["error"]
    assert api.call("POST", f"/api/v1/runs/{run_id}/cancel", "engineer", json={}).status_code == 202


def test_an_engineer_forks_a_run_from_a_step(api: ApiGateway, tmp_path: Path) -> None:
    run_id, side, flag = _failed_run(api, tmp_path)
    assert api.call("POST", f"/api/v1/runs/{run_id}/fork", "operator", json={"from_step": 2}).status_code == 403
    for body, message in (
        ({"from_step": 0}, f"from_step 0 is outside 1..3: run {run_id} has 2 recorded step(s)"),
        ({"from_step": 4}, "from_step 4 is outside 1..3"),
        ({"from_step": "2"}, "from_step: Input should be a valid integer"),
        ({}, "from_step: Field required"),
        ({"from_step": 2, "from": 1}, 'unknown field "from"'),
    ):
        answer = api.call("POST", f"/api/v1/runs/{run_id}/fork", "engineer", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert message in answer.json()["error"], (body, answer.json())
    flag.touch()
    answer = api.call("POST", f"/api/v1/runs/{run_id}/fork", "engineer",
                      json={"from_step": 2, "reason": "MES back"})
    assert answer.status_code == 201, answer.text
    forked = answer.json()["id"]
    done = _finished(api, forked)
    assert done["status"] == "SUCCESS" and done["forked_from"] == run_id
    assert [line[0] for line in read_lines(side)] == ["a", "post", "post", "c"]  # step 1 copied, not executed
    (event,) = [e for e in done["events"] if e["kind"] == "forked"]
    assert (event["actor"], event["reason"]) == ("token:engineer-token", "MES back")
    assert api.run(run_id)["status"] == "ERROR"  # the original is untouched
    spec = api.call("GET", "/openapi.json").json()["paths"]
    assert "post" in spec["/api/v1/runs/{run_id}/retry"] and "post" in spec["/api/v1/runs/{run_id}/fork"]


def test_the_record_of_a_retried_run_from_the_api_and_the_cli(api: ApiGateway, tmp_path: Path) -> None:
    run_id, _side, flag = _failed_run(api, tmp_path)
    flag.touch()
    assert api.call("POST", f"/api/v1/runs/{run_id}/retry", "engineer", json={"reason": "MES back"}).status_code == 202
    assert _finished(api, run_id)["status"] == "SUCCESS"
    assert api.call("GET", f"/api/v1/runs/{run_id}/record").status_code == 401
    assert api.call("GET", "/api/v1/runs/ffffffff-0000-0000-0000-000000000000/record", "viewer").status_code == 404
    answer = api.call("GET", f"/api/v1/runs/{run_id[:8]}/record", "viewer")
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert record["run"]["id"] == run_id and record["run"]["status"] == "SUCCESS"
    retried = [item for item in record["exceptions"] if item["kind"] == "run_retried"]
    assert [(item["actor"], item["reason"]) for item in retried] == [("token:engineer-token", "MES back")]
    assert retried[0]["detail"] == ("the ERROR run (ConnectionError: MES refused the connection) was executed "
                                    "again from step 2 apirerun.post")
    assert [item["kind"] for item in record["exceptions"]] == ["run_retried"]
    assert [s["name"] for s in record["steps"]] == ["apirerun.mark", "apirerun.post", "apirerun.mark"]

    env = api.env
    assert env.cli("record", run_id, "--json").check().json() == record  # the same runtime call
    page_path = tmp_path / "record.html"
    written = env.cli("record", run_id[:8], "--html", str(page_path)).check()
    assert str(page_path) in written.stderr
    page = page_path.read_text(encoding="utf-8")
    assert run_id in page and "MES back" in page and "token:engineer-token" in page and "<script" not in page
