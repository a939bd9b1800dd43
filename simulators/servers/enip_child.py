"""The child process of :class:`simulators.servers.enip.EnipSimServer`: cpppo's Logix simulator plus a
line-based JSON control channel and a wire tap that counts tag requests.

Run as ``python enip_child.py`` with SPEC as the first line of stdin (argv is too small for big
plants). SPEC is ``{"host", "port", "tags": [{"name", "type", "size"}], "readonly": [[name, index]],
"values": [[name, index, value]], "bad": [[name, status]]}`` (index null for a scalar).
It imports only the standard library and cpppo, so it runs from its file path with no project setup.

Control channel: one JSON object per line on stdin, one JSON reply per line on stdout (cpppo's own
prints are sent to stderr). The first line out is ``{"ok": true, "port": N}`` once the server listens.
Commands (``op``): ``get`` / ``set`` (``items``: lists of [name, index(, value)]), ``bad`` (``items``:
[name, CIP status]: every access to the tag fails with that status; 0 ends it), ``counts``,
``reset_counts``, ``drop`` (close every client connection), ``stop``. End of stdin also stops.

The wire tap reads every SendRRData/SendUnitData payload before cpppo parses it and counts the tag
services in it, including requests cpppo then rejects: a packet that carries a Write Tag request
twice counts two writes (and one ``stacked`` message), which is how a duplicated write would look to a
real controller.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections import Counter
from typing import Any

from cpppo.dotdict import apidict, dotdict
from cpppo.server import network
from cpppo.server.enip import device, logix
from cpppo.server.enip import main as enip_main

_READ_SERVICES = {0x4C: 2, 0x52: 6}  # Read Tag, Read Tag Fragmented -> body bytes after the path
_WRITE_SERVICES = {0x4D, 0x53, 0x4E}  # Write Tag, Write Tag Fragmented, Read-Modify-Write Tag
_MULTIPLE = 0x0A
_SIZES = {0xC1: 1, 0xC2: 1, 0xC3: 2, 0xC4: 4, 0xC5: 8, 0xC6: 1, 0xC7: 2, 0xC8: 4, 0xC9: 8,
          0xCA: 4, 0xCB: 8, 0xD1: 1, 0xD2: 2, 0xD3: 4, 0xD4: 8}

log = logging.getLogger("enip_child")


def _u16(buf: bytes, pos: int) -> int:
    return int(struct.unpack_from("<H", buf, pos)[0])


def path_name(path: bytes) -> str:
    """The tag name a request path addresses: symbolic segments joined by '.', indices as [i,j]."""
    text = ""
    last_index = False
    pos = 0
    while pos < len(path):
        seg = path[pos]
        if seg == 0x91:
            size = path[pos + 1]
            name = path[pos + 2:pos + 2 + size].decode("ascii", "replace")
            text = f"{text}.{name}" if text else name
            pos += 2 + size + size % 2
            last_index = False
            continue
        if seg in (0x28, 0x29, 0x2A):
            if seg == 0x28:
                index, pos = path[pos + 1], pos + 2
            elif seg == 0x29:
                index, pos = _u16(path, pos + 2), pos + 4
            else:
                index, pos = int(struct.unpack_from("<I", path, pos + 2)[0]), pos + 6
            text = f"{text[:-1]},{index}]" if last_index else f"{text}[{index}]"
            last_index = True
            continue
        if seg in (0x20, 0x24):  # logical class / instance (instance-id addressing)
            text += f"@{seg:02x}:{path[pos + 1]}"
            pos += 2
        elif seg == 0x25:
            text += f"@25:{_u16(path, pos + 2)}"
            pos += 4
        else:
            return text + "?"
        last_index = False
    return text


class WireTap:
    """Counts tag services per tag name in each CIP message, before cpppo interprets it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writes: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.messages = 0  # CIP messages carrying at least one tag service
        self.stacked = 0  # messages with requests back to back outside a Multiple Service Packet

    def observe(self, cpf: bytes) -> None:
        with self.lock:
            before = sum(self.writes.values()) + sum(self.reads.values())
            pos, count = 8, _u16(cpf, 6)
            for _ in range(count):
                type_id, length = _u16(cpf, pos), _u16(cpf, pos + 2)
                item = cpf[pos + 4:pos + 4 + length]
                pos += 4 + length
                if type_id == 0xB1:  # connected data: sequence count, then the request
                    self._scan(item[2:], connected=True)
                elif type_id == 0xB2:
                    self._scan(_unwrap_unconnected_send(item), connected=False)
            if sum(self.writes.values()) + sum(self.reads.values()) > before:
                self.messages += 1

    def _scan(self, buf: bytes, connected: bool) -> None:
        pos, requests = 0, 0
        while pos < len(buf):
            if requests and connected:
                pos += 2  # a repeated connected message carries its own sequence count
                if pos >= len(buf):
                    break
            end = self._request(buf, pos)
            if end is None:
                break
            requests += 1
            pos = end
        if requests > 1:
            self.stacked += 1

    def _request(self, buf: bytes, pos: int) -> int | None:
        """Count the request at ``pos``; return where it ends, or None when it is not a tag service."""
        try:
            service, words = buf[pos], buf[pos + 1]
            body = pos + 2 + 2 * words
            path = buf[pos + 2:body]
            name = path_name(path)
            if service != _MULTIPLE and path[:1] == b"\x20" and path[1:2] != b"\x6b":
                return None  # same service codes on other objects (0x4E is also Forward Close)
            if service == _MULTIPLE:
                offsets = [_u16(buf, body + 2 + 2 * i) for i in range(_u16(buf, body))]
                for i, offset in enumerate(offsets):
                    stop = body + offsets[i + 1] if i + 1 < len(offsets) else len(buf)
                    self._scan(buf[body + offset:stop], connected=False)
                return len(buf)
            if service in _READ_SERVICES:
                self.reads[name] += 1
                return body + _READ_SERVICES[service]
            if service not in _WRITE_SERVICES:
                return None
            self.writes[name] += 1
            if service == 0x4E:  # mask size, OR mask, AND mask
                return body + 2 + 2 * _u16(buf, body)
            if service == 0x53:  # a fragment: its data runs to the end of the request
                return len(buf)
            type_code = _u16(buf, body)
            type_len = 4 if type_code == 0x02A0 else 2
            elements = _u16(buf, body + type_len)
            data = body + type_len + 2
            if type_code & 0xFF in _SIZES:
                return data + _SIZES[type_code & 0xFF] * elements
            if type_code == 0xD0:  # STRING: UINT length, then characters
                return data + 2 + _u16(buf, data)
            if type_code == 0xDA:  # SHORT_STRING: USINT length, then characters
                return data + 1 + buf[data]
            return len(buf)
        except (IndexError, struct.error):
            return None


