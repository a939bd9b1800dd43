"""The address space of runs: ``Objects/Exchange/Runs/<run id>/`` and
``Objects/Exchange/Partitions/<key>/``, each with ``Workflow``, ``RunId``, ``Status``, ``State``,
``Progress``, ``PromptKey`` and ``PromptText`` (the operator prompt the run waits on, empty when
none), ``HeldOn`` (why a run is held on a failed step, empty otherwise), ``Phase`` (the equipment
phase it commands and the PLC state it saw last, ``R1/Charge RUNNING``, empty otherwise), all read
only, and
``Command`` (written by operators). ``Objects/Exchange/Units/<unit>/Holder``: the run id holding
each configured unit (``[units.NAME]``), empty when free, read only. Node ids are strings in the
``urn:exchange`` namespace: ``Runs/<id>/Status``, ``Partitions/<key>/Command``, ``Units/<unit>/Holder``,
where ``%`` and ``/`` in the id, key or unit are written ``%25`` and ``%2F`` (:func:`node_key`), so
that no key can name another key's node (``cell/Status`` and ``cell``'s ``Status`` variable); the
browse name is the key as given.

A node the server cannot create is logged once and left out, while the others are shown: the
OPC UA server never stops the gateway, nor a run, for one key."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncua import ua
from asyncua.common.node import Node
from asyncua.server.server import Server

from exchange._store import ACTIVE_STATUSES

FIELDS = ("Workflow", "RunId", "Status", "State", "Progress", "PromptKey", "PromptText", "HeldOn", "Phase")
COMMAND = "Command"
HOLDER = "Holder"  # Units/<unit>/Holder
NAMESPACE_URI = "urn:exchange"

log = logging.getLogger(__name__)


def node_key(key: str) -> str:
    """A run id or partition key as written in node ids: ``%`` as ``%25``, ``/`` as ``%2F`` (one
    path segment, and a different one for every key)."""
    return key.replace("%", "%25").replace("/", "%2F")


def partition_rank(run: Any) -> int:
    """How a partition's runs compete for its node (lowest first, then the newest): the run
    executing (it holds the key), else the newest one waiting for it, else the last one that ran.
    A Command written to the partition goes to the run executing, as a command tag's does
    (``RunLookup.active_run``), never to a batch queued behind it."""
    if run.status in ACTIVE_STATUSES:
        return 0
    return 1 if not run.finished else 2


def phase_text(name: str, commanding: Mapping[str, Any]) -> str:
    """``Phase``'s text for the run commanding the phase ``name`` (a row of ``Runtime.phase_runs``):
    the phase and the PLC state the run saw last (``R1/Charge RUNNING``), the phase alone before
    the run read one."""
    state = commanding.get("seen_state")
    return f"{name} {state}" if state else name


def field_values(run: Any, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The text each read-only variable shows for a run record; ``extra``: what the run needs from
    people, ``PromptKey``/``PromptText`` (the prompt it waits on), ``HeldOn`` (the step it is
    held on) and ``Phase`` (the phase it commands), each empty when absent."""
    extra = extra or {}
    return {"Workflow": run.workflow, "RunId": run.id, "Status": run.status, "State": run.state or "",
            "Progress": run.progress or "", "PromptKey": extra.get("PromptKey", ""),
            "PromptText": extra.get("PromptText", ""), "HeldOn": extra.get("HeldOn", ""),
            "Phase": extra.get("Phase", "")}


@dataclass
class RunObject:
    """One ``Runs/<id>`` or ``Partitions/<key>`` object and what its variables show now."""

    node: Node
    shown: dict[str, str] = field(default_factory=dict)
    run_id: str = ""


