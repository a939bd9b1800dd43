"""The address space of runs against a real asyncua server's address space (in this process): a
partition whose node the server refuses to create (here: its node id is already another node's) is
logged once and left out, and every other run is shown; each configured unit's ``Holder``."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from asyncua import ua
from asyncua.server.server import Server

from exchange._opcua_server.nodes import NAMESPACE_URI, RunNodes, node_key


@dataclass
class Run:
    id: str
    partition_key: str | None
    workflow: str = "plant.batch"
    status: str = "RUNNING"
    state: str | None = "RUNNING"
    progress: str | None = None
    finished: bool = False


def test_node_ids_are_one_segment_per_key_and_differ_for_every_key() -> None:
    keys = ["cell", "cell/Status", "cell%2FStatus", "cell%252FStatus", "a/b/Command", "%", "/", ""]
    assert len({node_key(key) for key in keys}) == len(keys)
    assert all("/" not in node_key(key) for key in keys)
    assert node_key("line1") == "line1" and node_key("3f2a-9c") == "3f2a-9c"  # plain keys and run ids as they were


def test_a_node_the_server_refuses_is_logged_once_and_the_others_are_shown(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[list[str], str, list[str]]:
        server = Server()
        await server.init()
        ns = await server.register_namespace(NAMESPACE_URI)
        nodes = RunNodes(server, ns)
        await nodes.build()
        # another node already has the id partition "taken" would get: asyncua refuses (BadNodeIdExists)
        squatter = await server.nodes.objects.add_object(ua.NodeId("Partitions/taken", ns),
                                                         ua.QualifiedName("squatter", ns))
        runs = [Run("run-b", "free"), Run("run-a", "taken")]
        for _ in range(3):  # three refreshes
            await nodes.sync(runs)
        shown = [await server.get_node(ua.NodeId(f"Partitions/free/{name}", ns)).read_value()
                 for name in ("RunId", "Workflow")]
        run_a = await server.get_node(ua.NodeId("Runs/run-a/RunId", ns)).read_value()
        left = [(await child.read_browse_name()).Name for child in await squatter.get_children()]
        assert await squatter.read_browse_name() == ua.QualifiedName("squatter", ns)
        await nodes.sync([Run("run-b", "free")])  # "taken" no longer shown: forgotten, tried again if it returns
        assert ("Partitions", "taken") not in nodes.refused
        return shown, run_a, left

    with caplog.at_level(logging.WARNING, logger="exchange._opcua_server.nodes"):
        # a thread of its own: a test before may have left an event loop running in this one (Playwright)
        with ThreadPoolExecutor(1) as pool:
            shown, run_a, left = pool.submit(asyncio.run, scenario()).result(timeout=60)
    assert shown == ["run-b", "plant.batch"] and run_a == "run-a"
    assert left == []  # nothing of the refused object was left under the other node
    refused = [r.getMessage() for r in caplog.records if "no node for partition 'taken'" in r.getMessage()]
    assert len(refused) == 1, caplog.text
    assert "BadNodeIdExists" in refused[0]


def test_each_configured_unit_has_a_holder_that_follows_its_holder_run() -> None:
    async def scenario() -> list[list[str]]:
        server = Server()
        await server.init()
        ns = await server.register_namespace(NAMESPACE_URI)
        nodes = RunNodes(server, ns)
        await nodes.build(["R1", "line/2"])  # a unit name with a slash: one path segment all the same

        async def holders() -> list[str]:
            return [await server.get_node(ua.NodeId(f"Units/{node_key(unit)}/Holder", ns)).read_value()
                    for unit in ("R1", "line/2")]

        seen = [await holders()]
        await nodes.show_holders({"R1": "run-a", "line/2": None, "R9": "run-x"})  # R9: not configured, ignored
        seen.append(await holders())
        await nodes.show_holders({"line/2": "run-b"})  # R1 absent: free
        seen.append(await holders())
        folder = await server.nodes.objects.get_child([f"{ns}:Exchange", f"{ns}:Units"])
        seen.append(sorted([(await child.read_browse_name()).Name for child in await folder.get_children()]))
        return seen

    with ThreadPoolExecutor(1) as pool:
        seen = pool.submit(asyncio.run, scenario()).result(timeout=60)
    assert seen == [["", ""], ["run-a", ""], ["", "run-b"], ["R1", "line/2"]]
