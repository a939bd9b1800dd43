"""The authoring guide's minimal workflow."""

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_chunked


@workflow(name="demo.small")
def demo_small(duration_s=10):
    rt = getWorkflows()
    loops = int(duration_s * 2)

    for i in range(loops):
        rt.checkCancelled()
        rt.progress("loop %s/%s" % (i + 1, loops))
        sleep_chunked(total_ms=500, chunk_ms=250)

    return {"ok": True}
