"""Retries: a flaky step that succeeds on its third attempt, and a fatal error that is not retried."""

import os

from exchange.workflows.bootstrap import FatalError, RetryableError, step, workflow
from exchange.workflows.engine.instance import getWorkflows


@step(
    name="retry.flaky_read",
    options={"retries_allowed": True, "max_attempts": 5, "interval_seconds": 0.1, "backoff_rate": 2.0},
)
def flaky_read(counter_file, fail_times):
    """Fails ``fail_times`` times (counted in a file, so a crash does not reset it), then succeeds."""
    count = 0
    if os.path.exists(counter_file):
        with open(counter_file) as f:
            count = int(f.read() or 0)
    count += 1
    with open(counter_file, "w") as f:
        f.write(str(count))
    if count <= fail_times:
        raise RetryableError("instrument busy (attempt %s)" % count)
    return {"attempts_seen": count}


@step(name="retry.validate", options={"retries_allowed": True, "max_attempts": 5, "interval_seconds": 0.1})
def validate(value):
    if value < 0:
        raise FatalError("value %s is negative: retrying will not help" % value)
    return value


@workflow(name="demo.retries")
def retries(counter_file="var/retry_demo.count", fail_times=2, value=1):
    rt = getWorkflows()
    read = flaky_read(counter_file, fail_times)
    rt.progress("read after %s attempt(s)" % read["attempts_seen"])
    return {"read": read, "value": validate(value)}
