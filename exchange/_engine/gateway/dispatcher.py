"""The gateway's execution service: recovery, claiming, a bounded worker pool, and stopping.

A gateway process is one *owner* (``<node id>/<pid>-<tag>``, distinct for an active gateway and its
standby) of a *node*. On start it takes the node lock (:mod:`exchange._store.gateways.node_lock`),
takes back its node's unfinished runs (after a crash or a power loss) and executes them by replay;
then it claims ENQUEUED runs as worker slots free up (its share of them while other gateways are alive,
:mod:`~exchange._engine.gateway.fair_share`). :class:`~exchange._engine.gateway.lease_keeper.LeaseKeeper`
renews the leases of what it holds, re-checks the node lock, takes over runs whose lease expired (a
gateway died) and relays cancellations; :class:`~exchange._engine.gateway.outage.StoreWaiter` resumes
runs that stopped on a store failure as soon as the store answers.

Each execution holds its run under a :class:`~exchange._engine.execution.execution_lease.Lease` whose fence goes
into every write, so a run that changed hands is never written by its previous holder.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Unpack

from exchange._engine.execution import Lease
from exchange._engine.gateway.executor import NOT_OURS, RETRY_LATER, SUSPENDED, execute_run
from exchange._engine.gateway.fair_share import FairShare
from exchange._engine.gateway.lease_keeper import LeaseKeeper
from exchange._engine.gateway.outage import RepeatedLog, StoreWaiter
from exchange._engine.gateway.saturation import Saturation
from exchange._engine.gateway.watcher import ChangeGate, MailWatcher
from exchange._engine.operator import Runtime, StartKeywords
from exchange._store import Fence, Holder, NodeLock, RunRecord
from exchange.errors import StoreError

log = logging.getLogger(__name__)
EXECUTOR_FAILED = RepeatedLog(log, logging.ERROR)
CLAIM_FAILED = RepeatedLog(log)

CLAIM_RETRY_SECONDS = 1.0
# Claims and cancel relays look at the store when the mail watcher saw it change, and at least this
# often whatever it saw (a notification lost in a reconnect costs at most this much delay).
LOOK_ANYWAY_SECONDS = 1.0


def new_owner_id(node: str | None, kind: str = "") -> str:
    """An owner id unique to this process: ``<node>/<pid>-<tag>`` (``kind`` marks e.g. ``run``)."""
    # os.urandom, not the secrets module: the tag needs no more, and a gateway's restart does not
    # import secrets (and hmac) on its way to its first resumed step.
    return f"{node or 'local'}/{kind}{os.getpid()}-{os.urandom(2).hex()}"


class Dispatcher:
    """Executes runs of ``runtime`` on up to ``workers`` threads as one owner of the runtime's node.

    ``claim=False`` makes a dispatcher with no node that only executes the runs handed to it
    (:meth:`create_and_submit`, the ``exchange run`` command), still renewing their leases.
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
        self.claim = claim
        node = runtime.node_id if claim else None
        self.owner = owner or new_owner_id(node, "" if claim else "run-")
        engine = runtime.config.engine
        self.holder = Holder(self.owner, node, engine.lease_seconds)
        self.workers = workers or engine.workers
        self.queues = list(queues) if queues else None
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="exchange-run")
        self._lock = threading.Lock()
        self._active: dict[str, Lease] = {}  # executing (or handed to a worker)
        # run id -> (lease generation this process holds it under, monotonic time it was taken)
        self._held: dict[str, tuple[int, float]] = {}
        self._again: set[str] = set()  # taken again while an older execution still runs: run it after
        self._reserved = 0  # workers kept for the claims of starts in this process (reserve_worker)
        # A claim is worth its write now, without a look first: a start here left its run to claim,
        # or a run that may have held a partition key ended here.
        self._claim_now = False
        self._backlog = True  # the last claim may have left claimable runs (it took all it could)
        self._wake = threading.Event()
        self._stopping = threading.Event()  # no claims or takeovers; workers are being suspended
        self._closed = threading.Event()  # the background loops end
        self.serving = threading.Event()  # holds the node lock (or needs none) and may execute
        self._threads: list[threading.Thread] = []
        self.node_lock = (NodeLock(runtime.store.db, runtime.store.nodes, runtime.node_id, self.owner, self.queues)
                          if claim else None)
        self._dispatch_poll_seconds = engine.dispatch_poll_ms / 1000
        self.waiter = StoreWaiter(probe=runtime.store.clock.sync, resume=self._resume)
        self.watcher = MailWatcher(runtime.store, runtime.local_runs.notify_mail, engine.mailbox_poll_ms / 1000,
                                   wake_all=runtime.local_runs.notify_all_mail)
        self.watcher.on_runs_changed = self._wake.set  # a run enqueued elsewhere is claimed at once
        self.keeper = LeaseKeeper(self, ChangeGate(self.watcher, LOOK_ANYWAY_SECONDS))
        self.share = FairShare(runtime.store.nodes, runtime.node_id, self.queues, self.keeper.renew_interval_seconds,
                               self._dispatch_poll_seconds)
        self._claim_gate = ChangeGate(self.watcher, LOOK_ANYWAY_SECONDS)
        self.saturation = Saturation(self.workers, self._count_claimable)

    # ----- lifecycle -----------------------------------------------------------------------------
    def start(self, *, standby: bool = False) -> list[str]:
        """Take the node lock, recover the node's unfinished runs, then start claiming. Returns the
        recovered run ids.

        ``standby``: first wait, fully loaded, until no other gateway of this node id is alive (its
        node lock is free), then take over at once: the hot standby that makes a crash's recovery
        time the lock hand-over instead of a process start.
        """
        recovered: list[RunRecord] = []
        if self.node_lock is not None:
            certain = self.node_lock.acquire(wait=standby, stop=self._stopping)
        # The lease row whose renewal renews every run this process holds: there before the first.
        self.runtime.store.runs.register_owner(self.owner, self.holder.lease_seconds)
        if self.node_lock is not None:
            recovered = self.runtime.store.runs.recover_node(self.holder, expired_only=not certain)
            self.share.refresh_quietly()  # the first claim knows the other gateways already
        self.watcher.start()
        self.runtime.mail_watched = True
        self.serving.set()
        for rec in recovered:
            log.info("recovering run %s of %s", rec.id, rec.workflow)
            self.submit(rec.id, rec.lease_generation)
        if self.claim:
            self.runtime.worker_limit = self.workers
            self.runtime.on_enqueue(self._on_enqueue)
            self.runtime.claim_on_start(self)
            self._spawn(self._dispatch_loop, "exchange-dispatch")
        self._spawn(self.keeper.run, "exchange-leases")
        self.waiter.start()
        return [rec.id for rec in recovered]

    def request_stop(self) -> None:
        """Ask the loops (and a standby's wait for the node lock) to end; safe from a signal handler."""
        self._stopping.set()
        self._wake.set()

    def stop(self, timeout_seconds: float = 10.0, *, abandon: bool = True) -> list[str]:
        """Stop claiming, suspend executing runs at their next wait point, and wait for the workers.

        Suspended runs keep their owner and status; the next start of this node resumes them. Leases
        are renewed while the workers finish. Returns the runs still inside a step after
        ``timeout_seconds``: with ``abandon`` this process gives them up (they write nothing more,
        the node lock is released); without it nothing is released, and the caller should end the
        process (which stops the step bodies and frees the lock at once).
        """
        self._stopping.set()
        self._wake.set()
        self.runtime.withdraw_start_claims(self)
        deadline = time.monotonic() + timeout_seconds
        # Repeat: a run handed to a worker just before the stop attaches its context a moment later.
        while self.active_runs() and time.monotonic() < deadline:
            for run_id in self.active_runs():
                ctx = self.runtime.local_runs.get(run_id)
                if ctx is not None and not ctx.suspended:
                    ctx.suspend()
            time.sleep(0.005)
        busy = self.active_runs()
        if busy and not abandon:
            return busy
        for run_id in busy:
            self.lose(run_id, "the gateway stopped while the run was inside a step")
        self._closed.set()
        self.waiter.stop()
        self.watcher.stop()
        self.runtime.mail_watched = False
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.node_lock is not None:
            self.node_lock.release()
        return busy

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def closed(self) -> threading.Event:
        return self._closed

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # ----- what this process holds ----------------------------------------------------------------
    def active_runs(self) -> list[str]:
        with self._lock:
            return list(self._active)

    def leases(self) -> dict[str, Lease]:
        with self._lock:
            return dict(self._active)

    def held(self) -> dict[str, tuple[int, float]]:
        """Run id -> (lease generation, monotonic time taken) of every run this process holds."""
        with self._lock:
            return dict(self._held)

    def free_slots(self) -> int:
        with self._lock:
            return self.workers - len(self._active) - self._reserved

    def reserve_worker(self) -> tuple[Holder, list[str] | None] | None:
        """A free worker kept for a start's claim (see :class:`~exchange._engine.operator.runtime.StartClaimant`):
        the holder and queues to claim with, or None (none free, not serving, stopping, or other
        gateways alive: then the start leaves its run to the claims that share the work)."""
        if not self.serving.is_set() or self._stopping.is_set() or self.share.peers > 1:
            return None
        with self._lock:
            if self.workers - len(self._active) - self._reserved <= 0:
                return None
            self._reserved += 1
        return self.holder, self.queues

    def run_claimed(self, records: list[RunRecord], sent_at: float) -> None:
        """Execute the runs a start claimed for the worker it reserved, then free the reservation."""
        try:
            for rec in records:
                self.submit(rec.id, rec.lease_generation, started=(rec, sent_at))
        finally:
            with self._lock:
                self._reserved -= 1

    def create_and_submit(self, name: str, params: dict[str, Any] | None = None,
                          **options: Unpack[StartKeywords]) -> str:
        """Create a run held by this dispatcher (with its lease from the first write) and execute it
        here; returns the run id."""
        run_id, _ = self.runtime.create_run(name, params, holder=self.holder, **options)
        self.submit(run_id, 1)
        return run_id

    def submit(self, run_id: str, generation: int, started: tuple[RunRecord, float] | None = None) -> None:
        """Execute ``run_id``, held under ``generation``, on a worker (later, if an older execution of
        it is still running here). ``started``: the record of an execution already started by the
        claim, and the monotonic time that claim was sent (its lease counts from then)."""
        if self._closed.is_set():
            return  # stopped: the run stays with this owner and resumes on the node's next start
        fence = Fence(run_id, self.owner, generation)
        with self._lock:
            self._held[run_id] = (generation, time.monotonic())
            if run_id in self._active:
                self._again.add(run_id)
                return
            if started is None:
                self._active[run_id] = Lease.pending(fence, self.holder.lease_seconds)
            else:
                self._active[run_id] = Lease(fence, self.holder.lease_seconds, granted_at=started[1])
        # Not forget(): a run resumed after a failure keeps its count, or one whose executions all
        # fail at once (a full disk, which the waiter's read does not see) would never back off.
        self.waiter.resumed(run_id)
        self._pool.submit(self._execute, run_id, None if started is None else started[0])

    def lose(self, run_id: str, why: str) -> None:
        """This process no longer holds ``run_id``: its execution stops at its next check."""
        with self._lock:
            self._held.pop(run_id, None)
            self._again.discard(run_id)
            lease = self._active.get(run_id)
        self.waiter.forget(run_id)
        if lease is not None:
            lease.lose(why)
        ctx = self.runtime.local_runs.get(run_id)
        if ctx is not None:
            ctx.lose_ownership(why)

    def lose_execution(self, run_id: str, lease: Lease, why: str) -> None:
        """Stop one execution (its lease is stale) without giving up the run itself."""
        lease.lose(why)
        ctx = self.runtime.local_runs.get(run_id)
        if ctx is not None and ctx.lease is lease:
            ctx.lose_ownership(why)

    def lose_all(self, why: str) -> None:
        for run_id in set(self.held()) | set(self.active_runs()):
            self.lose(run_id, why)
        self.waiter.clear()

    def _resume(self, run_id: str) -> None:
        held = self.held().get(run_id)
        if held is not None and self.serving.is_set() and not self._stopping.is_set():
            self.submit(run_id, held[0])

    def _execute(self, run_id: str, started: RunRecord | None) -> None:
        with self._lock:
            lease = self._active[run_id]
        outcome = RETRY_LATER
        try:
            if self._stopping.is_set():
                outcome = SUSPENDED  # stays active under this owner; the next start resumes it
            else:
                outcome = execute_run(self.runtime, lease, started)
        except Exception as exc:
            # The run backs off (the waiter); the log says it once a minute, not once a try.
            EXECUTOR_FAILED.log("run %s: the executor failed; the run will be executed again: %s: %s",
                                    run_id, type(exc).__name__, exc, exc_info=True)
        finally:
            with self._lock:
                if started is None or started.partition_key is not None:
                    self._claim_now = True  # its key may hold runs back: they are claimable now
                self._active.pop(run_id, None)
                again = run_id in self._again
                self._again.discard(run_id)
                held = self._held.get(run_id)
                if outcome not in (RETRY_LATER, SUSPENDED) and not again:
                    self._held.pop(run_id, None)
            self._wake.set()
        if again and held is not None:
            self.submit(run_id, held[0])
        elif outcome == RETRY_LATER and held is not None and not self._stopping.is_set():
            self.waiter.add(run_id)
        elif outcome not in (RETRY_LATER, SUSPENDED, NOT_OURS):
            self.waiter.succeeded(run_id)

    # ----- claiming ------------------------------------------------------------------------------
    def regain_node_lock(self) -> None:
        """After the node lock was lost to another gateway: wait for it like a standby, then take the
        node's runs back as a start does. Runs on its own thread."""
        assert self.node_lock is not None
        while not self._stopping.is_set():
            try:
                certain = self.node_lock.acquire(wait=True, stop=self._stopping)
                recovered = self.runtime.store.runs.recover_node(self.holder, expired_only=not certain)
            except StoreError as exc:
                if self._stopping.is_set():
                    return
                log.warning("node %s: taking the node lock back failed, trying again: %s", self.holder.node, exc)
                self.node_lock.release()
                self._stopping.wait(CLAIM_RETRY_SECONDS)
                continue
            log.warning("node %s: this gateway holds the node lock again; %s run(s) recovered",
                        self.holder.node, len(recovered))
            self.serving.set()
            for rec in recovered:
                self.submit(rec.id, rec.lease_generation)
            self._on_enqueue()
            return

    def _on_enqueue(self) -> None:
        with self._lock:
            self._claim_now = True
        self._wake.set()

    def _count_claimable(self) -> int:
        """The ENQUEUED runs of this gateway's queues a claim could take now (a read)."""
        return self.runtime.store.runs.count_claimable(self.queues)

    def _dispatch_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            leave_a_turn = False
            try:
                free = self.free_slots()
                if self.serving.is_set():
                    self.saturation.observe(free)
                claimed: list[RunRecord] = []
                # Claim when a start here left a run, a run with a partition key ended here, or the
                # last claim took all it could. Otherwise only when the store changed since the last
                # look (most often by this gateway's own writes) and a read finds runs waiting: an
                # idle gateway writes nothing, a freed worker costs nothing while the starts claim
                # for themselves (Runtime.start), and the count read serves the share's count too.
                with self._lock:
                    claim_now, self._claim_now = self._claim_now, False
                ready = free > 0 and self.serving.is_set()
                waiting = -1  # not read
                if ready and not (claim_now or self._backlog) and self._claim_gate.due():
                    waiting = self._count_claimable()
                if ready and (claim_now or self._backlog or waiting > 0):
                    limit, leave_a_turn = self.share.claim_limit(
                        free, self._count_claimable if waiting < 0 else functools.partial(int, waiting))
                    sent_at = time.monotonic()
                    self._backlog = True  # until a claim shows it took less than it could
                    if limit > 0:
                        claimed = self.runtime.store.runs.claim(self.holder, limit, self.queues)
                        self._backlog = len(claimed) >= limit or leave_a_turn
                    leave_a_turn = leave_a_turn and bool(claimed)  # nothing taken: nothing to wait for
                for rec in claimed:
                    self.submit(rec.id, rec.lease_generation, started=(rec, sent_at))
                if claimed and not leave_a_turn and self.free_slots() > 0:
                    continue  # more may be waiting
            except StoreError as exc:
                leave_a_turn = False
                self._claim_gate.failed()
                CLAIM_FAILED.log("claiming runs failed, retrying in %.0f s: %s", CLAIM_RETRY_SECONDS, exc)
                self._stopping.wait(CLAIM_RETRY_SECONDS)
            except Exception:
                leave_a_turn = False
                self._claim_gate.failed()
                log.exception("claiming runs failed; retrying")
            if leave_a_turn:
                # Runs were left for the other gateways: give them a dispatch turn (a freed worker here
                # does not cut it short), then look again whatever the store says.
                self._stopping.wait(self._dispatch_poll_seconds)
                continue
            self._wake.wait(self._dispatch_poll_seconds)
