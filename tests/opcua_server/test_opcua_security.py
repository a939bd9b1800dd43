"""What a security campaign broke in the OPC UA server of runs, against a real gateway process and
real asyncua clients: partition keys that look like node paths (``cell`` and ``cell/Status``) each
get their own node, also after a restart; failed sign-ins count per user and address, so nobody
locks out another user or the same user at another address; an open session loses its rights at
once when its user is removed, demoted or given a new password; a key that is not the certificate's
stops the gateway with one line naming both files."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from asyncua import ua
from asyncua.sync import Client

from simulators.servers.opcua import write_self_signed_certificate
from tests.api.conftest import PASSWORD
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.opcua_server.peers import FromAddress
from tests.opcua_server.test_opcua_server import (
    NS,
    RunsServer,
    _read_or_none,
    sent_commands,
    start_runs_server,
    ua_client,
    value,
    write,
)

_LISTENING = re.compile(r"gateway OPC UA server listening on (\S+)")
_URL = re.compile(r"opc\.tcp://([^:/]+):(\d+)(/.*)")


def node_key(key: str) -> str:
    """A partition key as it is written in node ids (docs/opcua-server.md)."""
    return key.replace("%", "%25").replace("/", "%2F")


def signs_in(url: str, user: str, password: str = PASSWORD) -> bool:
    client = ua_client(url)
    client.set_user(user)
    client.set_password(password)
    try:
        with client:
            return True
    except ua.UaStatusCodeError as exc:
        assert exc.code == ua.StatusCodes.BadUserAccessDenied, exc
        return False


def shows(server: RunsServer, client: Client, path: str, run_id: str) -> None:
    """Wait until the object at ``path`` shows the run ``run_id``."""
    wait_until(lambda: _read_or_none(client, f"{path}/RunId") == run_id, 30,
               message=lambda: f"the node {path}\n{server.gateway.log_text()}")
    assert value(client, f"{path}/Workflow") == "api.batch"


def via(server: RunsServer, relay: FromAddress) -> str:
    found = _URL.fullmatch(server.url)
    assert found, server.url
    return f"opc.tcp://127.0.0.1:{relay.port}{found.group(3)}"


def test_partition_keys_that_look_like_node_paths_get_their_own_nodes_also_after_a_restart(
        tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.cli("users", "add", "keys-op", "--role", "operator", input_text=PASSWORD + "\n").check()
    servers = start_runs_server(env)
    server = next(servers)
    try:
        keys = ["cell", "cell/Status", "cell%2FStatus", "a/b/Command"]
        runs = {key: env.start_runs("api.batch", [{"target_level": 500.0}], partitionKey=key)[0] for key in keys}

        def all_shown(url: str) -> None:
            with ua_client(url) as client:
                for key, run_id in runs.items():
                    shows(server, client, f"Partitions/{node_key(key)}", run_id)
                index = client.get_namespace_index(NS)
                folder = client.nodes.objects.get_child([f"{index}:Exchange", f"{index}:Partitions"])
                assert sorted(n.read_browse_name().Name for n in folder.get_children()) == sorted(keys)

        all_shown(server.url)
        server.gateway.restart(timeout_s=60)
        found: list[str] = []
        wait_until(lambda: bool(found.extend(_LISTENING.findall(server.gateway.log_text())) or found), 30,
                   message=lambda: f"the OPC UA server's address after the restart\n{server.gateway.log_text()}")
        server.url = found[0]
        all_shown(server.url)
        with server.client("keys-op") as operator:
            write(operator, f"Partitions/{node_key('cell/Status')}/Command", "STOP")
            wait_until(lambda: value(operator, f"Runs/{runs['cell/Status']}/Status") == "SUCCESS", 30,
                       message="the run of partition cell/Status stopped")
            assert value(operator, f"Runs/{runs['cell']}/Status") == "RUNNING"
        assert sent_commands(server, runs["cell"]) == []
        logs = server.gateway.all_logs()
        assert "BadNodeIdExists" not in logs and "Traceback" not in logs
    finally:
        servers.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[RunsServer]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("opcua-security")), zygote=exchange_zygote)
    for name, role in (("op", "operator"), ("op2", "operator"), ("op-gone", "operator"),
                       ("op-demoted", "operator"), ("op-newpass", "operator"), ("op-stays", "operator")):
        env.cli("users", "add", name, "--role", role, input_text=PASSWORD + "\n").check()
    yield from start_runs_server(env)


def test_failed_sign_ins_of_one_user_never_lock_out_another(secured: RunsServer) -> None:
    for n in range(8):
        assert not signs_in(secured.url, "mallory", f"guess {n}")
    assert signs_in(secured.url, "op")  # the same address, another user: the right password works
    assert not signs_in(secured.url, "mallory", PASSWORD)  # mallory's own attempts wait (and fail anyway)


def test_many_addresses_failing_for_a_user_lock_out_only_themselves(secured: RunsServer) -> None:
    upstream = _URL.fullmatch(secured.url)
    assert upstream
    target = (upstream.group(1), int(upstream.group(2)))
    relays = [FromAddress(target, f"127.0.0.{n}") for n in range(11, 16)]
    try:
        attackers, operator = relays[:4], relays[4]
        for relay in attackers:
            for n in range(5):
                assert not signs_in(via(secured, relay), "op2", f"guess {n}")
        # the last address to fail waits (5 s after its fifth failure), even with the right password ...
        assert not signs_in(via(secured, attackers[-1]), "op2")
        assert "sign-in of 'op2' from 127.0.0.14 refused: too many failed sign-ins" in secured.gateway.log_text()
        assert signs_in(via(secured, operator), "op2")  # ... while from another address it works at once
        assert "sign-in of 'op2' from 127.0.0.11 refused: wrong user name or password" in secured.gateway.log_text()
        # and only for a while: then the right password works there too
        wait_until(lambda: signs_in(via(secured, attackers[-1]), "op2"), 40, interval_s=1.0,
                   message="the right password from a throttled address, after its wait")
    finally:
        for relay in relays:
            relay.close()


def test_an_open_session_loses_its_rights_when_its_user_is_removed_demoted_or_given_a_new_password(
        secured: RunsServer) -> None:
    env = secured.env
    (run_id,) = env.start_runs("api.batch", [{"target_level": 500.0}])
    clients = {name: secured.client(name) for name in ("op-gone", "op-demoted", "op-newpass", "op-stays")}
    for client in clients.values():
        client.connect()
    try:
        wait_until(lambda: _read_or_none(clients["op-stays"], f"Runs/{run_id}/State") == "RUNNING", 20,
                   message="RUNNING")
        env.cli("users", "remove", "op-gone").check()
        env.cli("users", "role", "op-demoted", "--role", "viewer").check()
        env.cli("users", "password", "op-newpass", input_text="a new password 2\n").check()
        for name in ("op-gone", "op-demoted", "op-newpass"):
            with pytest.raises(ua.UaStatusCodeError) as refused:
                write(clients[name], f"Runs/{run_id}/Command", "HOLD")
            assert refused.value.code == ua.StatusCodes.BadUserAccessDenied, name
            assert value(clients[name], f"Runs/{run_id}/State") == "RUNNING"  # reading stays, as for anyone
        assert sent_commands(secured, run_id) == []
        write(clients["op-stays"], f"Runs/{run_id}/Command", "STOP")
        wait_until(lambda: value(clients["op-stays"], f"Runs/{run_id}/Status") == "SUCCESS", 20, message="STOP")
        assert sent_commands(secured, run_id) == [("STOP", "opcua:op-stays")]
    finally:
        for client in clients.values():
            client.disconnect()
    log = secured.gateway.log_text()
    assert "OPC UA HOLD from opcua:op-gone refused: user 'op-gone' no longer exists" in log


def test_a_key_that_is_not_the_certificates_stops_the_gateway_with_one_line(tmp_path: Path,
                                                                          exchange_zygote: ForkServer) -> None:
    cert, _ = write_self_signed_certificate(tmp_path / "gw.der", tmp_path / "gw.pem", "urn:exchange:gateway",
                                            server=True)
    _, other_key = write_self_signed_certificate(tmp_path / "x.der", tmp_path / "x.pem", "urn:x", server=True)
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(f'\n[opcua_server]\ncert = "{cert}"\nkey = "{other_key}"\n')
    gateway = env.gateway("--opcua-server", "opc.tcp://127.0.0.1:0/exchange/")
    gateway.spawn()
    assert gateway.proc is not None and gateway.proc.wait(60) == 1
    log = gateway.log_text()
    assert f"[opcua_server] key {other_key} is not the private key of the certificate {cert}" in log, log
    assert "Traceback" not in log and "listening" not in log