def _unwrap_unconnected_send(item: bytes) -> bytes:
    # Unconnected Send (0x52 to the Connection Manager, class 0x06) wraps the real request.
    if len(item) > 6 and item[0] == 0x52 and item[2:4] == b"\x20\x06":
        body = 2 + 2 * item[1]
        size = _u16(item, body + 2)
        return item[body + 4:body + 4 + size]
    return item


class SimAttribute(device.Attribute):  # type: ignore[misc]
    """A cpppo Attribute whose read-only elements refuse client writes with CIP status 0x0F.

    cpppo's Logix object fails a request with ``attribute.error`` when that is non-zero after the
    access; a refused write stores nothing and makes ``error`` read 0x0F, in the refusing thread only,
    until that thread's next access to the attribute.
    """

    readonly: frozenset[int] = frozenset()
    failing: int = 0  # a CIP status every access answers (a failed sensor), 0 for none
    _refused = threading.local()

    @property
    def error(self) -> int:
        if getattr(self._refused, "attribute", None) is self:
            return 0x0F  # privilege violation, as a Logix controller answers for a read-only tag
        return self.failing or int(self._error)

    @error.setter
    def error(self, value: int) -> None:
        self._error = value

    def __getitem__(self, key: Any) -> Any:
        self._refused.attribute = None
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._refused.attribute = None
        if self.readonly:
            span = range(*key.indices(len(self))) if isinstance(key, slice) else range(key, key + 1)
            if self.readonly.intersection(span):
                self._refused.attribute = self
                return
        super().__setitem__(key, value)


