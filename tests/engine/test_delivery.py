"""Every message reaches the run as sent, whatever the run waits on when it arrives.

The moments are enumerated. A run of the suite takes a seeded half of them per sender and store
(``tests/sweeps.py``: the seed is printed; ``EXCHANGE_TEST_FULL_SWEEPS=1`` runs every one), so the
four runs together cover most moments each time and all of them over a few runs.

A run waits in turn on each kind of wait it can be in (topic ``a``, topic ``b``, operator commands,
a child run, a value another run publishes) and then on the kind its message is; the message is
sent at exactly one moment of that life:

- before the first wait (``start``), between a wait and the next (``between``);
- inside a wait of each kind: right before it reads the store (``read``), when the read found
  nothing and before the wait notes that it looked (``read_empty``, the mailbox waits; the polling
  waits have nothing between the two), and right before it sleeps (``sleep``).

The run's own thread stops at that moment (:mod:`exchange._engine.execution.waitpoints`) until the
message is committed, so each case is exactly the interleaving it names. Every case must deliver its
message once, to the wait that asks for it, well before that wait's timeout. The senders: the
gateway executing the run (``local``: the send wakes the run directly) and another process, a second
gateway on the same store (``gateway``, with its own dispatcher and mail watcher: the message
reaches the run through the executing gateway's watcher, as one from the CLI or the API does); each
on SQLite and on PostgreSQL. (``delivery_sender.py`` also has a plain ``client`` mode; the receiving
side is the same, so the suite leaves it out.)

On the code before this test, the mail watcher's "already read" note was one per run, not one per
topic: a HOLD sent while the run waited on a topic was never seen by the next ``recvCommand``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.execution import waitpoints
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.model.commands import COMMAND_TOPIC
from exchange._engine.operator.runtime import Runtime
from exchange._store.records import FINAL_STATUSES as FINAL
from exchange.errors import PromptTimeout
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.engine.instance import set_runtime
from exchange.workflows.steps import operator
from tests.engine.conftest import make_runtime
from tests.engine.delivery_sender import SENDER_QUEUE
from tests.sweeps import sample
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "delivery"
KINDS = ("a", "b", "cmd", "child", "event")  # what a message is, and what the run waits on
WAITS = (*KINDS, "prompt")  # the tour also waits on a prompt nobody answers (it times out)
MAILBOX_WAITS = ("a", "b", "cmd", "prompt")
# The answer to a prompt can only be given while the prompt is open, that is while the run waits on
# it: its cases are the moments of that wait (the prompt the run opens last, "final").
PROMPT_CASES = ("read", "read_empty", "sleep")
FINAL_PROMPT = "final prompt"
# Each wait of the tour lasts this long (the message is not for most of them). A wait that spends it
# all reading (a loaded machine) never comes to its sleep: such cases run again with the next length.
SHORT_WAIT_ROUNDS_SECONDS = (0.2, 1.0, 3.0)
CASES_SHARE = 0.25  # of the moments, per sender and store, in a run of the suite (tests/sweeps.py)
LONG_WAIT_SECONDS = 15.0  # the wait for the message, if the tour did not get it: it must come at once
# ... and does, far below the long wait's timeout, even on a busy machine (5.0 s seen at load 10)
DELIVERED_WITHIN_SECONDS = 8.0
EXPECTED = {"a": {"n": "a"}, "b": {"n": "b"}, "cmd": "HOLD", "child": "SUCCESS", "event": 1, "prompt": 1.5}
PROMPT_FIELDS = {"x": {"type": "float"}}

# parent run id -> its child's run id, written by the parent's body (it runs in this process)
CHILDREN: dict[str, str] = {}
# parent run id -> what to do at the moment (the case's plan); popped when done
PLANS: dict[str, Plan] = {}
_plans_lock = threading.Lock()


@dataclass(frozen=True)
class Case:
    kind: str  # what the message is
    moment: str  # start | between | read | read_empty | sleep
    during: str | None  # the kind of wait the moment belongs to (None for start)

    @property
    def name(self) -> str:
        return f"{self.kind}@{self.moment}" + (f":{self.during}" if self.during else "")


@dataclass
class Plan:
    case: Case
    act: Callable[[], None]


def all_cases() -> list[Case]:
    cases = []
    for kind in KINDS:
        cases.append(Case(kind, "start", None))
        for during in WAITS:
            cases.append(Case(kind, "between", during))
            cases.append(Case(kind, "read", during))
            cases.append(Case(kind, "sleep", during))
            if during in MAILBOX_WAITS:
                cases.append(Case(kind, "read_empty", during))
    cases.extend(Case("prompt", moment, FINAL_PROMPT) for moment in PROMPT_CASES)
    return cases


def _kind_of(waiting_for: str) -> str:
    if waiting_for in ("exchange.prompt:final", "prompt final: stop"):
        return FINAL_PROMPT
    if waiting_for in ("exchange.prompt:tour", "prompt tour: stop"):
        return "prompt"
    if waiting_for.startswith("child:"):
        return "child"
    if waiting_for.startswith("event:"):
        return "event"
    return "cmd" if waiting_for == COMMAND_TOPIC else waiting_for


def _at(moment: str, run_id: str, during: str | None) -> None:
    """The run ``run_id`` is at ``moment`` of a wait of kind ``during``: act if its plan says so."""
    with _plans_lock:
        plan = PLANS.get(run_id)
        if plan is None or plan.case.moment != moment or plan.case.during != during:
            return
        del PLANS[run_id]
    plan.act()


def _waitpoint(point: str, run_id: str, waiting_for: str) -> None:
    _at(point, run_id, _kind_of(waiting_for))


@workflow(name="delivery.child")
def delivery_child() -> str:
    rt = getWorkflows()
    while True:
        order = rt.recv("go", timeoutSeconds=60)
        if order == "event":
            rt.setEvent("ev", 1)
        elif order == "finish":
            return "done"


@workflow(name="delivery.parent")
def delivery_parent(expect: str, short_seconds: float) -> dict[str, Any]:
    rt = getWorkflows()
    child = rt.startChild("delivery.child", {}, queue=QUEUE)
    CHILDREN[rt.runId] = child
    got: list[Any] = []

    def wait(kind: str, timeout_seconds: float) -> None:
        if kind in ("a", "b"):
            answer = rt.recv(kind, timeoutSeconds=timeout_seconds)
        elif kind == "cmd":
            command = rt.recvCommand(currentState="RUNNING", timeoutSeconds=timeout_seconds)
            answer = None if command is None else command["cmd"]
        elif kind == "child":
            status = rt.waitFor(child, timeout_seconds)["status"]
            answer = status if status in FINAL else None
        elif kind == "event":
            answer = rt.getEvent(child, "ev", timeout_seconds)
        else:
            key = "final" if timeout_seconds == LONG_WAIT_SECONDS else "tour"
            try:
                answer = operator.prompt(key, "x?", PROMPT_FIELDS, timeout_s=timeout_seconds)["values"]["x"]
            except PromptTimeout:
                answer = None
        if answer is not None:
            got.append([kind, answer])

    _at("start", rt.runId, None)
    for kind in WAITS:
        wait(kind, short_seconds)
        _at("between", rt.runId, kind)
    with _plans_lock:
        # Every moment of the tour has passed: a case whose moment did not come runs again in the
        # next round, so this run need not wait for a message nobody will send. (A prompt's moments
        # are those of the final wait, still to come.)
        plan = PLANS.get(rt.runId)
        never_came = plan is not None and plan.case.during != FINAL_PROMPT
        if never_came:
            del PLANS[rt.runId]
    if never_came:
        return {"got": got, "never_came": True}
    final_wait_seconds = None
    if not any(kind == expect for kind, _ in got):
        started = time.monotonic()
        wait(expect, LONG_WAIT_SECONDS)
        final_wait_seconds = time.monotonic() - started
    return {"got": got, "final_wait_seconds": final_wait_seconds}


class Sender:
    """Sends a run's message: from the gateway that executes it, or from another process."""

    def __init__(self, runtime: Runtime, store_url: str, mode: str) -> None:
        self.runtime = runtime
        self.proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        if mode != "local":
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.engine.delivery_sender", store_url, mode], cwd=ROOT,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            assert self.proc.stdout is not None
            assert self.proc.stdout.readline().strip() == "ready"

    def _order(self, order: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        with self._lock:
            self.proc.stdin.write(json.dumps(order) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        assert json.loads(answer)["id"] > 0, answer

    def send(self, run_id: str, topic: str, message: Any) -> None:
        if self.proc is None:
            self.runtime.send(run_id, topic, message)
        else:
            self._order({"send": run_id, "topic": topic, "message": message})

    def answer(self, run_id: str, key: str, values: dict[str, Any]) -> None:
        if self.proc is None:
            self.runtime.answer_prompt(run_id, key, values, actor="sender")
        else:
            self._order({"answer": run_id, "key": key, "values": values})

    def command(self, run_id: str, cmd: str) -> None:
        if self.proc is None:
            self.runtime.send_command(run_id, cmd)
        else:
            self._order({"command": run_id, "cmd": cmd})

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(30)


def _deliver(runtime: Runtime, sender: Sender, parent_id: str, kind: str) -> Callable[[], None]:
    """What sending ``kind`` to ``parent_id`` means; returns once it is committed (and, for a child
    or an event, once the child finished or published)."""

    def act() -> None:
        if kind in ("a", "b"):
            sender.send(parent_id, kind, EXPECTED[kind])
        elif kind == "cmd":
            sender.command(parent_id, "HOLD")
        elif kind == "prompt":
            sender.answer(parent_id, "final", {"x": EXPECTED["prompt"]})
        elif kind == "child":
            child = CHILDREN[parent_id]
            sender.send(child, "go", "finish")
            wait_until(lambda: runtime.store.runs.get(child).status == "SUCCESS", 20, message="child done")
        else:
            child = CHILDREN[parent_id]
            sender.send(child, "go", "event")
            wait_until(lambda: runtime.store.values.get(child, "ev") is not None, 20, message="event set")

    return act


@pytest.fixture
def gateway(store_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """A gateway executing the test's queue, with room for every case's run and its child at once."""
    cases = len(all_cases())
    runtime = make_runtime(store_url, tmp_path, workers=2 * cases + 8)
    dispatcher = Dispatcher(runtime, queues=[QUEUE])
    set_runtime(runtime)
    dispatcher.start()
    previous = waitpoints.install(_waitpoint)
    yield runtime
    waitpoints.install(previous)
    dispatcher.stop()
    runtime.close()
    set_runtime(None)


def run_cases(runtime: Runtime, sender: Sender, cases: list[Case], short_seconds: float
              ) -> tuple[dict[str, Any], list[Case]]:
    """Run ``cases`` at once; each case's finished run dict by name, and the cases whose moment never
    came."""
    runs: dict[str, Case] = {}
    try:
        with _plans_lock:
            for case in cases:
                run_id = runtime.start("delivery.parent", {"expect": case.kind, "short_seconds": short_seconds},
                                       queue=QUEUE)
                PLANS[run_id] = Plan(case, _deliver(runtime, sender, run_id, case.kind))
                runs[run_id] = case
        views: dict[str, Any] = {}
        unfired: list[Case] = []
        for run_id, case in runs.items():
            view = runtime.wait_for(run_id, 120)
            if (view["result"] or {}).get("never_came"):
                unfired.append(case)
            else:
                views[case.name] = view
    finally:
        with _plans_lock:
            for run_id in runs:
                PLANS.pop(run_id, None)
        for run_id in runs:
            child = CHILDREN.pop(run_id, None)
            if child is not None and runtime.store.runs.get(child).status not in FINAL:
                runtime.cancel(child)
    return views, unfired


@pytest.mark.parametrize("mode", ["local", "gateway"])
def test_every_message_reaches_the_wait_that_asks_for_it_at_every_moment(
    gateway: Runtime, store_url: str, mode: str
) -> None:
    assert SENDER_QUEUE != QUEUE
    sender = Sender(gateway, store_url, mode)
    cases, sampled = sample(all_cases(), CASES_SHARE, f"delivery sweep ({mode}, {store_url.split(':')[0]})")
    views: dict[str, Any] = {}
    pending = cases
    try:
        for short_seconds in SHORT_WAIT_ROUNDS_SECONDS:
            done, pending = run_cases(gateway, sender, pending, short_seconds)
            views.update(done)
            if not pending:
                break
    finally:
        sender.close()
    never = sorted(case.name for case in pending)
    lost = {}
    for case in cases:
        view = views[case.name]
        result = view["result"] or {}
        if (view["status"] != "SUCCESS" or result.get("got") != [[case.kind, EXPECTED[case.kind]]]
                or (result.get("final_wait_seconds") or 0) > DELIVERED_WITHIN_SECONDS):
            lost[case.name] = (view["status"], view["result"], view["error"])
    assert not lost and not never, (
        f"{len(lost)} of {len(cases)} messages not delivered as sent: {lost}; "
        f"the run never came to the moment of {len(never)} (a wait that never read the store): {never}; {sampled}")
