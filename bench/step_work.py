"""The Python work of one durable step, counted instead of timed: bytecodes and calls per step.

    .venv/bin/python bench/step_work.py [--top 25]

``steps.py`` times a step; on a shared 2-core machine those times move 15-40 % between runs of the
same code. This bench counts what the engine's own Python does per step instead, which no load
changes: every bytecode executed and every Python function called, by function, through an opcode
trace (``sys.settrace`` with ``f_trace_opcodes``). It runs each path with 100 and with 600
operations, each time on a fresh SQLite file, and prints the difference divided by 500, so that what
a run costs once (its start, its end, the store's opening) drops out; a first, uncounted round of 50
takes what the process does once (caches, lazy imports) out too:

- *a store write*: a step outcome recorded through ``StepTable.record`` (the group commit, the typed
  statement, the fence), no workflow;
- *a step*: one workflow of N no-op steps executed on this thread (the stepper, replay, encoding, the
  lease and cancel checks, and the store write).

A bytecode is not a fixed amount of time (one builds a dict, another compares two ints) and C code
(the sqlite3 module, json's encoder) counts as the one call that enters it, so compare these figures
between versions of the code, not with microseconds. ``steps.py`` prints the time.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import steps
from common import ROOT, installed_runtime

from exchange._engine.gateway.executor import execute_run

WARM_UP, SMALL, LARGE = 50, 100, 600


class OpcodeCounter:
    """Bytecodes executed and calls made, by function (``file:function``), while installed."""

    def __init__(self) -> None:
        self.bytecodes: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def _trace(self, frame: FrameType, event: str, _arg: Any) -> Callable[..., Any]:
        frame.f_trace_opcodes = True
        code = frame.f_code
        where = f"{Path(code.co_filename).name}:{code.co_name}"
        if code.co_filename == "<string>":  # a dataclass's generated __init__: name the class
            owner = frame.f_locals.get("self")
            if owner is not None:
                where = f"{type(owner).__name__}.{code.co_name}"
        if event == "opcode":
            self.bytecodes[where] += 1
        elif event == "call":
            self.calls[where] += 1
        return self._trace

    def count(self, work: Callable[[], object]) -> None:
        sys.settrace(self._trace)
        threading.settrace(self._trace)
        try:
            work()
        finally:
            sys.settrace(None)
            threading.settrace(None)


def per_operation(path: Callable[[str, int], object], folder: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Bytecodes and calls per operation of ``path(store_url, n)``, by function."""
    counted = []
    for n in (WARM_UP, SMALL, LARGE):
        counter = OpcodeCounter()
        url = f"sqlite:///{folder / f'work-{uuid.uuid4().hex}.db'}"
        counter.count(functools.partial(path, url, n))
        counted.append(counter)
    _warm_up, small, large = counted
    spread = LARGE - SMALL
    bytecodes = {k: (large.bytecodes[k] - small.bytecodes[k]) / spread for k in large.bytecodes}
    calls = {k: (large.calls[k] - small.calls[k]) / spread for k in large.calls}
    return bytecodes, calls


def one_step_path(url: str, n: int) -> None:
    # A long lease: the opcode trace makes the run many times slower than it is.
    with installed_runtime(url, lease_seconds=3600.0) as runtime:
        status = execute_run(runtime, steps.held_run(runtime, n))
        assert status == "SUCCESS", status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="functions listed per path (default 25)")
    args = parser.parse_args()
    print(f"code: {ROOT}; Python {sys.version.split()[0]}")
    paths: list[tuple[str, Callable[[str, int], object]]] = [
        ("a store write (StepTable.record)", lambda url, n: steps.store_write_us(url, n)),
        ("a step (one workflow of N no-op steps)", one_step_path),
    ]
    with tempfile.TemporaryDirectory(prefix="exchange-bench-") as tmp:
        for title, path in paths:
            bytecodes, calls = per_operation(path, Path(tmp))
            print(f"{title}: {sum(bytecodes.values()):.0f} bytecodes, {sum(calls.values()):.1f} Python calls")
            ranked = sorted(bytecodes.items(), key=lambda item: -item[1])
            for where, count in ranked[: args.top]:
                if count >= 0.5:
                    print(f"  {count:6.1f} bytecodes  {calls.get(where, 0.0):4.1f} calls  {where}")


if __name__ == "__main__":
    main()
