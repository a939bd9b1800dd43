"""The operator-control pattern: a batch that honours HOLD, RESUME and STOP between its phases.

Each phase is a step. Between phases the workflow calls ``control.checkpoint``: HOLD parks it in
HELD until RESUME (or STOP); STOP raises ``StopRequested`` and the batch ends cleanly with what it
did. Commands are taken one at a time, in the order sent, so a HOLD, a RESUME and a STOP sent back
to back are each honoured. State changes that are not answers to a command are reported with
``setState``, which receives nothing: a command that arrives meanwhile waits for the next checkpoint.
"""

from exchange.errors import StopRequested
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import control
from exchange.workflows.steps.sleep import sleep_chunked


@step(name="batch.phase")
def run_phase(batch_id, phase):
    # A real app would write tags or call services here; the demo just reports the phase.
    return {"batch": batch_id, "phase": phase, "done": True}


@workflow(name="demo.batch_loop")
def batch_loop(batch_id="B1", phases=5, phase_ms=500):
    rt = getWorkflows()
    completed = []
    try:
        for phase in range(1, phases + 1):
            control.checkpoint(wait_ms=200)  # HOLD: held here until RESUME; STOP: StopRequested
            rt.progress("phase %s/%s" % (phase, phases), {"phase": phase})
            run_phase(batch_id, phase)
            completed.append(phase)
            sleep_chunked(total_ms=phase_ms, chunk_ms=100)
    except StopRequested:
        rt.setState("STOPPED")
        return {"stopped": True, "completed": completed}
    rt.setState("COMPLETE")
    return {"stopped": False, "completed": completed}