class Child:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.tap = WireTap()
        self.control = dotdict()
        self.control["control"] = apidict(timeout=1.0)

    def process(self, addr: Any, data: Any, **kwds: Any) -> Any:
        try:
            enip = data.get("request", {}).get("enip") if data else None
            if enip is not None and enip.get("command") in (0x6F, 0x70) and "input" in enip:
                self.tap.observe(bytes(enip.input))
        except Exception:  # the tap must never break the server
            log.exception("wire tap failed")
        return logix.process(addr, data, **kwds)

    def start(self) -> int:
        argv = ["--address", f"{self.spec['host']}:{self.spec['port']}", "--no-config", "--no-udp"]
        for tag in self.spec["tags"]:
            size = tag.get("size")
            argv.append(f"{tag['name']}={tag['type']}" + (f"[{size}]" if size else ""))
        thread = threading.Thread(
            target=enip_main.main, daemon=True,
            kwargs={"argv": argv, "attribute_class": SimAttribute, "enip_process": self.process,
                    "server": self.control},
        )
        thread.start()
        deadline = time.monotonic() + 30
        while "address" not in self.control["control"]:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("cpppo did not start listening")
            time.sleep(0.005)
        for name, index in self.spec.get("readonly", []):
            attribute = self.attribute(name)
            attribute.readonly = attribute.readonly | {index or 0}
        self.set(self.spec.get("values", []))
        self.bad(self.spec.get("bad", []))
        return int(self.control["control"]["address"][1])

    @staticmethod
    def attribute(name: str) -> Any:
        entry = dict.get(enip_main.tags, name)
        if entry is None:
            raise KeyError(f"no tag {name!r}")
        return entry.attribute

    def get(self, items: list[list[Any]]) -> list[Any]:
        return [self.attribute(name)[index or 0] for name, index in items]

    def set(self, items: list[list[Any]]) -> None:
        for name, index, value in items:
            # Server-side values bypass the read-only check: the PLC program owns them.
            device.Attribute.__setitem__(self.attribute(name), index or 0, value)

    def bad(self, items: list[list[Any]]) -> None:
        for name, status in items:
            self.attribute(name).failing = int(status)

    @staticmethod
    def drop() -> None:
        # Shut each client socket down from here, so the client sees the connection end before this
        # returns; cpppo's serving thread then reads EOF and ends.
        serving = [t for t in threading.enumerate()
                   if isinstance(t, network.server_thread) and getattr(t, "addr", None)]
        for thread in serving:
            try:
                thread.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in serving:
            threading.Thread.join(thread, timeout=5)

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command.get("op")
        if op == "get":
            return {"ok": True, "values": self.get(command["items"])}
        if op == "set":
            self.set(command["items"])
            return {"ok": True}
        if op == "counts":
            with self.tap.lock:
                return {"ok": True, "writes": dict(self.tap.writes), "reads": dict(self.tap.reads),
                        "messages": self.tap.messages, "stacked": self.tap.stacked}
        if op == "reset_counts":
            with self.tap.lock:
                self.tap.writes.clear()
                self.tap.reads.clear()
                self.tap.messages = self.tap.stacked = 0
            return {"ok": True}
        if op == "bad":
            self.bad(command["items"])
            return {"ok": True}
        if op == "drop":
            self.drop()
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}"}


def main() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the parent stops this child itself (it
    # asks for the last values first), and an orphaned child ends at the end of its stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # cpppo prints; keep the control channel clean
    # cpppo warns on every request for an unknown tag; keep errors only (cpppo's own basicConfig is
    # then a no-op), so a long-running plant does not grow its log without bound.
    logging.basicConfig(level=logging.ERROR, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    child = Child(json.loads(sys.stdin.readline()))
    try:
        port = child.start()
    except Exception as exc:  # noqa: BLE001 - any start failure must reach the parent as a reply
        control_out.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        os._exit(1)
    control_out.write(json.dumps({"ok": True, "port": port}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("op") == "stop":
            break
        try:
            reply = child.handle(command)
        except Exception as exc:  # noqa: BLE001 - a bad command is answered, never fatal to the server
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        control_out.write(json.dumps(reply) + "\n")
    child.control["control"]["done"] = True
    control_out.write(json.dumps({"ok": True}) + "\n")
    control_out.flush()
    os._exit(0)  # cpppo's connection threads are daemons; no need to wait for them


if __name__ == "__main__":
    main()
