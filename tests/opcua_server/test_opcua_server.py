"""The OPC UA server of runs in a real gateway process, read and steered by a real asyncua client:
anonymous sessions read, are refused writes; a viewer is refused; an operator HOLDs a run (the
audit names the OPC UA user), as does a custom role with the ``command`` right; partitions follow
their active run; Basic256Sha256 SignAndEncrypt."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from asyncua import ua
from asyncua.sync import Client

from simulators.servers.opcua import write_self_signed_certificate
from tests.api.conftest import APP, PASSWORD, add_roles
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway, wait_until

_LISTENING = re.compile(r"gateway OPC UA server listening on (\S+)")
NS = "urn:exchange"
# asyncua's client reads the server's state every watchdog interval and gives the connection up
# when an answer takes longer than that interval (1 s by default): on a loaded machine an idle
# client of a test then raised "client is disconnected" at its next call. These tests are about
# what the server answers, not how fast, so the clients wait as long as for any request.
CLIENT_TIMEOUT_SECONDS = 10.0


def ua_client(url: str) -> Client:
    """An OPC UA client for the tests: requests and its liveness probe wait up to 10 s."""
    return Client(url, timeout=CLIENT_TIMEOUT_SECONDS, watchdog_intervall=CLIENT_TIMEOUT_SECONDS)


@dataclass
class RunsServer:
    env: ExchangeEnv
    gateway: Gateway
    url: str

    def client(self, user: str | None = None, password: str = PASSWORD, security: str | None = None) -> Client:
        client = ua_client(self.url)
        if user is not None:
            client.set_user(user)
            client.set_password(password)
        if security is not None:
            client.set_security_string(security)
        return client

    def show(self, run_id: str) -> dict[str, Any]:
        view: dict[str, Any] = self.env.show(run_id)
        return view


PROMPT_APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import operator


@workflow(name="opcua.approval")
def approval():
    return operator.prompt("approval", "Approve batch B-9?", fields={"ok": {"type": "bool"}})["values"]["ok"]
"""


def start_runs_server(env: ExchangeEnv, *extra: str) -> Iterator[RunsServer]:
    env.write_app("api_app", APP)
    env.write_app("prompt_app", PROMPT_APP)
    for role in ("viewer", "operator"):
        env.cli("users", "add", f"{role}-user", "--role", role, input_text=PASSWORD + "\n").check()
    with env.gateway("--opcua-server", "opc.tcp://127.0.0.1:0/exchange/", *extra) as gateway:
        gateway.start(timeout_s=60)
        found: list[str] = []
        wait_until(lambda: bool(found.extend(_LISTENING.findall(gateway.log_text())) or found), 30,
                   message=lambda: f"the OPC UA server's address\n{gateway.log_text()}")
        yield RunsServer(env, gateway, found[0])


@pytest.fixture(scope="module")
def runs_server(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[RunsServer]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("opcua-runs")), zygote=exchange_zygote)
    add_roles(env, {"panel": ["command"], "supervisor": ["read", "verify"]})
    for user, role in (("panel-user", "panel"), ("supervisor-user", "supervisor")):
        env.cli("users", "add", user, "--role", role, input_text=PASSWORD + "\n").check()
    yield from start_runs_server(env)


def value(client: Client, path: str) -> Any:
    index = client.get_namespace_index(NS)
    return client.get_node(ua.NodeId(path, index)).read_value()


def write(client: Client, path: str, text: str) -> None:
    index = client.get_namespace_index(NS)
    client.get_node(ua.NodeId(path, index)).write_value(ua.DataValue(ua.Variant(text, ua.VariantType.String)))


def sent_commands(server: RunsServer, run_id: str) -> list[tuple[str, str]]:
    return [(e["payload"]["cmd"], e["actor"]) for e in server.show(run_id)["events"] if e["kind"] == "command_sent"]


