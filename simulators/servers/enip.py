"""A simulated Logix controller: cpppo's EtherNet/IP server in a child process (enip_child.py).

cpppo keeps its tags and connections in module globals and adds root logging handlers, so each server
runs in its own process: several can run side by side, and stop, restart and kill are real. The
parent talks to the child over a line-based JSON pipe (about 0.1 ms per call; ``set_many`` changes
several values in one call, which suits a plant ticking every 100 ms).

Addresses are written as in the Exchange config: ``Tank_Level``, ``Program:MainProgram.Step``,
``Arr[3]`` (the array gets as many elements as the highest index used), ``Motor.Speed`` (served as a
tag literally named ``Motor.Speed``, which answers the same requests a UDT member would). Values and
write counts survive ``stop``/``start``, ``restart`` and ``kill``, like a controller's retained memory.

Write counting happens in the child, on the wire, before cpppo parses a request (see enip_child.py):
``write_count`` counts Write Tag requests, so a duplicated request in one packet counts twice, and
``stacked_count`` counts messages that carried back-to-back requests (the duplicate-write signature).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import IO, Any, Self

from exchange._drivers.enip.tags import LOGIX_TYPES, parse_logix_address
from exchange._values import DataType
from simulators.servers.base import SimPoint

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "enip_child.py")
_REPLY_TIMEOUT_S = 10.0
BAD_STATUS = 0x1F  # CIP "vendor specific error": what a failed module answers, read as Bad_DeviceError


class EnipSimError(RuntimeError):
    """The simulator child failed or answered with an error."""


class _Slot:
    """Where an address lives in cpppo: tag name, element index (None for a scalar), data type."""

    def __init__(self, name: str, index: int | None, data_type: DataType) -> None:
        self.name, self.index, self.data_type = name, index, data_type


def _layout(points: Iterable[SimPoint]) -> tuple[dict[str, _Slot], list[dict[str, Any]]]:
    slots: dict[str, _Slot] = {}
    tags: dict[str, dict[str, Any]] = {}
    for point in points:
        address = parse_logix_address(point.address)
        where = f"simulated Logix address {point.address!r}"
        if any(m.indices for m in address.members[:-1]):
            raise ValueError(f"{where}: only the last name may have an index")
        last = address.members[-1]
        if len(last.indices) > 1:
            raise ValueError(f"{where}: cpppo serves one-dimensional arrays")
        name = point.address.split("[", 1)[0]
        index = last.indices[0] if last.indices else None
        logix_type = LOGIX_TYPES[point.data_type]
        is_array = index is not None
        tag = tags.setdefault(name, {"name": name, "type": logix_type, "size": None, "array": is_array})
        if tag["type"] != logix_type or tag["array"] != is_array:
            raise ValueError(f"{where} conflicts with another point on {name!r}")
        if index is not None:
            tag["size"] = max(tag["size"] or 0, index + 1)
        if point.address in slots:
            raise ValueError(f"{where} is listed twice")
        slots[point.address] = _Slot(name, index, point.data_type)
    return slots, [{k: t[k] for k in ("name", "type", "size")} for t in tags.values()]


def _to_server(data_type: DataType, value: Any) -> Any:
    if data_type is DataType.BOOLEAN:
        return 1 if value else 0
    if data_type.is_integer:
        number = int(value)
        low, high = data_type.integer_range()
        if not low <= number <= high:
            raise ValueError(f"{value!r} is out of range for {data_type.value}")
        return number
    if data_type.is_float:
        return float(value)
    return str(value)


def _from_server(data_type: DataType, value: Any) -> Any:
    if data_type is DataType.BOOLEAN:
        return bool(value)
    if data_type.is_integer:
        return int(value)
    if data_type.is_float:
        return float(value)
    return str(value)


class EnipSimServer:
    """A :class:`simulators.servers.base.SimServer` speaking EtherNet/IP as a Logix controller."""

    def __init__(self, points: list[SimPoint], host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._points = list(points)
        self._slots, self._tags = _layout(self._points)
        self._values = {p.address: _to_server(p.data_type, p.initial) for p in self._points}
        self._readonly = [[self._slots[p.address].name, self._slots[p.address].index]
                          for p in self._points if not p.writable]
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[bytes] | None = None
        self._bad: dict[str, int] = {}  # tag name -> the CIP status its accesses fail with
        self._lock = threading.Lock()  # one request/reply at a time on the pipe
        self._counts_before: dict[str, Any] = {"writes": Counter(), "reads": Counter(), "messages": 0,
                                               "stacked": 0}

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the child and wait until it listens; after a stop, on the same port."""
        with self._lock:
            if self.running:
                return
            spec = {
                "host": self.host, "port": self.port, "tags": self._tags, "readonly": self._readonly,
                "values": [[self._slots[a].name, self._slots[a].index, v] for a, v in self._values.items()],
                "bad": [[name, status] for name, status in self._bad.items()],
            }
            # Kept open while the child runs (its log, quoted when it fails); closed in _reap.
            self._stderr = tempfile.TemporaryFile(prefix="enip-sim-")  # noqa: SIM115
            self._proc = subprocess.Popen(
                [sys.executable, _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True, bufsize=1,
            )
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(spec) + "\n")
            self._proc.stdin.flush()
            reply = self._receive(timeout_s=30.0)
            self.port = int(reply["port"])

    def stop(self) -> None:
        """Stop the child (its listening socket and client connections close); keeps values and counts."""
        with self._lock:
            if not self.running:
                self._reap()
                return
            self._snapshot()
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write('{"op": "stop"}\n')
                self._proc.stdin.flush()
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
            self._reap()

    def kill(self) -> None:
        """SIGKILL the child, as a crashed controller; values and counts up to now are kept."""
        with self._lock:
            if self.running:
                self._snapshot()
                assert self._proc is not None
                self._proc.kill()
                self._proc.wait()
            self._reap()

    def restart(self) -> None:
        """Stop and start again on the same port (clients see their connection drop)."""
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _reap(self) -> None:
        if self._proc is not None:
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _snapshot(self) -> None:
        # Carry values and counts over into the next child (the lock is held by the caller).
        addresses = list(self._slots)
        values = self._call({"op": "get", "items": [self._item(a) for a in addresses]})["values"]
        self._values.update(zip(addresses, values))
        counts = self._call({"op": "counts"})
        before = self._counts_before
        before["writes"].update(counts["writes"])
        before["reads"].update(counts["reads"])
        before["messages"] += counts["messages"]
        before["stacked"] += counts["stacked"]

    # --- the pipe --------------------------------------------------------------------------------

    def _call(self, command: Mapping[str, Any]) -> dict[str, Any]:
        if not self.running:
            raise EnipSimError(f"EtherNet/IP simulator on {self.host}:{self.port} is not running")
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(command) + "\n")
            self._proc.stdin.flush()
        except OSError as exc:
            raise EnipSimError(f"EtherNet/IP simulator child died: {self._stderr_tail()}") from exc
        return self._receive(_REPLY_TIMEOUT_S)

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        line = self._proc.stdout.readline() if ready else ""
        if not line:
            raise EnipSimError(f"EtherNet/IP simulator child did not answer: {self._stderr_tail()}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise EnipSimError(f"EtherNet/IP simulator: {reply.get('error')}")
        return reply

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return "(no output)"
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].decode("utf-8", "replace") or "(no output)"

    def _item(self, address: str) -> list[Any]:
        try:
            slot = self._slots[address]
        except KeyError:
            raise KeyError(f"the simulated controller has no point {address!r}") from None
        return [slot.name, slot.index]

    # --- values ----------------------------------------------------------------------------------

    def get(self, address: str) -> Any:
        """The server-side value at ``address``."""
        return self.get_many([address])[address]

    def get_many(self, addresses: Iterable[str]) -> dict[str, Any]:
        """Several server-side values in one round trip."""
        wanted = list(addresses)
        items = [self._item(a) for a in wanted]
        with self._lock:
            values = self._call({"op": "get", "items": items})["values"]
        return {a: _from_server(self._slots[a].data_type, v) for a, v in zip(wanted, values)}

    def set(self, address: str, value: Any) -> None:
        """Change a value server-side, as the PLC program would (read-only points too)."""
        self.set_many({address: value})

    def set_many(self, values: Mapping[str, Any]) -> None:
        """Change several values server-side in one round trip."""
        items = [[*self._item(a), _to_server(self._slots[a].data_type, v)] for a, v in values.items()]
        with self._lock:
            self._call({"op": "set", "items": items})

    # --- counts and faults -----------------------------------------------------------------------

    def _counts(self) -> dict[str, Any]:
        with self._lock:
            live: dict[str, Any] = self._call({"op": "counts"}) if self.running else {
                "writes": {}, "reads": {}, "messages": 0, "stacked": 0}
            before = self._counts_before
            return {
                "writes": before["writes"] + Counter(live["writes"]),
                "reads": before["reads"] + Counter(live["reads"]),
                "messages": before["messages"] + live["messages"],
                "stacked": before["stacked"] + live["stacked"],
            }

    def write_count(self, address: str | None = None) -> int:
        """Write Tag requests seen on the wire (for one address as the client named it, or all)."""
        writes: Counter[str] = self._counts()["writes"]
        return sum(writes.values()) if address is None else writes[address]

    def read_count(self, address: str | None = None) -> int:
        """Read Tag requests seen on the wire (each tag inside a Multiple Service Packet counts once)."""
        reads: Counter[str] = self._counts()["reads"]
        return sum(reads.values()) if address is None else reads[address]

    def message_count(self) -> int:
        """CIP messages (packets) that carried at least one tag request."""
        return int(self._counts()["messages"])

    def stacked_count(self) -> int:
        """Messages that carried requests back to back outside a Multiple Service Packet."""
        return int(self._counts()["stacked"])

    def reset_counts(self) -> None:
        with self._lock:
            self._counts_before = {"writes": Counter(), "reads": Counter(), "messages": 0, "stacked": 0}
            if self.running:
                self._call({"op": "reset_counts"})

    def set_bad(self, address: str, status: int = BAD_STATUS) -> None:
        """A failed sensor: every client access to the tag of ``address`` fails with CIP ``status``
        (clients read a Bad quality; the whole tag, for an array element) until :meth:`set_good`."""
        name = self._item(address)[0]
        with self._lock:
            self._bad[name] = status
            if self.running:
                self._call({"op": "bad", "items": [[name, status]]})

    def set_good(self, address: str) -> None:
        name = self._item(address)[0]
        with self._lock:
            if self._bad.pop(name, None) is not None and self.running:
                self._call({"op": "bad", "items": [[name, 0]]})

    def drop_connections(self) -> None:
        """Close every client connection; the server keeps listening. Returns once they are closed."""
        with self._lock:
            self._call({"op": "drop"})
