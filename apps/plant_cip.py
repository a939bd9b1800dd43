"""Workflows started by the plant rather than by a person; their configuration is in
docs/plant-features.md:

- ``plant.cip`` by a schedule (``[schedules.morning_cip] cron = "0 6 * * *"``): it gets the tick's
  time in ``scheduled_at``, so a run started late after a restart still knows which morning it is for;
- ``plant.batch_start`` by a tag trigger (``[triggers.batch_start] tag = "[plant]Line1/Batch/StartPB"``):
  it gets the value read and when in ``trigger_value`` / ``trigger_at``.

A push button that HOLDs a line's batch needs no code: ``[command_tags.line1_hold]``.
"""

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_ms


@workflow(name="plant.cip", description="the morning clean-in-place of a line (scheduled)")
def cip(line=1, rinse_ms=500, scheduled_at=None):
    rt = getWorkflows()
    rt.progress("CIP of line %s for %s" % (line, scheduled_at or "now"))
    for phase in ("pre-rinse", "caustic", "rinse"):
        rt.setState(phase.upper())
        sleep_ms(rinse_ms)
    return {"line": line, "scheduled_at": scheduled_at}


@workflow(name="plant.batch_start", description="a batch started by the line's start button (triggered)")
def batch_start(target_level=40.0, trigger_value=None, trigger_at=None):
    rt = getWorkflows()
    rt.progress("started by the start button at %s" % trigger_at)
    return {"target_level": target_level, "pressed_at": trigger_at, "value": trigger_value}