def test_anonymous_clients_browse_and_read_runs_that_change(runs_server: RunsServer) -> None:
    (run_id,) = runs_server.env.start_runs("api.batch", [{"target_level": 500.0}])
    with runs_server.client() as client:
        index = client.get_namespace_index(NS)
        runs = client.nodes.objects.get_child([f"{index}:Exchange", f"{index}:Runs"])
        wait_until(lambda: run_id in [n.read_browse_name().Name for n in runs.get_children()], 20,
                   message="the run's node")
        run = runs.get_child(f"{index}:{run_id}")
        names = sorted(n.read_browse_name().Name for n in run.get_children())
        assert names == ["Command", "HeldOn", "Phase", "Progress", "PromptKey", "PromptText", "RunId", "State",
                         "Status", "Workflow"]
        assert value(client, f"Runs/{run_id}/Workflow") == "api.batch"
        assert value(client, f"Runs/{run_id}/RunId") == run_id
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/State") == "RUNNING", 20, message="RUNNING")
        assert value(client, f"Runs/{run_id}/Status") == "RUNNING"
        # the workflow reports its state before its first progress: the server may show one before the other
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/Progress") == "filling", 20, message="progress")
        with pytest.raises(ua.UaStatusCodeError) as refused:
            write(client, f"Runs/{run_id}/Command", "HOLD")
        assert refused.value.code == ua.StatusCodes.BadUserAccessDenied
        with pytest.raises(ua.UaStatusCodeError):
            write(client, f"Runs/{run_id}/Status", "SUCCESS")
    assert sent_commands(runs_server, run_id) == []


def test_the_prompt_a_run_waits_on_is_shown_read_only(runs_server: RunsServer) -> None:
    (run_id,) = runs_server.env.start_runs("opcua.approval", [{}])
    with runs_server.client("operator-user") as client:
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/PromptKey") == "approval", 20,
                   message="the prompt's key")
        assert value(client, f"Runs/{run_id}/PromptText") == "Approve batch B-9?"
        for name in ("PromptKey", "PromptText"):
            with pytest.raises(ua.UaStatusCodeError):
                write(client, f"Runs/{run_id}/{name}", "")
        runs_server.env.cli("answer", run_id, "approval", "-v", "ok=true").check()
        wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/Status") == "SUCCESS", 20, message="SUCCESS")
        assert value(client, f"Runs/{run_id}/PromptKey") == "" and value(client, f"Runs/{run_id}/PromptText") == ""


def test_an_operator_holds_a_run_and_the_audit_names_the_opc_ua_user(runs_server: RunsServer) -> None:
    (run_id,) = runs_server.env.start_runs("api.batch", [{"target_level": 500.0}])
    with pytest.raises(ua.UaStatusCodeError):
        with runs_server.client("operator-user", password="not the password"):
            pass
    with runs_server.client("viewer-user") as viewer:
        wait_until(lambda: _read_or_none(viewer, f"Runs/{run_id}/State") == "RUNNING", 20, message="RUNNING")
        with pytest.raises(ua.UaStatusCodeError) as refused:
            write(viewer, f"Runs/{run_id}/Command", "HOLD")
        assert refused.value.code == ua.StatusCodes.BadUserAccessDenied
    with runs_server.client("operator-user") as operator:
        for text, code in (("EXPLODE", ua.StatusCodes.BadInvalidArgument),
                           ("RESUME", ua.StatusCodes.BadInvalidState)):  # RUNNING would drop a RESUME
            with pytest.raises(ua.UaStatusCodeError) as bad:
                write(operator, f"Runs/{run_id}/Command", text)
            assert bad.value.code == code, text
        assert sent_commands(runs_server, run_id) == []
        write(operator, f"Runs/{run_id}/Command", "hold")
        wait_until(lambda: value(operator, f"Runs/{run_id}/State") == "HELD", 20, message="HELD over OPC UA")
        assert value(operator, f"Runs/{run_id}/Command") == "HOLD"
        write(operator, f"Runs/{run_id}/Command", "STOP")
        wait_until(lambda: value(operator, f"Runs/{run_id}/Status") == "SUCCESS", 20, message="SUCCESS")
    assert sent_commands(runs_server, run_id) == [("HOLD", "opcua:operator-user"), ("STOP", "opcua:operator-user")]
    reasons = {e["reason"] for e in runs_server.show(run_id)["events"] if e["kind"] == "command_sent"}
    assert reasons == {"written to Command over OPC UA"}