class RunNodes:
    """Creates, updates and removes the objects; the writes of values go straight to the address
    space (no service call, no write callback)."""

    def __init__(self, server: Server, namespace: int) -> None:
        self.server = server
        self.ns = namespace
        self.runs: dict[str, RunObject] = {}
        self.partitions: dict[str, RunObject] = {}
        self.command_targets: dict[ua.NodeId, tuple[str, str]] = {}  # Command node -> ("run"|"partition", key)
        self.folders: dict[str, Node] = {}
        self.refused: set[tuple[str, str]] = set()  # (folder, key) the server would not create a node for
        self.unwritable: set[tuple[str, str]] = set()  # (folder, key) whose values could not be written (logged)
        self.unit_holders: dict[str, str | None] = {}  # unit -> the holder its Holder shows (None: to be written)

    def node_id(self, path: str) -> ua.NodeId:
        return ua.NodeId(ua.String(path), ua.Int16(self.ns))

    async def build(self, units: Sequence[str] = ()) -> None:
        """The folders, and an object with its ``Holder`` under ``Units`` for each of ``units`` (the
        configured ones: they change only with the config, at a restart)."""
        objects = self.server.nodes.objects
        root = await objects.add_folder(self.node_id("Exchange"), ua.QualifiedName("Exchange", self.ns))
        for name in ("Runs", "Partitions", "Units"):
            self.folders[name] = await root.add_folder(self.node_id(name), ua.QualifiedName(name, self.ns))
        for unit in units:
            try:
                node = await self.folders["Units"].add_object(self.node_id(self._path("Units", unit)),
                                                              ua.QualifiedName(unit, self.ns))
                await node.add_variable(self.node_id(self._path("Units", unit, HOLDER)),
                                        ua.QualifiedName(HOLDER, self.ns), ua.Variant("", ua.VariantType.String))
            except Exception as exc:  # one unit's node: the others are still shown
                log.warning("OPC UA server: no node for unit %r: %s", unit, exc)
                continue
            self.unit_holders[unit] = ""

    async def show_holders(self, holders: Mapping[str, str | None]) -> None:
        """Bring each unit's ``Holder`` to ``holders`` (unit -> run id, None or absent: free);
        only the changed ones are written."""
        for unit, shown in self.unit_holders.items():
            holder = holders.get(unit) or ""
            if shown == holder:
                continue
            try:
                await self.server.write_attribute_value(self.node_id(self._path("Units", unit, HOLDER)),
                                                        ua.DataValue(ua.Variant(holder, ua.VariantType.String)))
            except Exception as exc:  # written again next time
                if shown is not None:
                    log.warning("OPC UA server: the holder of unit %r cannot be written: %s", unit, exc)
                self.unit_holders[unit] = None
            else:
                self.unit_holders[unit] = holder

    def _path(self, folder: str, key: str, name: str | None = None) -> str:
        base = f"{folder}/{node_key(key)}"
        return base if name is None else f"{base}/{name}"

    async def _add(self, folder: str, key: str, kind: str) -> RunObject | None:
        """The object of ``key`` with its variables; None (logged once, nothing left behind) when
        the server refuses to create it."""
        if (folder, key) in self.refused:
            return None
        node: Node | None = None
        try:
            node = await self.folders[folder].add_object(self.node_id(self._path(folder, key)),
                                                         ua.QualifiedName(key, self.ns))
            for name in FIELDS:
                await node.add_variable(self.node_id(self._path(folder, key, name)), ua.QualifiedName(name, self.ns),
                                        ua.Variant("", ua.VariantType.String))
            command = await node.add_variable(self.node_id(self._path(folder, key, COMMAND)),
                                              ua.QualifiedName(COMMAND, self.ns), ua.Variant("", ua.VariantType.String))
            await command.set_writable()
        except Exception as exc:  # asyncua's refusals are of several kinds; any of them spares the rest
            self.refused.add((folder, key))
            log.warning("OPC UA server: no node for %s %r (left out while it is shown): %s", folder[:-1].lower(),
                        key, exc)
            if node is not None:
                await self._delete(node)
            return None
        self.command_targets[command.nodeid] = (kind, key)
        return RunObject(node=node)

    async def _show(self, folder: str, key: str, obj: RunObject, run: Any, extra: Mapping[str, str]) -> None:
        values = field_values(run, extra)
        obj.run_id = run.id
        for name, text in values.items():
            if obj.shown.get(name) != text:
                await self.server.write_attribute_value(self.node_id(self._path(folder, key, name)),
                                                        ua.DataValue(ua.Variant(text, ua.VariantType.String)))
        obj.shown = values

    async def _remove(self, folder: str, key: str, obj: RunObject) -> None:
        self.command_targets.pop(self.node_id(self._path(folder, key, COMMAND)), None)
        await self._delete(obj.node)

    async def _delete(self, node: Node) -> None:
        try:
            await self.server.delete_nodes([node], recursive=True)
        except Exception as exc:  # a node already gone: nothing to show any more either way
            log.warning("OPC UA server: removing node %s failed: %s", node.nodeid.Identifier, exc)

    async def _put(self, folder: str, shown: dict[str, RunObject], key: str, kind: str, run: Any,
                   extra: Mapping[str, str]) -> None:
        obj = shown.get(key) or await self._add(folder, key, kind)
        if obj is None:
            return
        shown[key] = obj
        try:
            await self._show(folder, key, obj, run, extra)
        except Exception as exc:  # one object's values: the others are still brought up to date
            if (folder, key) not in self.unwritable:
                log.warning("OPC UA server: the values of %s %r cannot be written: %s", folder[:-1].lower(), key, exc)
            self.unwritable.add((folder, key))
            obj.shown = {}  # written again, all of them, next time
        else:
            self.unwritable.discard((folder, key))

    async def sync(self, runs: list[Any], extra: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """Show exactly ``runs`` (newest first), and per partition key its active run (see
        :func:`partition_rank`); ``extra``: per run id, the variables of :func:`field_values`'s
        ``extra``."""
        extra = extra or {}
        by_id = {run.id: run for run in runs}
        for run_id in [k for k in self.runs if k not in by_id]:
            await self._remove("Runs", run_id, self.runs.pop(run_id))
        for run in runs:
            await self._put("Runs", self.runs, run.id, "run", run, extra.get(run.id, {}))
        chosen: dict[str, Any] = {}
        for run in runs:  # newest first: the best ranked wins, the newest of equals
            key = run.partition_key
            if key is None:
                continue
            if key not in chosen or partition_rank(run) < partition_rank(chosen[key]):
                chosen[key] = run
        for key in [k for k in self.partitions if k not in chosen]:
            await self._remove("Partitions", key, self.partitions.pop(key))
        for key, run in chosen.items():
            await self._put("Partitions", self.partitions, key, "partition", run, extra.get(run.id, {}))
        # a key no longer shown may be tried again when it comes back (and logged again then)
        kept = {("Runs", run_id) for run_id in by_id} | {("Partitions", key) for key in chosen}
        self.refused &= kept
        self.unwritable &= kept

    def run_for_command(self, node_id: ua.NodeId) -> str | None:
        """The run a Command node writes to now (a partition's: its active run), or None."""
        target = self.command_targets.get(node_id)
        if target is None:
            return None
        kind, key = target
        obj = self.runs.get(key) if kind == "run" else self.partitions.get(key)
        return obj.run_id if obj is not None and obj.run_id else None

    async def echo_command(self, node_id: ua.NodeId, text: str) -> None:
        await self.server.write_attribute_value(node_id, ua.DataValue(ua.Variant(text, ua.VariantType.String)))
