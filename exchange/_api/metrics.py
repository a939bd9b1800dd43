"""``GET /metrics``: the gateway in Prometheus' text format.

- ``exchange_runs{status}``: runs in the store by status (one grouped count per scrape);
- ``exchange_steps_recorded_total``: steps this gateway recorded (``rate()`` of it is steps/s);
- ``exchange_store_write_seconds``: how long this gateway's group-committed writes took;
- ``exchange_command_latency_seconds``: operator command sent → received by its workflow, for the
  commands received since the previous scrape (any gateway's runs);
- ``exchange_device_link_up{device}``: 1 when the device's last request from this gateway was
  answered, 0 when it could not be reached (devices this gateway has not talked to yet are left
  out), with ``exchange_device_link_changed_timestamp_seconds{device}``;
- ``exchange_gateway_runs_executing`` and ``exchange_gateway_workers``: runs executing in this
  gateway now, and at most (its ``[engine] workers``); runs queued while the two are equal wait for
  a worker;
- ``exchange_retention_unarchived_runs``: finished runs the last pass of retention left in the store
  because their record could not be written to ``[retention] archive_dir`` (0 when all were; left
  out when no pass has failed to archive since the store was created);
- ``exchange_api_up``: 1 (the scrape reached the gateway).

A store that cannot be read leaves out the families read from it (the scrape still answers).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from exchange._engine import COMMAND_TOPIC, Runtime
from exchange._store import ALL_STATUSES, RETENTION_ARCHIVE, Store
from exchange._store import REASONS as ATTENTION_REASONS
from exchange.errors import ExchangeError

log = logging.getLogger(__name__)

COMMAND_BUCKETS_SECONDS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class GatewayCollector(Collector):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Any]:
        store = self.runtime.store
        up = GaugeMetricFamily("exchange_api_up", "1 when the gateway answers")
        up.add_metric([], 1)
        yield up
        try:
            counts = store.lookup.count_by_status()
        except ExchangeError as exc:
            log.warning("metrics: runs by status not read: %s", exc)
        else:
            runs = GaugeMetricFamily("exchange_runs", "Runs in the store by status", labels=["status"])
            for status in ALL_STATUSES:
                runs.add_metric([status], counts.get(status, 0))
            yield runs
        try:
            rows = self.runtime.attention(limit=10_000)
        except ExchangeError as exc:
            log.warning("metrics: runs that need someone not read: %s", exc)
        else:
            gauge = GaugeMetricFamily("exchange_runs_needing_attention",
                                      "Runs that need someone, by reason (prompt, held, equipment, in_doubt, error)",
                                      labels=["reason"])
            for reason in ATTENTION_REASONS:
                gauge.add_metric([reason], sum(row["reason"] == reason for row in rows))
            yield gauge
        executing = GaugeMetricFamily("exchange_gateway_runs_executing", "Runs executing in this gateway now")
        executing.add_metric([], self.runtime.local_runs.count())
        yield executing
        if self.runtime.worker_limit is not None:
            workers = GaugeMetricFamily("exchange_gateway_workers",
                                        "Runs this gateway executes at most at once ([engine] workers)")
            workers.add_metric([], self.runtime.worker_limit)
            yield workers
        stats = store.db.stats
        steps = CounterMetricFamily("exchange_steps_recorded", "Steps this gateway recorded")
        steps.add_metric([], stats.steps_recorded)
        yield steps
        writes = HistogramMetricFamily("exchange_store_write_seconds",
                                       "Group-committed store writes of this gateway, as the writer waited")
        writes.add_metric([], stats.unit_seconds.cumulative(), sum_value=stats.unit_seconds.total)
        yield writes
        yield from self.device_links()
        yield from self.unarchived(store)

    def unarchived(self, store: Store) -> Iterator[Any]:
        try:
            setting = store.control.get(RETENTION_ARCHIVE)
        except ExchangeError as exc:
            log.warning("metrics: retention's archive state not read: %s", exc)
            return
        if setting is None or not isinstance(setting.value, dict):
            return
        gauge = GaugeMetricFamily("exchange_retention_unarchived_runs",
                                  "Finished runs retention kept because their record could not be archived")
        gauge.add_metric([], int(setting.value.get("runs") or 0))
        yield gauge

    def device_links(self) -> Iterator[Any]:
        up = GaugeMetricFamily("exchange_device_link_up", "1 when the device's last request was answered",
                               labels=["device"])
        changed = GaugeMetricFamily("exchange_device_link_changed_timestamp_seconds",
                                    "When the device's link last went up or down", labels=["device"])
        for service in self.runtime.services.built().values():
            states = getattr(service, "link_states", None)  # the tag service's (the API imports no driver)
            if not callable(states):
                continue
            for device, state in sorted(states().items()):
                up.add_metric([device], 1 if state.up else 0)
                changed.add_metric([device], state.since)
        yield up
        yield changed


class CommandLatency:
    """Feeds ``exchange_command_latency_seconds`` from the mailbox at each scrape."""

    def __init__(self, runtime: Runtime, registry: CollectorRegistry) -> None:
        self.runtime = runtime
        self.histogram = Histogram("exchange_command_latency_seconds",
                                   "Operator command sent -> received by its workflow",
                                   buckets=COMMAND_BUCKETS_SECONDS, registry=registry)
        self._lock = threading.Lock()
        self._seen_until = runtime.store.clock.now()  # commands received before the gateway started: not ours

    def update(self) -> None:
        with self._lock:
            try:
                deliveries = self.runtime.store.mailbox.delivery_times(COMMAND_TOPIC, self._seen_until)
            except ExchangeError as exc:
                log.warning("metrics: command latency not read: %s", exc)
                return
            for sent_at, consumed_at in deliveries:
                self.histogram.observe(max(0.0, consumed_at - sent_at))
                self._seen_until = max(self._seen_until, consumed_at)


class Metrics:
    def __init__(self, runtime: Runtime) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(GatewayCollector(runtime))
        self.commands = CommandLatency(runtime, self.registry)

    def render(self) -> bytes:
        self.commands.update()
        return generate_latest(self.registry)
