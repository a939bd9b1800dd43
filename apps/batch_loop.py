"""The operator-control pattern: a batch that honours HOLD, RESUME and STOP between its phases.

Each phase is a step. Between phases (and while waiting) the workflow polls its mailbox with
``recvCommand``: HOLD parks it in HELD until RESUME (or STOP); STOP ends it cleanly with what it did.
It takes one command per poll (``maxMessages=1``), so a HOLD and a RESUME sent back to back are both
honoured, in order. State changes that are not answers to a command are reported with ``setState``,
which receives nothing: a command that arrives meanwhile waits for the next poll instead of being
consumed and ignored.
"""

from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_chunked


@step(name="batch.phase")
def run_phase(batch_id, phase):
    # A real app would write tags or call services here; the demo just reports the phase.
    return {"batch": batch_id, "phase": phase, "done": True}


def wait_while_held(rt, phase):
    """Stay HELD until RESUME (returns "RESUMED") or STOP (returns "STOP")."""
    rt.progress("held before phase %s" % phase)
    while True:
        cmd = rt.recvCommand(currentState="HELD", timeoutSeconds=0.2, maxMessages=1)
        if cmd and cmd["cmd"] == "RESUME":
            return "RESUMED"
        if cmd and cmd["cmd"] == "STOP":
            return "STOP"


@workflow(name="demo.batch_loop")
def batch_loop(batch_id="B1", phases=5, phase_ms=500):
    rt = getWorkflows()
    completed = []
    for phase in range(1, phases + 1):
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.2, maxMessages=1)
        if cmd and cmd["cmd"] == "HOLD":
            if wait_while_held(rt, phase) == "STOP":
                rt.setState("STOPPED")
                return {"stopped": True, "completed": completed}
            rt.setState("RUNNING")
        elif cmd and cmd["cmd"] == "STOP":
            rt.setState("STOPPED")
            return {"stopped": True, "completed": completed}
        rt.progress("phase %s/%s" % (phase, phases), {"phase": phase})
        run_phase(batch_id, phase)
        completed.append(phase)
        sleep_chunked(total_ms=phase_ms, chunk_ms=100)
    rt.setState("COMPLETE")
    return {"stopped": False, "completed": completed}
