"""The gateway's execution service: recovery, claiming, a bounded worker pool, leases, cancellation.

On start it first takes back the unfinished runs of its node (after a crash or a power loss) and
executes them by replay; then it claims ENQUEUED runs as worker slots free up. A control thread
renews the leases of the runs it holds, takes over runs whose lease expired (another gateway died),
and passes cancellation requests made from other processes to the runs executing here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from exchange.errors import StoreError
from exchange.workflows.engine.executor import RETRY_LATER, execute_run
from exchange.workflows.engine.runtime import Runtime
from exchange.workflows.store.node_lock import NodeLock
from exchange.workflows.store.records import RunRecord

log = logging.getLogger(__name__)

STORE_RETRY_MIN_SECONDS = 1.0
STORE_RETRY_MAX_SECONDS = 30.0


class Dispatcher:
    """Executes runs of ``runtime`` on up to ``workers`` threads under the owner id ``owner``.

    ``claim=False`` makes a dispatcher that only executes the runs handed to :meth:`submit` (the
    ``exchange run`` command), still renewing their leases.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        owner: str | None = None,
        workers: int | None = None,
        claim: bool = True,
        queues: Sequence[str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.owner = owner or runtime.node_id
        self.workers = workers or runtime.config.engine.workers
        self.claim = claim
        self.queues = list(queues) if queues else None
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="exchange-run")
        self._active: set[str] = set()
        self._active_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._node_lock = NodeLock(runtime.store.db, self.owner)
        self._store_retries: dict[str, int] = {}
        engine = runtime.config.engine
        self._lease_seconds = engine.lease_seconds
        self._dispatch_poll_seconds = engine.dispatch_poll_ms / 1000
        self._control_poll_seconds = engine.cancel_poll_ms / 1000

    # ----- lifecycle -----------------------------------------------------------------------------
    def start(self, *, standby: bool = False) -> list[str]:
        """Recover this owner's unfinished runs, then start claiming. Returns the recovered run ids.

        ``standby``: first wait, fully loaded, until no other gateway of this node id is alive (its
        node lock is free), then take over at once: the hot standby that makes a crash's recovery
        time the lock hand-over instead of a process start.
        """
        if self.claim:
            self._node_lock.acquire(wait=standby, stop=self._stop)
        recovered = self.runtime.store.runs.reclaim(self.owner, self._lease_seconds) if self.claim else []
        for rec in recovered:
            log.info("recovering run %s of %s", rec.id, rec.workflow)
            self.submit(rec.id)
        if self.claim:
            self.runtime.on_enqueue(self._wake.set)
            self._spawn(self._dispatch_loop, "exchange-dispatch")
        self._spawn(self._control_loop, "exchange-control")
        return [rec.id for rec in recovered]

    def request_stop(self) -> None:
        """Ask the loops (and a standby's wait for the node lock) to end; safe from a signal handler."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Stop claiming, suspend executing runs at their next wait point, and wait for the workers.

        Suspended runs keep their owner and status; the next start of this node resumes them.
        """
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout_seconds
        # Repeat: a run handed to a worker just before the stop attaches its context a moment later.
        while self.active_runs() and time.monotonic() < deadline:
            for run_id in self.active_runs():
                ctx = self.runtime.local_run(run_id)
                if ctx is not None and not ctx.suspended:
                    ctx.suspend()
            time.sleep(0.005)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=not self.active_runs(), cancel_futures=True)
        self._node_lock.release()

    def _spawn(self, target: object, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    # ----- execution -----------------------------------------------------------------------------
    def active_runs(self) -> list[str]:
        with self._active_lock:
            return list(self._active)

    def free_slots(self) -> int:
        with self._active_lock:
            return self.workers - len(self._active)

    def submit(self, run_id: str) -> None:
        with self._active_lock:
            if run_id in self._active:
                return
            self._active.add(run_id)
        self._pool.submit(self._execute, run_id)

    def _execute(self, run_id: str) -> None:
        outcome: str | None = None
        try:
            if self._stop.is_set():
                return  # stays PENDING under this owner; the next start resumes it
            outcome = execute_run(self.runtime, run_id, self.owner)
        except Exception:
            log.exception("run %s: the executor failed; the run stays for recovery", run_id)
        finally:
            with self._active_lock:
                self._active.discard(run_id)
            self._wake.set()
        if outcome == RETRY_LATER:
            self._retry_later(run_id)
        else:
            self._store_retries.pop(run_id, None)

    def _retry_later(self, run_id: str) -> None:
        """Execute the run again after a backoff (1 s doubling to 30 s) while the store is failing."""
        tries = self._store_retries.get(run_id, 0) + 1
        self._store_retries[run_id] = tries
        delay_seconds = min(STORE_RETRY_MAX_SECONDS, STORE_RETRY_MIN_SECONDS * 2.0 ** (tries - 1))
        timer = threading.Timer(delay_seconds, self._resubmit, args=(run_id,))
        timer.daemon = True
        timer.start()

    def _resubmit(self, run_id: str) -> None:
        if not self._stop.is_set():
            self.submit(run_id)

    # ----- background loops ----------------------------------------------------------------------
    def _dispatch_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                free = self.free_slots()
                claimed: list[RunRecord] = []
                if free > 0:
                    claimed = self.runtime.store.runs.claim(self.owner, free, self._lease_seconds, self.queues)
                for rec in claimed:
                    self.submit(rec.id)
                if claimed and self.free_slots() > 0:
                    continue  # more may be waiting
            except StoreError as exc:
                log.warning("claiming runs failed, retrying in %.0f s: %s", STORE_RETRY_MIN_SECONDS, exc)
                self._stop.wait(STORE_RETRY_MIN_SECONDS)
            except Exception:
                log.exception("claiming runs failed; retrying")
            self._wake.wait(self._dispatch_poll_seconds)

    def _control_loop(self) -> None:
        last_heartbeat = 0.0
        while not self._stop.wait(self._control_poll_seconds):
            try:
                active = self.active_runs()
                for run_id, reason in self.runtime.store.runs.cancel_requested(active).items():
                    ctx = self.runtime.local_run(run_id)
                    if ctx is not None and not ctx.cancel_event.is_set():
                        ctx.cancel(reason)
                now = time.monotonic()
                if now - last_heartbeat >= self._lease_seconds / 3:
                    last_heartbeat = now
                    self.runtime.store.runs.heartbeat(self.owner, self._lease_seconds)
                    if self.claim:
                        for rec in self.runtime.store.runs.reclaim(self.owner, self._lease_seconds, own=False):
                            log.warning("taking over run %s (lease expired)", rec.id)
                            self.submit(rec.id)
            except StoreError as exc:
                log.warning("control loop: the store failed, retrying: %s", exc)
                self._stop.wait(STORE_RETRY_MIN_SECONDS)
            except Exception:
                log.exception("control loop iteration failed; retrying")
