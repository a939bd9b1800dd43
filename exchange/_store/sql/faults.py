"""Named fault-injection points for crash tests: kill this process right before or after a store write.

Crash safety is proven by killing a real gateway at every point of a run's life, not at a sample of
them. The store numbers the writes that run executions make (worker threads only, so the numbering
is the same in every execution of the same workflows) and, when asked through the environment, kills
its own process with SIGKILL at one of them:

``EXCHANGE_FAULT_KILL_AFTER_WRITE=k``
    SIGKILL right after write ``k`` committed (the write is durable, nothing after it happened).
``EXCHANGE_FAULT_KILL_BEFORE_WRITE=k``
    SIGKILL right before write ``k`` is sent (what the run did since write ``k - 1`` is not recorded:
    a step body in flight runs again on recovery).
``EXCHANGE_FAULT_KILL_BEFORE_LABELLED=text``
    SIGKILL right before the first counted write whose label contains ``text`` (``the release of its
    units``): a point named by what it is, which stays put when the writes before it change.
``EXCHANGE_FAULT_WRITE_LOG=FILE``
    Append one line per counted write that committed, ``k label``, and ``k label [killed before]`` for
    a write the process was killed before: a test knows what each write was and where the process died.

With none of them set (production) the cost is one attribute test per write.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass

# Only writes from run executions are numbered: the dispatcher's and the lease keeper's writes happen
# on timers, so counting them would make write k a different write in every execution.
COUNTED_THREAD_PREFIX = "exchange-run"


@dataclass
class _Plan:
    kill_after: int | None
    kill_before: int | None
    log_path: str | None
    kill_before_labelled: str | None = None
    count: int = 0


def _int_env(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    return int(text) if text else None


def _plan_from_env() -> _Plan | None:
    kill_after = _int_env("EXCHANGE_FAULT_KILL_AFTER_WRITE")
    kill_before = _int_env("EXCHANGE_FAULT_KILL_BEFORE_WRITE")
    log_path = os.environ.get("EXCHANGE_FAULT_WRITE_LOG") or None
    labelled = os.environ.get("EXCHANGE_FAULT_KILL_BEFORE_LABELLED") or None
    if kill_after is None and kill_before is None and log_path is None and labelled is None:
        return None
    return _Plan(kill_after, kill_before, log_path, labelled)


_plan = _plan_from_env()
_lock = threading.Lock()


def reload_from_environment() -> None:
    """Read the plan from the environment again: for a process forked from one that imported this
    module before its environment named a fault (a test's fork server)."""
    global _plan
    _plan = _plan_from_env()


def active() -> bool:
    return _plan is not None


def _counted() -> bool:
    return threading.current_thread().name.startswith(COUNTED_THREAD_PREFIX)


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def before_write(label: str) -> int | None:
    """Number the write about to be sent; kill the process first if it is the chosen one.

    Returns the write's number (None when it is not counted), to be handed to :func:`after_write`.
    """
    plan = _plan
    if plan is None or not _counted():
        return None
    with _lock:
        plan.count += 1
        number = plan.count
    if plan.kill_before == number or (plan.kill_before_labelled is not None and plan.kill_before_labelled in label):
        _log(plan, f"{number} {label} [killed before]")
        _kill()
    return number


def _log(plan: _Plan, line: str) -> None:
    if plan.log_path is not None:
        with _lock, open(plan.log_path, "a", encoding="utf-8") as log:
            log.write(line + "\n")
            log.flush()
            os.fsync(log.fileno())


def after_write(number: int | None, label: str) -> None:
    """The write numbered ``number`` committed: log it, and kill the process if it is the chosen one."""
    plan = _plan
    if plan is None or number is None:
        return
    _log(plan, f"{number} {label}")
    if plan.kill_after == number:
        _kill()