def test_a_custom_role_commands_over_opc_ua_by_its_command_right(runs_server: RunsServer) -> None:
    """``[roles.panel] rights = ["command"]`` holds a run; ``[roles.supervisor]``, without it, is refused."""
    (run_id,) = runs_server.env.start_runs("api.batch", [{"target_level": 500.0}])
    with runs_server.client("supervisor-user") as supervisor:
        wait_until(lambda: _read_or_none(supervisor, f"Runs/{run_id}/State") == "RUNNING", 20, message="RUNNING")
        with pytest.raises(ua.UaStatusCodeError) as refused:
            write(supervisor, f"Runs/{run_id}/Command", "HOLD")
        assert refused.value.code == ua.StatusCodes.BadUserAccessDenied
    with runs_server.client("panel-user") as panel:
        write(panel, f"Runs/{run_id}/Command", "HOLD")
        wait_until(lambda: value(panel, f"Runs/{run_id}/State") == "HELD", 20, message="HELD over OPC UA")
        write(panel, f"Runs/{run_id}/Command", "STOP")
    assert sent_commands(runs_server, run_id) == [("HOLD", "opcua:panel-user"), ("STOP", "opcua:panel-user")]
    assert "refused: role supervisor lacks the right 'command'" in runs_server.gateway.log_text()


def test_a_partition_node_follows_its_active_run(runs_server: RunsServer) -> None:
    """The partition's node shows the run executing, not a newer one queued behind it, and a
    Command written there goes to the run executing; once it ends, the node follows the next."""
    env = runs_server.env
    (first,) = env.start_runs("api.batch", [{"target_level": 500.0}], partitionKey="line1")
    with runs_server.client("operator-user") as client:
        wait_until(lambda: _read_or_none(client, "Partitions/line1/State") == "RUNNING", 20, message="first RUNNING")
        assert value(client, "Partitions/line1/RunId") == first
        (second,) = env.start_runs("api.batch", [{"target_level": 500.0}], partitionKey="line1")  # waits ENQUEUED
        # Once the server shows the second run, its refresh has seen it: the partition stays the first's.
        wait_until(lambda: _read_or_none(client, f"Runs/{second}/Status") == "ENQUEUED", 20, message="second shown")
        assert value(client, "Partitions/line1/RunId") == first
        write(client, "Partitions/line1/Command", "STOP")  # to the active run: the first
        wait_until(lambda: _read_or_none(client, "Partitions/line1/RunId") == second, 20, message="line1 -> second")
        wait_until(lambda: value(client, "Partitions/line1/State") == "RUNNING", 20, message="second RUNNING")
        write(client, "Partitions/line1/Command", "abort")  # ABORT, a command like any other over OPC UA
        wait_until(lambda: value(client, f"Runs/{second}/Status") == "SUCCESS", 20, message="second aborted")
        assert value(client, f"Runs/{second}/State") == "ABORTED"
    assert sent_commands(runs_server, first) == [("STOP", "opcua:operator-user")]
    assert sent_commands(runs_server, second) == [("ABORT", "opcua:operator-user")]


def _read_or_none(client: Client, path: str) -> Any:
    try:
        return value(client, path)
    except ua.UaStatusCodeError:
        return None


def test_basic256sha256_sign_and_encrypt_on_postgresql(tmp_path: Path, pg_url: str,
                                                       exchange_zygote: ForkServer) -> None:
    server_cert, server_key = write_self_signed_certificate(tmp_path / "gw.der", tmp_path / "gw.pem",
                                                            "urn:exchange:gateway", server=True)
    client_cert, client_key = write_self_signed_certificate(tmp_path / "hmi.der", tmp_path / "hmi.pem",
                                                            "urn:exchange:test:hmi", server=False)
    env = ExchangeEnv.create(tmp_path / "plant", store_url=pg_url, zygote=exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(f'\n[opcua_server]\ncert = "{server_cert}"\nkey = "{server_key}"\n')
    servers = start_runs_server(env)
    server = next(servers)
    try:
        (run_id,) = env.start_runs("api.batch", [{"target_level": 500.0}])
        security = f"Basic256Sha256,SignAndEncrypt,{client_cert},{client_key},{server_cert}"
        with server.client("operator-user", security=security) as client:
            wait_until(lambda: _read_or_none(client, f"Runs/{run_id}/State") == "RUNNING", 20, message="RUNNING")
            write(client, f"Runs/{run_id}/Command", "STOP")
            wait_until(lambda: value(client, f"Runs/{run_id}/Status") == "SUCCESS", 20, message="stopped")
        probe = Client(server.url)
        try:
            described = probe.connect_and_get_server_endpoints()
        finally:
            probe.disconnect_socket()  # stops the client's own (non-daemon) loop thread
        endpoints = {e.SecurityPolicyUri.rsplit("#", 1)[-1] + "/" + str(e.SecurityMode.name) for e in described}
        assert {"Basic256Sha256/SignAndEncrypt", "Basic256Sha256/Sign", "None/None_"} <= endpoints
    finally:
        servers.close()
