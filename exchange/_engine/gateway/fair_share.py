"""Several gateways on one store share the work: how many runs this gateway takes at a time.

A gateway alone on its store takes what it can, as it always did: a free worker's worth of ENQUEUED
runs per claim and every run whose lease ran out per takeover; what it pays to know it is alone is
one small read per renewal and at most one per :data:`COUNT_FRESH_SECONDS` while it claims.

When other gateways are alive that could take this gateway's runs (their node rows saw their
locks held within the last :data:`LIVE_RENEWALS` lease renewals, and serve one of its queues at
least: a gateway started with ``--queue line2`` is no peer of one serving ``line1`` only; a hot
standby holds no lock and is not counted), each claim
and each takeover brings this gateway up to an equal share of the work and no further: the runs
waiting plus the active runs the live gateways hold, divided by their number, less what this
gateway holds already (:func:`fair_share`). So a batch of runs started at once is split instead of
going to the first gateway that looks, runs started one by one in one gateway's process (its HTTP
API, a parent's children) do not all stay there, long-lived runs end up spread over the gateways,
and the runs of a dead gateway are shared by the survivors. After a claim that left runs for the
others, the dispatcher waits one dispatch turn before it claims again, so that they get in.

Nothing is stranded. Runs a gateway leaves for the others while the others take none (their workers
are all busy, they serve only some of its queues, they stopped) are taken whole at its first look once
:attr:`FairShare.grace_seconds` passed: the others "take" while the runs their nodes hold grow.
Runs whose lease ran out that this gateway's takeovers left for the others at
:data:`TAKEOVER_LEFT_PASSES` renewals in a row are taken whole at its next. Fairness costs two
reads per claim while other gateways are alive, and never a write. It never touches who may write
to a run: claims and takeovers stay the store's own (one owner, fenced writes), only their size
changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from exchange._store import NodeTable
from exchange.errors import StoreError

log = logging.getLogger(__name__)

# A node whose gateway saw its lock held within this many of its lease renewals counts as alive (a
# renewal every lease_seconds / 5: 3 s with the default 5 s lease, so a killed gateway stops counting
# before its runs' leases run out and the survivors divide its runs among themselves only).
LIVE_RENEWALS = 3
# A claim counts the live gateways again when its count is older than this: a gateway started a
# moment ago is known before the others' next renewal, at one small read per this time at most (a
# gateway alone makes it only when it claims, never while idle).
COUNT_FRESH_SECONDS = 0.1
# Runs left for the others that they do not take (the runs they hold do not grow) for this many
# dispatch turns, and at least MIN_GRACE_SECONDS, are taken by the gateway that left them. A second:
# on a loaded machine a gateway woken by the same notice can need a few hundred ms (three reads and
# a claim, each a turn behind busy threads) before its first claim shows.
GRACE_TURNS = 3
MIN_GRACE_SECONDS = 1.0
# Runs whose lease ran out that this many takeover passes in a row left for the others (one pass a
# renewal) are taken whole at the next: two, as a pass of another gateway that overlaps this one's
# transaction finds nothing (the dead owner's row is locked) and gets its chance at its next pass.
TAKEOVER_LEFT_PASSES = 2


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def fair_share(waiting: int, held_by_all: int, mine: int, peers: int) -> int:
    """How many of ``waiting`` runs a gateway holding ``mine`` active runs takes, when ``peers`` live
    gateways (it among them) hold ``held_by_all`` (its own included): what brings it to an equal
    share of all the work (none if it holds that already), at most all of them. Alone (``peers``
    <= 1): everything."""
    if waiting <= 0:
        return 0
    if peers <= 1:
        return waiting
    return max(0, min(waiting, _ceil_div(waiting + held_by_all, peers) - mine))


class FairShare:
    """The share of one gateway (node ``node_id``, serving ``queues``: None for all) of the work on
    its store. ``renew_interval_seconds``: how often the gateways renew their leases and look at their
    node locks, which is how often their node rows say they are alive; ``turn_seconds``: the
    gateways' dispatch turn (``[engine] dispatch_poll_ms``)."""

    def __init__(self, nodes: NodeTable, node_id: str, queues: Sequence[str] | None,
                 renew_interval_seconds: float, turn_seconds: float = 0.1) -> None:
        self.nodes = nodes
        self.node_id = node_id
        self.queues = list(queues) if queues else None
        self.live_within_seconds = LIVE_RENEWALS * renew_interval_seconds
        self.grace_seconds = max(MIN_GRACE_SECONDS, GRACE_TURNS * turn_seconds)
        self.peers = 1  # live gateways on the store, this one included, as of the last look
        self._counted_at = float("-inf")  # monotonic time of that look
        self._leaving_since: float | None = None  # the looks since then left runs the others did not take
        self._others_held = 0  # the active runs the other live gateways held at the last of them
        self._takeover_left_passes = 0  # the takeovers in a row that left runs for the others

    def refresh(self) -> None:
        """Count the live gateways again (one read): the lease keeper does at every renewal, and a
        claim when the count is older than :data:`COUNT_FRESH_SECONDS`."""
        self._counted_at = time.monotonic()
        self.peers = max(1, self.nodes.count_live(self.live_within_seconds, self.queues))

    def refresh_quietly(self) -> None:
        try:
            self.refresh()
        except StoreError as exc:
            log.debug("counting the live gateways failed; the next renewal counts them: %s", exc)

    def _share(self, waiting: int) -> tuple[int, int]:
        """This gateway's share of ``waiting`` runs, and the active runs the other live gateways
        hold (two reads)."""
        load = self.nodes.load(self.live_within_seconds, self.queues)
        self._counted_at = time.monotonic()
        self.peers = max(1, load.live_nodes)
        mine = load.held.get(self.node_id, 0)
        return fair_share(waiting, load.held_by_all, mine, self.peers), load.held_by_all - mine

    def claim_limit(self, free: int, count_waiting: Callable[[], int]) -> tuple[int, bool]:
        """How many ENQUEUED runs to claim with ``free`` workers, and whether that leaves runs for the
        other gateways (then the dispatcher lets a turn pass before it claims again). Alone: ``free``
        (after counting the gateways, at most once per :data:`COUNT_FRESH_SECONDS`); otherwise
        ``count_waiting()`` (a read), the load (two reads) and :func:`fair_share`, or every run
        waiting when this gateway has left runs for :attr:`grace_seconds` and the others took none."""
        if free <= 0:
            return free, False
        if time.monotonic() - self._counted_at > COUNT_FRESH_SECONDS:
            self.refresh()
        if self.peers <= 1:
            self._leaving_since = None
            return free, False
        waiting = count_waiting()
        share, others_held = self._share(waiting) if waiting > 0 else (0, 0)
        if share >= waiting:
            self._leaving_since = None
            return min(free, share), False
        now = time.monotonic()
        if self._leaving_since is None or others_held > self._others_held:
            self._leaving_since = now  # the others are taking: they get their turns
        elif now - self._leaving_since >= self.grace_seconds:
            self._leaving_since = None
            log.debug("%d run(s) waited %.1f s and the other gateways took none: taking them",
                      waiting, self.grace_seconds)
            return min(free, waiting), False
        self._others_held = others_held
        return min(free, share), True

    def takeover_limiter(self) -> Callable[[int], int] | None:
        """For one takeover pass: None to take every run whose lease ran out (alone, or when the last
        :data:`TAKEOVER_LEFT_PASSES` passes each left runs for the others and some are still there);
        otherwise the function the takeover calls with the number it found (before its write
        transaction), which gives this gateway's share of them."""
        left_passes, self._takeover_left_passes = self._takeover_left_passes, 0
        if self.peers <= 1 or left_passes >= TAKEOVER_LEFT_PASSES:
            return None

        def limit(expired: int) -> int:
            try:
                share, _others_held = self._share(expired)
            except StoreError as exc:
                log.debug("reading the gateways' load failed; taking every expired run: %s", exc)
                return expired
            if share < expired:
                self._takeover_left_passes = left_passes + 1
            return share

        return limit
