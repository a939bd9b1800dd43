"""``[attention] webhook_url``: a JSON POST when a run starts needing someone.

Every :data:`LOOK_SECONDS` a gateway reads the runs that need someone
(:mod:`exchange._engine.operator.attention`) and POSTs each new ``(run, reason, since)`` once::

    {"event": "attention", "run": "...", "workflow": "...", "status": "RUNNING", "state": "HELD",
     "reason": "held", "since": "2026-...+00:00", "detail": "held on step 3 ...", "gateway": "node"}

A row is new until a POST of it was answered 2xx: the answer is recorded as an ``attention_notified``
event of the run (with the reason and since), so a restarted gateway, or another gateway on the
store, does not send it again; a run that needs someone again later (a retry that failed again) is
a new row. Of several gateways, the one that takes the store's ``attention_webhook`` lease in a look
sends. A POST that fails (refused, timed out, not 2xx) is tried again after 1, 2, 4 ... up to
:data:`BACKOFF_MAX_SECONDS`, and logged at most once a minute. It all happens on the hook's own
thread: a slow or dead webhook never holds a run up.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from exchange._config import AttentionConfig
from exchange._engine import RepeatedLog, Runtime, attention_rows, row_view
from exchange._store import NOTIFIED_EVENT, AttentionRow, AttentionTable

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

LOOK_SECONDS = 2.0
BACKOFF_MAX_SECONDS = 60.0
LEASE = "attention_webhook"

Key = tuple[str, str, float]  # (run, reason, since)


class AttentionWebhook:
    def __init__(self, runtime: Runtime, owner: str, settings: AttentionConfig | None = None,
                 session: requests.Session | None = None) -> None:
        self.runtime = runtime
        self.owner = owner
        self.settings = settings or runtime.config.attention
        self._session = session  # made on the first POST: a gateway without a webhook never imports requests
        self._table = AttentionTable(runtime.store.db)
        self._failures: dict[Key, tuple[int, float]] = {}  # failed POSTs: count, monotonic time of the next try
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="exchange-attention-webhook", daemon=True)
        self._problems = RepeatedLog(log)

    @property
    def configured(self) -> bool:
        return self.settings.webhook_url is not None

    def start(self) -> None:
        if self.configured:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.settings.webhook_timeout_s + 5)
        if self._session is not None:
            self._session.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.look()
            except Exception as exc:  # the store is away: the next look tries again
                self._problems.log("attention webhook: could not read the runs that need someone: %s", exc)
            self._stop.wait(LOOK_SECONDS)

    def look(self) -> int:
        """Send every row not yet told (and not waiting for its next try), if this gateway has the
        look's lease; how many were sent."""
        store = self.runtime.store
        rows = attention_rows(store, self.settings.recent_hours,
                              units_wait_s=self.runtime.config.units.wait_attention_s)
        if not rows:
            return 0
        if not store.control.take_if_older(LEASE, {"owner": self.owner}, actor=self.owner,
                                           older_than=store.clock.now() - LOOK_SECONDS / 2):
            return 0
        told = self._table.notified(sorted({row.run_id for row in rows}))
        current = {(row.run_id, row.reason, row.since) for row in rows}
        self._failures = {key: value for key, value in self._failures.items() if key in current}
        now = time.monotonic()
        sent = 0
        for row in rows:
            key = (row.run_id, row.reason, row.since)
            if key in told or self._failures.get(key, (0, 0.0))[1] > now or self._stop.is_set():
                continue
            if self._post(row, key):
                sent += 1
        return sent

    def _post(self, row: AttentionRow, key: Key) -> bool:
        url = self.settings.webhook_url
        assert url is not None
        body: dict[str, Any] = {"event": "attention", **row_view(row), "gateway": self.runtime.node_id}
        import requests  # ~0.1 s of imports, for the first POST only

        if self._session is None:
            self._session = requests.Session()
        try:
            # A redirect is not followed: the configured URL is the receiver, and a POST re-sent
            # wherever an answer points (another host, the gateway's own network) is not what was set.
            answer = self._session.post(url, json=body, timeout=self.settings.webhook_timeout_s,
                                        allow_redirects=False)
            problem = None if 200 <= answer.status_code < 300 else f"it answered {answer.status_code}"
            if answer.is_redirect:
                problem = (f"it answered {answer.status_code}, a redirect to {answer.headers.get('location')!r}, "
                           "not followed (set webhook_url to the receiver)")
        except requests.RequestException as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            failures = self._failures.get(key, (0, 0.0))[0] + 1
            delay = min(BACKOFF_MAX_SECONDS, 2.0 ** (failures - 1))
            self._failures[key] = (failures, time.monotonic() + delay)
            self._problems.log("attention webhook %s: run %s (%s) not told, trying again in %.0f s: %s",
                               url, row.run_id, row.reason, delay, problem)
            return False
        self._failures.pop(key, None)
        self.runtime.store.events.add(row.run_id, NOTIFIED_EVENT, {"reason": row.reason, "since": row.since},
                                      actor=self.owner)
        log.info("attention webhook: told %s that run %s needs someone (%s)", url, row.run_id, row.reason)
        return True
