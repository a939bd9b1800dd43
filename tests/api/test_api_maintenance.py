"""Maintenance and retention through the HTTP API of a real gateway: admins only change them, the
audit names the caller, a drained gateway starts nothing until back to normal."""

from __future__ import annotations

from tests.api.conftest import ApiGateway
from tests.api.test_api_runs import _one_line_error
from tests.harness import wait_until
from tests.waiting import holds_for


def test_maintenance_and_retention_through_the_api(api: ApiGateway) -> None:
    status = api.call("GET", "/api/v1/maintenance", "viewer")
    assert status.status_code == 200 and status.json()["mode"] == "normal"
    for role in ("viewer", "operator", "engineer"):
        refused = api.call("POST", "/api/v1/maintenance", role, json={"mode": "drain"})
        assert refused.status_code == 403 and "admin" in _one_line_error(refused)
        assert api.call("POST", "/api/v1/retention/apply", role, json={}).status_code == 403
    bad = api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "sleep"})
    assert bad.status_code == 400 and "mode" in _one_line_error(bad)

    drained = api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "drain", "reason": "update"})
    assert drained.status_code == 200 and drained.json()["mode"] == "drain"
    assert drained.json()["set_by"] == "token:admin-token" and drained.json()["reason"] == "update"
    run_id = api.start(target_level=1.0)
    assert holds_for(lambda: api.run(run_id)["status"] == "ENQUEUED", 2.0)  # a drained gateway starts nothing
    back = api.call("POST", "/api/v1/maintenance", "admin", json={"mode": "normal", "reason": "done"})
    assert back.status_code == 200 and back.json()["mode"] == "normal"
    wait_until(lambda: api.run(run_id)["status"] == "RUNNING", 20, message="the run after maintenance")

    report = api.call("POST", "/api/v1/retention/apply", "admin", json={"dry_run": True})
    assert report.status_code == 200
    assert report.json() == {**report.json(), "by_age": 0, "by_count": 0, "dry_run": True}
