"""Schedules: a run per cron tick, exactly one across every gateway of the store.

Each tick's run has the deduplication id ``schedule:NAME:<tick, ISO UTC>``, so gateways that see the
same tick start one run between them. The last tick handled is kept in the store: a gateway that
starts after others were down finds the ticks missed meanwhile and, with ``catch_up = "latest"``,
starts one run for the newest of them (not a burst); with ``"none"`` it starts none of those older
than :data:`MISFIRE_GRACE_SECONDS`. A schedule seen for the first time starts from now. Paused
schedules and maintenance drain start nothing (and a drain keeps the ticks for after it). A workflow
with a ``scheduled_at`` parameter gets the tick's time (ISO 8601, UTC).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from exchange._config_plant import ScheduleConfig
from exchange._engine import Runtime, may_start_new
from exchange._plant.params import schedule_params
from exchange.errors import ExchangeError

log = logging.getLogger(__name__)

KIND = "schedule"
MISFIRE_GRACE_SECONDS = 60.0
TICKS_LOOKED_AT_MAX = 100_000  # a schedule every second down for a day: its ticks are walked, then one run


def _ticks_after(schedule: ScheduleConfig, after: float) -> croniter:
    """The schedule's ticks after ``after`` (epoch seconds), in its timezone (DST included)."""
    zone = ZoneInfo(schedule.timezone)
    return croniter(schedule.cron, datetime.fromtimestamp(after, zone), second_at_beginning=schedule.seconds_first)


def ticks_between(schedule: ScheduleConfig, after: float, until: float) -> list[float]:
    """The schedule's ticks in ``(after, until]``, epoch seconds, oldest first (DST by its timezone)."""
    it = _ticks_after(schedule, after)
    found = []
    for _ in range(TICKS_LOOKED_AT_MAX):
        tick = it.get_next(datetime).timestamp()
        if tick > until:
            break
        found.append(tick)
    return found


def next_tick(schedule: ScheduleConfig, after: float) -> float:
    return float(_ticks_after(schedule, after).get_next(datetime).timestamp())


def tick_id(tick: float) -> str:
    return datetime.fromtimestamp(tick, UTC).isoformat(timespec="milliseconds")


class Scheduler:
    def __init__(self, runtime: Runtime, schedules: dict[str, ScheduleConfig]) -> None:
        self.runtime = runtime
        self.schedules = schedules
        self.state = runtime.store.plant

    def _params(self, schedule: ScheduleConfig, tick: float) -> dict[str, Any]:
        return schedule_params(schedule.params, self.runtime.registry.get(schedule.workflow), tick_id(tick))

    def start_for_tick(self, schedule: ScheduleConfig, tick: float, dedup: str | None = None) -> str:
        """The run of ``tick`` (the existing one when another gateway started it)."""
        return self.runtime.start(schedule.workflow, self._params(schedule, tick),
                                  deduplicationId=dedup or f"schedule:{schedule.name}:{tick_id(tick)}",
                                  actor=f"schedule:{schedule.name}", **schedule.start.as_options())

    def trigger_now(self, name: str, actor: str) -> str:
        """``exchange schedules trigger``: one run now, outside the ticks."""
        schedule = self.schedules[name]
        now = self.runtime.store.clock.now()
        return self.runtime.start(schedule.workflow, self._params(schedule, now),
                                  deduplicationId=f"schedule:{name}:manual:{uuid.uuid4()}", actor=actor,
                                  **schedule.start.as_options())

    def run_due(self) -> float:
        """Start what is due now; returns the store time of the next tick of any schedule."""
        now = self.runtime.store.clock.now()
        draining = not may_start_new(self.runtime)
        states = self.state.all(KIND)
        soonest = now + 60.0
        for name, schedule in self.schedules.items():
            state = states.get(name)
            if state is None:
                self.state.create(KIND, name, last_tick=now)
                soonest = min(soonest, next_tick(schedule, now))
                continue
            last = state.last_tick if state.last_tick is not None else now
            due = ticks_between(schedule, last, now)
            if due and not state.paused and not draining:
                tick = due[-1]
                late = now - tick
                if schedule.catch_up == "latest" or late <= MISFIRE_GRACE_SECONDS:
                    try:
                        run_id = self.start_for_tick(schedule, tick)
                        log.info("schedule %s: tick %s -> run %s (%d tick(s) due, %.3f s late)", name,
                                 tick_id(tick), run_id, len(due), late)
                    except ExchangeError as exc:
                        log.error("schedule %s: the run of tick %s could not start: %s", name, tick_id(tick), exc)
                else:
                    log.warning("schedule %s: %d tick(s) missed (catch_up = none), the newest %s", name, len(due),
                                tick_id(tick))
                self.state.tick(name, tick_was=state.last_tick, tick=tick)
            elif due and state.paused:
                self.state.tick(name, tick_was=state.last_tick, tick=due[-1])  # a paused schedule drops its ticks
            soonest = min(soonest, next_tick(schedule, max(last, now) if not due else now))
        return soonest
