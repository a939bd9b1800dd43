"""Thread per run or parked runs? What waking a waiting run costs each way.

    .venv/bin/python bench/parking.py [--backends sqlite,postgresql] [--loops 0,100,1000,3000]

Issue 8 asks to measure both designs for long-lived waiting runs before choosing:

- *thread per run* (what Exchange does): a waiting run blocks its thread on an event; waking it is a
  thread switch. Measured here: 1,000 threads each waking every 0.2 s and 1 s (the shape of the
  operator loop in ``bench/scale.py``), CPU per wake-up.
- *greenlets on a hub* (not built): a run keeps its stack in a greenlet and waiting switches to one
  hub thread that wakes once per 10 ms for every timer due; measured here the same way as threads.
- *parked runs*: a waiting run gives its thread back and is resumed by replay when its timer or a
  message arrives. Measured here: the time to resume a run by replay up to the point where it waits
  again, for a run whose loop went round ``--loops`` times (each loop an idle poll and a short sleep,
  the answers made durable before one final step): a resume costs one execution start (a commit),
  loading the history, and re-executing the workflow body through every recorded quiet operation.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from common import add_store_args, installed_runtime, machine_note, stores

from exchange._engine.execution.context import current_run
from exchange._engine.execution.execution_lease import Lease
from exchange._engine.gateway.executor import execute_run
from exchange._store.records import Fence
from exchange._store.runs.runs import Holder
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_chunked

REACHED: dict[str, float] = {}  # run id -> when the replay reached the wait (perf_counter)


@step(name="parking.mark")
def mark() -> int:
    return 1


@workflow(name="parking.loop")
def loop(loops: int) -> int:
    rt = getWorkflows()
    for _ in range(loops):
        rt.recvCommand(timeoutSeconds=0)
        sleep_chunked(total_ms=1, chunk_ms=1)
    mark()  # makes every quiet answer above durable: a replay walks through all of them
    REACHED[_run_id()] = time.perf_counter()
    rt.checkCancelled()
    return loops


def _run_id() -> str:
    ctx = current_run()
    assert ctx is not None
    return ctx.run_id


def thread_wake_cost_us(threads: int = 1000, seconds: float = 6.0) -> float:
    """CPU microseconds per wake-up of a thread blocked on an event with a timeout."""
    stop = threading.Event()
    wakes = [0]

    def waiter() -> None:
        event = threading.Event()
        while not stop.is_set():
            event.wait(0.2)
            event.wait(1.0)
            wakes[0] += 2

    pool = [threading.Thread(target=waiter, daemon=True) for _ in range(threads)]
    for t in pool:
        t.start()
    return cpu_us_per_wake(wakes, seconds, stop)


def cpu_us_per_wake(wakes: list[int], seconds: float, stop: threading.Event) -> float:
    """After a 1.5 s settling time, this process's CPU over ``seconds`` per wake counted in
    ``wakes[0]``, in microseconds; then ``stop`` is set."""
    time.sleep(1.5)
    before, cpu_before = wakes[0], os.times()
    time.sleep(seconds)
    after, cpu_after = wakes[0], os.times()
    stop.set()
    cpu = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    return cpu / max(1, after - before) * 1e6


def hub_wake_cost_us(runs: int = 1000, seconds: float = 6.0, merge_seconds: float = 0.01) -> float:
    """CPU microseconds per wake-up of a run parked as a greenlet on one hub thread, whose timers
    are merged into one wake of the hub per ``merge_seconds`` (a third design, not built: runs keep
    their stacks without a thread each, but anything that blocks, a step body or a store write, would
    have to leave the hub for a thread, or stall every run on it)."""
    import heapq

    import greenlet  # SQLAlchemy's dependency

    timers: list[tuple[float, int, greenlet.greenlet]] = []
    wakes = [0]
    stop = threading.Event()
    hub: list[greenlet.greenlet] = []

    def park(wait_seconds: float) -> None:
        heapq.heappush(timers, (time.monotonic() + wait_seconds, id(greenlet.getcurrent()), greenlet.getcurrent()))
        hub[0].switch()

    def run_loop(offset: float) -> None:
        park(offset)
        while True:
            park(0.2)
            park(1.0)
            wakes[0] += 2

    def hub_loop() -> None:
        hub.append(greenlet.getcurrent())
        for i in range(runs):
            greenlet.greenlet(run_loop).switch(1.2 * i / runs)
        while not stop.is_set():
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                heapq.heappop(timers)[2].switch()
            stop.wait(max(merge_seconds, timers[0][0] - time.monotonic()) if timers else merge_seconds)

    thread = threading.Thread(target=hub_loop, daemon=True)
    thread.start()
    cost_us = cpu_us_per_wake(wakes, seconds, stop)
    thread.join(5)
    return cost_us


def replay_ms(url: str, loops: int, repeats: int = 5) -> float:
    """Median milliseconds to resume a run of ``loops`` loops by replay up to its final point."""
    with installed_runtime(url, lease_seconds=600) as runtime:  # no lease keeper here: one lease covers the bench
        holder = Holder(f"bench/{os.getpid()}", None, runtime.config.engine.lease_seconds)
        run_id, _ = runtime.create_run("parking.loop", {"loops": loops}, holder=holder)
        generation = 1
        assert execute_run(runtime, Lease.pending(Fence(run_id, holder.owner, generation), holder.lease_seconds)) \
            == "SUCCESS"
        times = []
        for _ in range(repeats):
            # Make it resumable again as the same owner (a parked run resumed by its own gateway).
            runtime.store.runs.set_fields(Fence(run_id, holder.owner, generation), "bench: resume",
                                          status="PENDING", finished_at=None)
            started = time.perf_counter()
            execute_run(runtime, Lease.pending(Fence(run_id, holder.owner, generation), holder.lease_seconds))
            times.append((REACHED[run_id] - started) * 1000)
        return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--loops", default="0,100,1000,3000")
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp))
        wake_us = thread_wake_cost_us()
        print(f"thread per run: {wake_us:.0f} us of CPU per wake-up (1,000 threads waking every 0.2 s and 1 s)")
        hub_us = hub_wake_cost_us()
        print(f"greenlets on one hub, timers merged per 10 ms (not built): {hub_us:.0f} us of CPU per wake-up, "
              f"{wake_us / hub_us:.1f}x less than a thread's (the same 1,000 loops, nothing else done)")
        for backend in s.names():
            for loops in [int(x) for x in args.loops.split(",")]:
                ms = replay_ms(s.fresh_url(backend), loops)
                print(f"[{backend}] parked run resumed by replay after {loops} loops ({2 * loops} quiet operations): "
                      f"{ms:.2f} ms per wake-up = {ms * 1000 / wake_us:.0f}x a thread's wake-up")


if __name__ == "__main__":
    main()
