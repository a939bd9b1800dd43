"""Keeping what a gateway holds: lease renewal, node-lock re-checks, takeovers, cancellation relay.

One thread per dispatcher. Every ``lease_seconds / 5`` it

1. re-checks the node lock (a PostgreSQL session lock dies with its session, e.g. on a server
   restart). A lost lock is taken back if nobody else took it; otherwise every run of this gateway
   stops at once, its leases are no longer renewed (so whoever holds the lock now can take the runs
   when they run out) and the dispatcher waits for the lock like a standby;
2. renews the leases of every run this owner holds, in one statement, and updates each execution's
   local validity from the moment the renewal was sent; an execution whose run was not renewed under
   its own generation lost the run and stops;
3. syncs the store clock, counts the live gateways of the store, and takes over runs whose lease
   expired (their gateway died or was cut off): all of them alone, its share of them when other
   gateways are alive (see :mod:`~exchange._engine.gateway.fair_share`); and releases the units that
   runs which ended still hold (their gateway was killed between the run's end and the release).

Between renewals it passes cancellation requests made from other processes to the runs executing
here: every ``cancel_poll_ms`` when the store changed since its last look (see
:class:`~exchange._engine.gateway.watcher.ChangeGate`), at least every second otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from exchange._engine.execution import Lease
from exchange._engine.gateway.fair_share import FairShare
from exchange._engine.gateway.outage import RepeatedLog
from exchange._engine.gateway.watcher import ChangeGate
from exchange._engine.operator import Runtime
from exchange._store import Holder, NodeLock
from exchange.errors import StoreError

log = logging.getLogger(__name__)
STORE_FAILED = RepeatedLog(log)  # once a second while the store fails: logged once a minute

RENEWALS_PER_LEASE = 5
STORE_RETRY_SECONDS = 0.5


class Holdings(Protocol):
    """What the lease keeper needs of its dispatcher: what it holds, and how to give runs up."""

    runtime: Runtime
    holder: Holder
    owner: str
    claim: bool
    node_lock: NodeLock | None
    serving: threading.Event
    queues: list[str] | None  # served queues (None: all); a takeover takes runs of these only
    share: FairShare  # this gateway's share of the work among the live gateways

    @property
    def closed(self) -> threading.Event: ...
    @property
    def stopping(self) -> bool: ...
    def active_runs(self) -> list[str]: ...
    def leases(self) -> dict[str, Lease]: ...
    def held(self) -> dict[str, tuple[int, float]]: ...
    def submit(self, run_id: str, generation: int) -> None: ...
    def lose(self, run_id: str, why: str) -> None: ...
    def lose_execution(self, run_id: str, lease: Lease, why: str) -> None: ...
    def lose_all(self, why: str) -> None: ...
    def regain_node_lock(self) -> None: ...


class LeaseKeeper:
    def __init__(self, dispatcher: Holdings, cancel_gate: ChangeGate) -> None:
        self.dispatcher = dispatcher
        self.cancel_gate = cancel_gate
        engine = dispatcher.runtime.config.engine
        self.renew_interval_seconds = max(0.05, engine.lease_seconds / RENEWALS_PER_LEASE)
        # The repair of units left by a run that ended holding them: once a lease, not at every
        # renewal (its read visits every open request: with 1,000 runs waiting for a unit it doubled
        # an idle gateway's reads of the store, bench/units.py).
        self.units_repair_seconds = engine.lease_seconds
        self._units_repaired_at = float("-inf")
        self.cancel_poll_seconds = engine.cancel_poll_ms / 1000

    def run(self) -> None:
        d = self.dispatcher
        next_renewal = time.monotonic()
        while True:
            wait_seconds = max(0.0, min(self.cancel_poll_seconds, next_renewal - time.monotonic()))
            if d.closed.wait(wait_seconds):
                return
            try:
                if self.cancel_gate.due():
                    self.relay_cancellations()
                if time.monotonic() >= next_renewal:
                    next_renewal = time.monotonic() + self.renew_interval_seconds
                    self.renew()
            except StoreError as exc:
                self.cancel_gate.failed()
                STORE_FAILED.log("lease keeping: the store failed, retrying: %s", exc)
                d.closed.wait(STORE_RETRY_SECONDS)
            except Exception:
                self.cancel_gate.failed()
                log.exception("lease keeping failed; retrying")

    def relay_cancellations(self) -> None:
        d = self.dispatcher
        for run_id, reason in d.runtime.store.runs.cancel_requested_of(d.owner).items():
            ctx = d.runtime.local_runs.get(run_id)
            if ctx is not None and not ctx.cancel_event.is_set():
                ctx.cancel(reason)

    def renew(self) -> None:
        d = self.dispatcher
        if not d.serving.is_set():
            return  # the node lock is lost: the leases run out on purpose
        sent_at = time.monotonic()
        lock = d.node_lock
        if lock is not None and not lock.check():
            if not lock.try_reacquire():
                self.node_lock_lost()
                return
            log.warning("node %s: the node lock was lost (the store restarted or the connection dropped) "
                        "and taken back; nobody else held it", d.holder.node)
        store = d.runtime.store
        renewed = store.runs.heartbeat(d.owner, d.holder.lease_seconds)
        took = time.monotonic() - sent_at
        if took > d.holder.lease_seconds * 0.25:
            log.warning("renewing %s lease(s) took %.2f s (lease %.1f s): the gateway is overloaded or the store "
                        "is slow", len(renewed), took, d.holder.lease_seconds)
        store.clock.sync()
        for run_id, lease in d.leases().items():
            if lease.created_at > sent_at:
                continue  # taken after the renewal was sent: not in it yet
            generation = renewed.get(run_id)
            if generation == lease.fence.generation:
                lease.renewed(sent_at)
            elif generation is None:
                d.lose(run_id, "another gateway took the run over")
            else:  # this process took the run again meanwhile: only the older execution stops
                d.lose_execution(run_id, lease, "the run was taken again under a newer lease")
        for run_id, (_generation, since) in d.held().items():
            if since < sent_at and run_id not in renewed and run_id not in d.leases():
                d.lose(run_id, "another gateway took the run over")
        if d.claim and not d.stopping:
            d.share.refresh()
            for rec in store.runs.take_over_expired(d.holder, exclude=set(d.held()) | set(d.active_runs()),
                                                    queues=d.queues, limit_of=d.share.takeover_limiter()):
                log.warning("taking over run %s of %s (its lease expired)", rec.id, rec.workflow)
                d.submit(rec.id, rec.lease_generation)
            due = time.monotonic() - self._units_repaired_at >= self.units_repair_seconds
            if d.runtime.config.units.units and due:  # a run ended holding units: killed before releasing
                self._units_repaired_at = time.monotonic()
                for run_id in store.units.release_ended_runs(grace_seconds=d.holder.lease_seconds):
                    log.warning("run %s ended holding units or waiting for them: released now", run_id)

    def node_lock_lost(self) -> None:
        d = self.dispatcher
        log.error(
            "node %s: the node lock was lost and could not be taken back (another gateway holds it, or "
            "the store does not answer); every run of this gateway stops, and it waits for the lock again",
            d.holder.node,
        )
        d.serving.clear()
        d.lose_all("the node lock was lost")
        thread = threading.Thread(target=d.regain_node_lock, name="exchange-regain-lock", daemon=True)
        thread.start()
