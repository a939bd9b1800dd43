"""Tag triggers and HMI command tags: act once per edge of a tag.

Tags whose driver subscribes (OPC UA) are watched through a subscription: every change the server
reports is judged, in order, so a pulse shorter than a poll still counts. The others are read every
``poll_ms`` (the smallest of the watched ones), all of them in one read, so each device gets one
batched request per poll. A Good reading is compared with the last value the
store holds for the trigger: an edge in the configured direction (rising: false to true, falling:
true to false, change: any other value) starts the trigger's run with the deduplication id
``trigger:NAME:<edge number>`` and then moves the store's state on (compare-and-set on the edge
count). So a crash between the two starts the same run again (one run), gateways watching the same
tag start one run between them, and an edge that happened while every gateway was down (stored
low, read high) gives exactly one run at start-up, while a trigger the store knows nothing of just
records the value: no edge is invented. A command tag moves the state first and the winner sends
the command (one command per edge), actor ``tag:<path>``, then writes ``ack_tag`` back when set.
Pulses shorter than a poll of a polled tag are not seen; while maintenance drains, triggers start nothing (their
edges are recorded and dropped).
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import UTC, datetime
from typing import Any

from exchange._config_plant import CommandTagConfig, TriggerConfig
from exchange._engine import Runtime, may_start_new
from exchange._plant.params import trigger_params
from exchange._tags.service import TagService
from exchange._values.model import QualifiedValue
from exchange.errors import CommunicationError, DeviceError, ExchangeError

log = logging.getLogger(__name__)

TRIGGER, COMMAND_TAG = "trigger", "command_tag"


def is_edge(when: str, old: Any, new: Any) -> bool:
    if when == "rising":
        return not bool(old) and bool(new)
    if when == "falling":
        return bool(old) and not bool(new)
    return bool(old != new)


class EdgeWatcher:
    def __init__(self, runtime: Runtime, tags: TagService, triggers: dict[str, TriggerConfig],
                 command_tags: dict[str, CommandTagConfig]) -> None:
        self.runtime = runtime
        self.tags = tags
        self.triggers = triggers
        self.command_tags = command_tags
        self.state = runtime.store.plant
        self.paths = sorted({t.tag for t in triggers.values()} | {c.tag for c in command_tags.values()})
        polls = [t.poll_ms for t in triggers.values()] + [c.poll_ms for c in command_tags.values()]
        self.poll_seconds = min(polls) / 1000 if polls else 1.0
        self.changes: queue.Queue[tuple[str, QualifiedValue]] = queue.Queue()
        self.subscribed: set[str] = set()
        self.subscriptions: list[Any] = []
        self._changed = threading.Event()  # a subscribed tag changed: judge it before the next poll is due

    def subscribe(self) -> None:
        """Subscribe to the tags whose driver can; the others stay polled (a failed subscription too)."""
        for path in self.paths:
            tag = self.tags.tag(path)
            try:
                subscribe = getattr(self.tags.driver(tag.device), "subscribe", None)
                if not callable(subscribe):
                    continue
                self.subscriptions.append(subscribe(tag.point, lambda value, p=path: self._heard(p, value)))
                self.subscribed.add(path)
            except (CommunicationError, DeviceError) as exc:
                log.warning("%s: no subscription (%s); polled every %.0f ms instead", path, exc,
                            self.poll_seconds * 1000)

    def _heard(self, path: str, value: QualifiedValue) -> None:
        self.changes.put((path, value))
        self._changed.set()

    def close(self) -> None:
        for subscription in self.subscriptions:
            try:
                subscription.cancel()
            except Exception:  # the device is gone: nothing left to cancel
                log.debug("cancelling a subscription failed", exc_info=True)

    def wait(self, stop: threading.Event) -> None:
        """Until the next poll is due or a subscribed tag changed (``stop`` ends it at the next one)."""
        if not stop.is_set():
            self._changed.wait(self.poll_seconds)
        self._changed.clear()  # what arrived meanwhile is in the queue: the next poll takes it

    def poll(self) -> None:
        """The subscribed tags' changes in order, then one read of the polled tags, and what their
        edges call for."""
        while True:
            try:
                path, reading = self.changes.get_nowait()
            except queue.Empty:
                break
            self._judge(path, reading)
        polled = [path for path in self.paths if path not in self.subscribed]
        if polled:
            for path, reading in zip(polled, self.tags.read(polled), strict=True):
                self._judge(path, reading)

    def _judge(self, path: str, reading: QualifiedValue) -> None:
        if not reading.quality.is_good:
            return
        for name, trigger in self.triggers.items():
            if trigger.tag == path:
                self._trigger(trigger, reading.value, reading.timestamp, self.state.get(TRIGGER, name))
        for name, command in self.command_tags.items():
            if command.tag == path:
                self._command(command, reading.value, self.state.get(COMMAND_TAG, name))

    def _params(self, trigger: TriggerConfig, value: Any, at: float) -> dict[str, Any]:
        return trigger_params(trigger.params, self.runtime.registry.get(trigger.workflow), value,
                              datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds"))

    def _trigger(self, trigger: TriggerConfig, value: Any, at: float, state: Any) -> None:
        if state is None:
            self.state.create(TRIGGER, trigger.name, last_value=value)  # no edge is invented
            return
        if value == state.last_value:
            return
        if not is_edge(trigger.when, state.last_value, value):
            self.state.move(TRIGGER, trigger.name, edges_were=state.edges, last_value=value, edges=state.edges)
            return
        edge = state.edges + 1
        if may_start_new(self.runtime):
            try:
                run_id = self.runtime.start(trigger.workflow, self._params(trigger, value, at),
                                            deduplicationId=f"trigger:{trigger.name}:{edge}",
                                            actor=f"trigger:{trigger.name}", **trigger.start.as_options())
                log.info("trigger %s: %s edge of %s (%r) -> run %s", trigger.name, trigger.when, trigger.tag, value,
                         run_id)
            except ExchangeError as exc:
                log.error("trigger %s: the run could not start: %s", trigger.name, exc)
                return  # the edge stays: the next poll tries again
        else:
            log.warning("trigger %s: %s edge of %s while maintenance drains: no run", trigger.name, trigger.when,
                        trigger.tag)
        self.state.move(TRIGGER, trigger.name, edges_were=state.edges, last_value=value, edges=edge)

    def _command(self, command: CommandTagConfig, value: Any, state: Any) -> None:
        if state is None:
            self.state.create(COMMAND_TAG, command.name, last_value=value)
            return
        if value == state.last_value:
            return
        edge = is_edge(command.when, state.last_value, value)
        won = self.state.move(COMMAND_TAG, command.name, edges_were=state.edges, last_value=value,
                              edges=state.edges + (1 if edge else 0))
        if not (edge and won):
            return
        run_id = self.runtime.store.lookup.active_run(partition_key=command.partition_key, workflow=command.workflow)
        target = f"partition {command.partition_key}" if command.partition_key else f"workflow {command.workflow}"
        if run_id is None:
            log.warning("command tag %s: %s pressed, but %s has no active run", command.name, command.cmd, target)
            return
        try:
            self.runtime.send_command(run_id, command.cmd, f"{command.tag} {command.when}", actor=f"tag:{command.tag}")
            log.info("command tag %s: %s sent to run %s (%s)", command.name, command.cmd, run_id, target)
        except ExchangeError as exc:
            log.error("command tag %s: %s to run %s failed: %s", command.name, command.cmd, run_id, exc)
            return
        if command.ack_tag is not None:
            try:
                self.tags.write([command.ack_tag], [command.ack_value])
            except ExchangeError as exc:
                log.error("command tag %s: writing the ack %s failed: %s", command.name, command.ack_tag, exc)
