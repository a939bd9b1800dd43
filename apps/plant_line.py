"""A line workflow: one rinse per tank as child runs, their progress streamed for the line's screen.

Shows ``rt.startChild`` / ``rt.waitFor`` (a replay never starts a second child), ``rt.writeStream``
(the line's log, read with ``getWorkflows().readStream(run_id, "line")``), ``rt.checkTimeout``
(how long the line may still take), ``rt.now`` and ``sleep.sleep_ms``.
"""

from exchange.errors import FatalError
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_ms


@workflow(name="plant.tank_rinse", description="rinse one tank (a child of plant.line)")
def tank_rinse(tank, rinse_ms=200):
    rt = getWorkflows()
    rt.progress("rinsing tank %s" % tank)
    sleep_ms(rinse_ms)
    return {"tank": tank, "rinsed": True}


@workflow(name="plant.line", description="rinse every tank of a line, one child run per tank")
def line(tanks=(1, 2, 3), rinse_ms=200):
    rt = getWorkflows()
    started = rt.now()
    children = [rt.startChild("plant.tank_rinse", {"tank": tank, "rinse_ms": rinse_ms}) for tank in tanks]
    rt.writeStream("line", {"event": "started", "children": children, "at": started.isoformat()})
    for child in children:
        left = rt.checkTimeout()  # None without a timeout; raises Cancelled once it is up
        done = rt.waitFor(child, left if left is not None else 3600)
        if done["status"] != "SUCCESS":
            raise FatalError("tank rinse %s ended %s" % (child, done["status"]))
        rt.writeStream("line", {"event": "rinsed", "tank": done["result"]["tank"]})
    return {"tanks": len(children), "seconds": (rt.now() - started).total_seconds()}
