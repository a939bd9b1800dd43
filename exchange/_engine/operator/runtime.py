"""The process's runtime: config, store, registry, shared services and the runs executing here.

It is the one way in for the CLI, the Python API, the HTTP API and the OPC UA server of runs: start runs, wait
for them, read them, send commands, cancel. Execution itself lives in
:mod:`exchange._engine.gateway.executor` and :mod:`exchange._engine.gateway.dispatcher`.

Bad arguments are refused before anything is read or written, with a message that names the call
and the parameter. One error class per situation:

* :class:`~exchange.errors.InvalidParams` — ``start`` (and ``create_run``): the workflow name is not
  a string, the parameters are not a dict of JSON values, exceed ``engine.params_max_bytes``, or do
  not fit the workflow's signature, or a start option is unknown or unusable.
* :class:`~exchange.errors.InvalidArgument` — every other call: a run id, reason, topic, key,
  message, timeout or limit that cannot be used (wrong type, NaN, an infinity, negative, too long,
  text that UTF-8 cannot encode, a message above ``engine.message_max_bytes``, a reason above
  ``engine.reason_max_chars``).
* :class:`~exchange.errors.UnknownWorkflow`, :class:`~exchange.errors.UnknownRun`,
  :class:`~exchange.errors.UnknownCommand` — a well-formed name that names nothing.
* :class:`~exchange.errors.WorkflowError` — the run exists but is already finished: ``cancel``
  and ``send_command``/``send`` say so (naming the run and its status) and change nothing; so does
  ``retry`` of a run that is not ERROR or CANCELLED.

Parts kept elsewhere: the start options (:mod:`~exchange._engine.operator.start_options`), the table
of runs executing here (:mod:`~exchange._engine.operator.local_runs`), the checks of plain arguments
(:mod:`exchange._arguments`), and which runtime is "the" runtime (:mod:`~exchange._engine.operator.current`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from exchange._actors import local_actor
from exchange._arguments import checked_json, integer, json_problem, number, optional_number, shown, unencodable
from exchange._arguments import text as checked_text
from exchange._config import Config
from exchange._engine.definition import REGISTRY, Registry, WorkflowDef
from exchange._engine.model import PhaseRunView, PhaseView, PromptView, RunView, commands
from exchange._engine.operator import attention, command_fate, prompt_answers, run_lookup
from exchange._engine.operator.local_runs import LocalRuns
from exchange._engine.operator.resources import Services
from exchange._engine.operator.run_ends import RunEnds
from exchange._engine.operator.start_options import StartKeywords, StartOptions, reject_unknown
from exchange._engine.operator.views import phase_row_view, prompt_view, run_view
from exchange._roles import Roles
from exchange._store import MAINTENANCE, RELEASE_EVENT, SIGNATURE_EVENT, Holder, NewRun, Store, codec, is_draining
from exchange._store import records as r
from exchange.errors import (
    CommandRefused,
    InvalidArgument,
    InvalidParams,
    NotAllowed,
    UnknownCommand,
    UnknownRun,
    WorkflowError,
)

if TYPE_CHECKING:
    from exchange._engine.execution import ReplayOutcome
    from exchange._engine.operator.signatures import Signer, Signing

log = logging.getLogger(__name__)

WORKFLOW_NAME_MAX_CHARS = 200  # the store's column
RUN_ID_MAX_CHARS = 100  # run ids are 36-character UUIDs; anything much longer names no run
TOPIC_MAX_CHARS = 100  # the mailbox's topic column
EVENT_KEY_MAX_CHARS = 200  # the run values' key column
ACTOR_MAX_CHARS = 200  # the actor columns
LIST_LIMIT_MAX = 1_000_000  # list_runs(limit=...)
# A client waiting on another run (wait_for, get_event) reads the store after mailbox_poll_ms, then
# twice as late each time, up to this: a waiter costs a few reads a second, not a hundred (each a
# turn of the GIL that the gateway's committer waits behind). A run executing in this process is
# seen finished at once whatever the pause: the commit of its end wakes that run's waiters.
CLIENT_POLL_MAX_SECONDS = 0.25


def default_actor() -> str:
    """Who is acting when the caller does not say: ``account@host``, the operating-system account
    of this process from its uid, never from ``$LOGNAME``/``$USER`` (see :mod:`exchange._actors`)."""
    return local_actor()


class StartClaimant(Protocol):
    """A claiming dispatcher of this process that lets a start claim for one of its free workers.

    ``reserve_worker()`` keeps a free worker for the start's claim and returns the claim's holder and
    queues, or None when the start must leave its run to the dispatcher: no free worker, the
    dispatcher not serving or stopping, other gateways alive (their share is the dispatcher's
    business, :mod:`~exchange._engine.gateway.fair_share`). ``run_claimed(records, sent_at)`` is called
    once after each reservation, with what the start's commit claimed (maybe nothing) and the
    monotonic time the claim was sent: it executes those runs and frees the reservation."""

    def reserve_worker(self) -> tuple[Holder, list[str] | None] | None: ...

    def run_claimed(self, records: list[r.RunRecord], sent_at: float) -> None: ...


class Runtime:
    """The runtime of this process; see the module docstring for the errors its API raises."""

    def __init__(self, config: Config, *, store: Store | None = None, registry: Registry | None = None) -> None:
        self.config = config
        self.roles = Roles(config.roles)  # built-in and [roles.NAME]: what each caller's role may do
        self.store = store or Store(config.store_url, shared=config.store_shared)
        self.registry = registry or REGISTRY
        self.services = Services(config)
        self.node_id = config.node_id()
        self.local_runs = LocalRuns()  # the runs executing in this process
        self._run_ends = RunEnds()
        self._enqueue_listeners: list[Callable[[], None]] = []
        self.mail_watched = False  # a dispatcher's mail watcher wakes the runs executing here
        self.worker_limit: int | None = None  # a claiming dispatcher's workers (the gateway's limit)
        self._start_claimant: StartClaimant | None = None

    def finished_here(self, run_id: str) -> None:
        """The run's final status, written by its execution in this process, is committed: its
        waiters here (``wait_for``, ``pause_for_finish``) look at the store again at once."""
        self._run_ends.ended(run_id)

    def on_enqueue(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each start in this process (a dispatcher wakes up at once)."""
        self._enqueue_listeners.append(listener)

    # ----- argument checks ----------------------------------------------------------------------
    def checked_run_id(self, call: str, run_id: Any) -> str:
        """``run_id`` if it can name a run (a non-empty str the store can hold; InvalidArgument
        otherwise), with a unique prefix of at least 4 characters expanded to the whole id (one
        indexed query; UnknownRun when no id starts with it, AmbiguousRun when several do; see
        :mod:`~exchange._engine.operator.run_lookup`). Whether a run has a whole id is the caller's
        lookup (UnknownRun)."""
        return run_lookup.resolve_run_id(self.store, checked_text(call, "run_id", run_id, max_chars=RUN_ID_MAX_CHARS))

    def checked_reason(self, call: str, reason: Any) -> str | None:
        """None, or a str of at most ``engine.reason_max_chars`` the store can hold (InvalidArgument)."""
        if reason is None:
            return None
        return checked_text(call, "reason", reason, max_chars=self.config.engine.reason_max_chars, empty=True)

    def _checked_message(self, call: str, name: str, value: Any) -> None:
        """InvalidArgument unless ``value`` is JSON of at most ``engine.message_max_bytes``."""
        checked_json(call, name, value, encode=codec.dumps, max_bytes=self.config.engine.message_max_bytes,
                     setting="message_max_bytes")

    @staticmethod
    def _checked_actor(call: str, actor: Any) -> str:
        if actor is None or actor == "":
            return default_actor()
        return checked_text(call, "actor", actor, max_chars=ACTOR_MAX_CHARS)

    def checked_params(self, name: Any, params: Any) -> tuple[WorkflowDef, dict[str, Any], str]:
        """The workflow, the parameters and their JSON text, checked as every start checks them
        (UnknownWorkflow; InvalidParams: not a dict of JSON values, above
        ``engine.params_max_bytes``, or not fitting the workflow's parameters, see
        :meth:`~exchange._engine.definition.signature.Signature.check`); nothing is read or written."""
        name = checked_text("start", "name", name, max_chars=WORKFLOW_NAME_MAX_CHARS, error=InvalidParams)
        definition = self.registry.get(name)
        where = f"workflow {name!r}"
        if params is None:
            params = {}
        elif isinstance(params, Mapping):
            params = dict(params)
        else:
            raise InvalidParams(f"{where}: params must be a dict of JSON values, got {shown(params)}")
        for key, value in params.items():
            if not isinstance(key, str):
                raise InvalidParams(f"{where}: parameter names must be strings, got {shown(key)}")
            key_problem = unencodable(key)
            if key_problem is not None:
                raise InvalidParams(f"{where}: the parameter name {key!r} {key_problem}")
            problem = json_problem(value, f"parameter {key!r}")
            if problem is not None:
                raise InvalidParams(f"{where}: {problem}")
        params_json = codec.dumps(params)
        size = len(params_json.encode("utf-8"))
        limit = self.config.engine.params_max_bytes
        if size > limit:
            largest = max(params, key=lambda k: len(codec.dumps(params[k]).encode("utf-8")))
            raise InvalidParams(
                f"{where}: the parameters are {size} bytes as JSON; the limit is {limit} "
                f"(engine.params_max_bytes); the largest is {largest!r}"
            )
        definition.bind_params(params, known_json=True)
        return definition, params, params_json

    def _checked_start(
        self, name: Any, params: Any, keywords: Mapping[str, Any]
    ) -> tuple[WorkflowDef, str, StartOptions]:
        """The workflow, the parameters' JSON text and the options, checked (InvalidParams,
        UnknownWorkflow); nothing is read from or written to the store. An unknown option is refused
        before the parameters are checked, an unusable one after, as starts always have."""
        reject_unknown(keywords)
        definition, _, params_json = self.checked_params(name, params)
        return definition, params_json, StartOptions.parse(keywords)

    # ----- the public API ------------------------------------------------------------------------
    def start(self, name: str, params: dict[str, Any] | None = None, *, parent_run_id: str | None = None,
              **options: Unpack[StartKeywords]) -> str:
        """Enqueue a run of workflow ``name`` with ``params`` (a dict of JSON values, at most
        ``engine.params_max_bytes`` as JSON); returns its id (the existing one for a repeated
        ``deduplicationId``). Options: queue, partitionKey, deduplicationId, actor (strings),
        priority (a 32-bit int), timeoutSeconds (a finite number > 0); parsed here, once, into a
        :class:`~exchange._engine.operator.start_options.StartOptions`.

        In a gateway with a free worker and no other gateway alive, the start's commit also makes
        the claim its dispatcher would make (see :class:`StartClaimant`): the run is RUNNING when
        this returns, unless a run waiting before it (a higher priority, an older one) was taken
        instead.

        Raises UnknownWorkflow, or InvalidParams naming the parameter or option; nothing is stored
        then. ``parent_run_id``: the run that starts it as its child (``rt.startChild``)."""
        definition, params_json, checked = self._checked_start(name, params, options)
        new = self._new_run(definition, params_json, checked, parent_run_id)
        claimant = self._start_claimant
        worker = None if claimant is None else claimant.reserve_worker()
        if claimant is None or worker is None:
            run_id, _ = self.store.create_run(new)
        else:
            taken: list[r.RunRecord] = []
            sent_at = time.monotonic()  # the claimed runs' leases count from here
            try:
                run_id, _, taken = self.store.create_and_claim(new, *worker)
            finally:
                claimant.run_claimed(taken, sent_at)
            if any(rec.id == run_id for rec in taken):
                return run_id
        for listener in self._enqueue_listeners:
            listener()
        return run_id

    def claim_on_start(self, claimant: StartClaimant) -> None:
        """Let the starts of this process claim for ``claimant``'s free workers."""
        self._start_claimant = claimant

    def withdraw_start_claims(self, claimant: StartClaimant) -> None:
        """Starts no longer claim for ``claimant`` (a stopping dispatcher)."""
        if self._start_claimant is claimant:
            self._start_claimant = None

    def create_run(
        self, name: str, params: dict[str, Any] | None = None, *, holder: Holder | None = None,
        parent_run_id: str | None = None, **options: Unpack[StartKeywords]
    ) -> tuple[str, bool]:
        """Validate and insert a run (as :meth:`start` does); ``holder`` creates it PENDING and held,
        with a lease, for an execution in this process (``exchange run``). Returns ``(run_id, created)``."""
        definition, params_json, checked = self._checked_start(name, params, options)
        if holder is not None and is_draining(self.store.control.get(MAINTENANCE)):
            raise WorkflowError(f"{definition.name}: not run: maintenance drain is in force, nothing new starts "
                                "(exchange maintenance status; exchange maintenance exit ends it)")
        return self.store.create_run(self._new_run(definition, params_json, checked, parent_run_id), holder=holder)

    @staticmethod
    def _new_run(
        definition: WorkflowDef, params_json: str, options: StartOptions, parent_run_id: str | None
    ) -> NewRun:
        """The row a start inserts: the options' defaults filled in (queue ``default``, the
        :func:`default_actor`)."""
        return NewRun(
            workflow=definition.name,
            params_json=params_json,
            code_version=definition.code_version,
            created_by=options.actor or default_actor(),
            queue=options.queue or "default",
            partition_key=options.partition_key,
            priority=options.priority,
            dedup_id=options.deduplication_id,
            timeout_seconds=options.timeout_seconds,
            parent_run_id=parent_run_id,
        )

    def get_run(
        self, run_id: str, *, steps: bool = True, events: bool = True, last_steps: int | None = None,
        last_events: int | None = None, hide_progress: bool = False,
    ) -> RunView:
        """The run as ``show --json`` prints it. ``run_id``: the whole id or a unique prefix of it
        (at least 4 characters). ``last_steps``/``last_events``: only the last N (whole numbers
        >= 0), see :func:`~exchange._engine.operator.views.run_view`. InvalidArgument for a
        ``run_id`` that cannot be an id or a bad N, UnknownRun for one that names no run,
        AmbiguousRun for a prefix several runs' ids start with."""
        run_id = self.checked_run_id("get_run", run_id)
        if last_steps is not None:
            last_steps = integer("get_run", "last_steps", last_steps, minimum=0, maximum=LIST_LIMIT_MAX)
        if last_events is not None:
            last_events = integer("get_run", "last_events", last_events, minimum=0, maximum=LIST_LIMIT_MAX)
        rec = self.store.runs.get(run_id)
        if rec is None:
            raise UnknownRun(run_id)
        return run_view(self.store, rec, steps=steps, events=events, last_steps=last_steps,
                        last_events=last_events, hide_progress=hide_progress)

    def list_runs(
        self, status: str | None = None, workflow: str | None = None, limit: int = 100, *,
        state: str | None = None, code_version: str | None = None, since: Any = None, call: str = "list_runs",
    ) -> list[RunView]:
        """Runs, newest first, without steps and events, matching every filter given: ``status``
        one of the run statuses (any case; WorkflowError naming the known ones otherwise),
        ``workflow`` a workflow name, ``state`` the ISA-88 state last reported (any case),
        ``code_version`` the code version the run was created with, ``since`` created at or after a
        ``datetime`` (naive: UTC), a ``timedelta`` ago, or epoch seconds; ``limit`` a whole number
        from 0 to :data:`LIST_LIMIT_MAX`. InvalidArgument naming a filter that cannot be used and
        ``call`` (the facade passes ``listRuns``)."""
        where = run_lookup.run_filter(self.store, status=status, workflow=workflow, state=state,
                                      code_version=code_version, since=since, call=call)
        limit = integer(call, "limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
        return [run_view(self.store, rec, steps=False, events=False) for rec in self.store.lookup.list(where, limit)]

    def pause_for_finish(self, timeout_seconds: float) -> None:
        """Wait ``timeout_seconds``, or less when a run executing in this process finishes: how a
        follower that polls the store (``exchange follow``, ``run``) waits between reads."""
        self._run_ends.pause(timeout_seconds)

    def wait_for(self, run_id: str, timeout_seconds: float | None = None) -> RunView:
        """Block until the run is finished or ``timeout_seconds`` (a finite number >= 0; None: no
        limit) have passed; returns the run dict either way. InvalidArgument for a timeout that is
        NaN, infinite, negative, a bool or not a number (use None to wait without a limit);
        UnknownRun for an unknown id. A run executing in this process is seen finished at once; one
        executing elsewhere within :data:`CLIENT_POLL_MAX_SECONDS` of its end."""
        run_id = self.checked_run_id("wait_for", run_id)
        timeout = optional_number("wait_for", "timeout_seconds", timeout_seconds, minimum=0)
        deadline = None if timeout is None else time.monotonic() + timeout
        pauses = self._client_pauses()
        with self._run_ends.bell(run_id) as ended:
            while True:
                ended.clear()  # before the read: an end after it rings again
                rec = self.store.runs.get(run_id)
                if rec is None:
                    raise UnknownRun(run_id)
                if rec.finished:
                    return run_view(self.store, rec)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return run_view(self.store, rec)
                pause_seconds = next(pauses)
                ended.wait(pause_seconds if remaining is None else min(pause_seconds, remaining))

    def _client_pauses(self) -> Iterator[float]:
        """The pauses between a waiting client's reads of another run (``wait_for``, ``get_event``):
        ``mailbox_poll_ms`` first, then twice as long each time, up to :data:`CLIENT_POLL_MAX_SECONDS`."""
        pause_seconds = self.config.engine.mailbox_poll_ms / 1000
        while True:
            yield pause_seconds
            pause_seconds = min(CLIENT_POLL_MAX_SECONDS, max(2 * pause_seconds, 0.001))

    def send_command(
        self, run_id: str, cmd: str, reason: str | None = None, *, actor: str | None = None,
        topic: str = commands.COMMAND_TOPIC, args: Any = None, strict: bool = False, call: str = "send_command",
        signing: Signing | None = None,
    ) -> int:
        """Post an operator command (HOLD, RESUME, STOP, ABORT, RESET; any case) to the run's mailbox;
        returns the message id. With ``strict``, a command the run will not accept (see
        :meth:`judge_command`) raises CommandRefused instead of being sent to be dropped.

        UnknownCommand for a ``cmd`` outside the command set; InvalidArgument for a run id, reason
        (at most ``engine.reason_max_chars``), actor or topic that cannot be stored, or ``args``
        that are not JSON or make the message larger than ``engine.message_max_bytes``; UnknownRun;
        WorkflowError when the run is already finished. Nothing is stored on any of these. Errors
        name ``call`` (the facade passes ``sendCommand``). ``signing``: the command is signed (its
        signer the actor; the signature in the ``command_sent`` event), as ``[signatures]
        required_for`` may require of this command (NotAllowed without, nothing sent)."""
        run_id = self.checked_run_id(call, run_id)
        if isinstance(cmd, str) and len(cmd) > 40:
            raise UnknownCommand(cmd[:40] + "...", commands.COMMANDS)
        name = commands.normalise_command(cmd)
        signer = self._signer(call, run_id, name, signing)
        reason = self.checked_reason(call, reason)
        actor = self._checked_actor(call, actor if signing is None else signing.user)
        topic = checked_text(call, "topic", topic, max_chars=TOPIC_MAX_CHARS)
        payload = {"cmd": name, "reason": reason, "actor": actor, "args": args}
        self._checked_message(call, "args", args)
        self._checked_message(call, "the command", payload)
        if strict:
            problem = command_fate.judge(self.store, run_id, name, topic)
            if problem is not None:
                raise CommandRefused(run_id, name, problem)
        sent: dict[str, Any] = {"cmd": name, "topic": topic}
        if signer is not None:
            sent["signature"] = signer()
        return self._post(run_id, topic, payload, actor, reason, ("command_sent", sent))

    def judge_command(self, run_id: str, cmd: str, *, topic: str = commands.COMMAND_TOPIC) -> str | None:
        """Why the run will drop ``cmd`` if it is sent now (its status, the ISA-88 state it reported
        last, the commands already waiting before it; see the command table in docs/authoring.md),
        or None when it will accept it or cannot be told yet. Reads only. UnknownCommand,
        UnknownRun, InvalidArgument."""
        run_id = self.checked_run_id("judge_command", run_id)
        topic = checked_text("judge_command", "topic", topic, max_chars=TOPIC_MAX_CHARS)
        return command_fate.judge(self.store, run_id, commands.normalise_command(cmd), topic)

    def wait_for_command(self, run_id: str, message_id: int, timeout_seconds: float = 0.0) -> dict[str, Any]:
        """What became of message ``message_id`` (a ``send_command`` result), waiting up to
        ``timeout_seconds`` (a finite number >= 0) until the run dropped it, or consumed it and
        reported its next state; see :func:`exchange._engine.operator.command_fate.outcome` for the
        dict. UnknownRun, WorkflowError (no such message of the run), InvalidArgument."""
        call = "wait_for_command"
        run_id = self.checked_run_id(call, run_id)
        message = integer(call, "message_id", message_id, minimum=1, maximum=2**63 - 1)
        timeout = number(call, "timeout_seconds", timeout_seconds, minimum=0)
        poll_seconds = max(self.config.engine.mailbox_poll_ms / 1000, 0.05)  # another process's store: cheap polls
        return command_fate.wait_outcome(self.store, run_id, message, timeout, poll_seconds)

    def attention(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The runs that need someone, a row per reason (an open prompt, held on a failed step or by
        equipment, a wait for units longer than ``[units] wait_attention_s``, a write in doubt,
        ERROR within ``[attention] recent_hours``), most urgent first: ``{"run",
        "workflow", "status", "state", "reason", "since", "detail"}``; see
        :mod:`exchange._engine.operator.attention`."""
        limit = integer("attention", "limit", limit, minimum=1, maximum=10_000)
        rows = attention.attention_rows(self.store, self.config.attention.recent_hours, limit,
                                        units_wait_s=self.config.units.wait_attention_s)
        return [attention.row_view(row) for row in rows[:limit]]

    def phase_runs(self) -> dict[str, PhaseRunView]:
        """``{phase name: {"run", "workflow", "stage", "seen_state", "held_by"}}``: the run
        commanding each equipment phase now (its ``phase.run`` in progress), as the run last saw
        the phase; a phase no run commands is absent. One query; the PLC is not read."""
        from exchange._engine.operator import phase_runs  # noqa: PLC0415 - only the phase surfaces need it

        return phase_runs.phase_runs(self.store)

    def units(self) -> list[dict[str, Any]]:
        """Every configured unit: ``{"unit", "class", "holder", "since", "waiting", "held"}`` (the holder a
        run id or None; the runs waiting, in the order they will be granted, then the runs held by a
        HOLD while they waited, also in ``held``). Three queries."""
        from exchange._engine.operator import unit_views  # noqa: PLC0415 - only exchange units needs it

        classes = {name: unit.unit_class for name, unit in self.config.units.units.items()}
        return [unit_views.as_json(view) for view in unit_views.unit_views(self.store, classes)]

    def run_phase(self, run_id: str) -> PhaseView | None:
        """The phase the run ``run_id`` (a whole id) commands now, as ``show --json``'s ``phase``
        gives it, or None: one query by the run's steps (what a live page polls)."""
        found = self.store.phase_notes.of_run(run_id)
        return None if found is None else phase_row_view(found)

    # ----- operator prompts (see exchange._engine.operator.prompt_answers) ----------------------
    def open_prompts(self, run_id: str | None = None, limit: int = 1000) -> list[PromptView]:
        """The prompts that wait for a person (OPEN, or AWAITING_VERIFICATION) in unfinished runs,
        oldest first; of one run if ``run_id`` is given (UnknownRun, InvalidArgument)."""
        if run_id is not None:
            run_id = self.checked_run_id("open_prompts", run_id)
        limit = integer("open_prompts", "limit", limit, minimum=1, maximum=10_000)
        return [prompt_view(rec) for rec in self.store.prompts.waiting(run_id=run_id, limit=limit)]

    def answer_prompt(self, run_id: str, key: str, values: Any, *, actor: str | None = None,
                      role: str | None = None, reason: str | None = None, person: bool = True,
                      signing: Signing | None = None) -> PromptView:
        """Answer the open prompt ``key`` of the run with ``values`` (field name -> value); returns
        the prompt afterwards: ANSWERED (the run goes on), or AWAITING_VERIFICATION. ``actor``: who
        answers (default: :func:`default_actor`); ``role``: the caller's role, whose ``answer`` right
        is held to the prompt's role (None: a trusted local caller); ``person``: False for a program
        (an API token), which may not answer a prompt that a second person verifies. InvalidAnswer
        naming the field (nothing stored, the prompt stays open), PromptNotOpen, NotAllowed,
        UnknownRun, InvalidArgument. ``signing``: the answer is signed (its signer the actor), as
        ``[signatures] required_for`` ``answer:KEY`` requires (NotAllowed without, nothing done)."""
        call = "answer_prompt"
        run_id = self.checked_run_id(call, run_id)
        key = checked_text(call, "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        signer = self._signer(call, run_id, f"answer:{key}", signing)
        view = prompt_answers.answer(self.store, run_id, key, values, role=role, roles=self.roles,
                                     actor=self._checked_actor(call, actor if signing is None else signing.user),
                                     reason=self.checked_reason(call, reason), person=bool(person), signer=signer)
        if view["status"] == "ANSWERED":
            self.local_runs.notify_mail(run_id)
        return view

    def verify_prompt(self, run_id: str, key: str, *, actor: str | None = None, role: str | None = None,
                      reason: str | None = None, reject: bool = False, person: bool = True,
                      signing: Signing | None = None) -> PromptView:
        """Verify the answer of prompt ``key`` that waits for a second person (``reject``: send it
        back, the prompt opens again); returns the prompt afterwards. The caller vouches for
        ``actor`` (the CLI and the API authenticate the user first). NotAllowed for the person who
        answered (under any of their names), a role without the ``verify`` right or below the
        prompt's ``verify_role``, or a
        program (``person`` False); PromptNotOpen, UnknownRun. ``signing``: the verification is an
        electronic signature of its actor, whose password the caller checked just now (the CLI's
        always is); ``[signatures] required_for`` ``verify`` makes it needed (NotAllowed without)."""
        call = "verify_prompt"
        run_id = self.checked_run_id(call, run_id)
        key = checked_text(call, "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        signer = self._signer(call, run_id, "verify", signing)
        view = prompt_answers.verify(self.store, run_id, key, role=role, roles=self.roles,
                                     actor=self._checked_actor(call, actor if signing is None else signing.user),
                                     reason=self.checked_reason(call, reason), reject=bool(reject),
                                     person=bool(person), signer=signer)
        if view["status"] == "ANSWERED":
            self.local_runs.notify_mail(run_id)
        return view

    def send(self, run_id: str, topic: str, message: Any, *, actor: str | None = None) -> int:
        """Post any JSON ``message`` (at most ``engine.message_max_bytes`` as JSON) to the run's
        ``topic``; returns the message id. InvalidArgument for a message that is not JSON or too
        large, or a run id, topic or actor that cannot be stored; UnknownRun; WorkflowError when the
        run is already finished. Nothing is stored on any of these."""
        call = "send"
        run_id = self.checked_run_id(call, run_id)
        topic = checked_text(call, "topic", topic, max_chars=TOPIC_MAX_CHARS)
        actor = self._checked_actor(call, actor)
        self._checked_message(call, "message", message)
        return self._post(run_id, topic, message, actor, None, None)

    def _post(
        self, run_id: str, topic: str, payload: Any, actor: str, reason: str | None,
        event: tuple[str, Any] | None,
    ) -> int:
        status, message_id = self.store.send_message(
            run_id, topic, payload, actor=actor, reason=reason, event=event
        )
        if status is None:
            raise UnknownRun(run_id)
        if message_id is None:
            raise WorkflowError(f"run {run_id} is {status}: already finished, nothing sent (messages only "
                                f"reach unfinished runs)")
        self.local_runs.notify_mail(run_id)
        return message_id

    def cancel(self, run_id: str, reason: str | None = None, *, actor: str | None = None,
               signing: Signing | None = None) -> str:
        """Ask an unfinished run to stop; returns its status at the time: CANCELLED at once if it
        was still ENQUEUED, else PENDING or RUNNING (it stops at its next cancellation point).

        A run that is already finished (SUCCESS, ERROR, CANCELLED) is left alone: WorkflowError
        ``run X already finished (SUCCESS); nothing cancelled``. InvalidArgument for a run id,
        reason (at most ``engine.reason_max_chars``) or actor that cannot be stored; UnknownRun.
        ``signing``: the cancel is signed (its signer the actor), as ``[signatures] required_for``
        ``cancel`` requires (NotAllowed without, nothing done)."""
        call = "cancel"
        run_id = self.checked_run_id(call, run_id)
        signer = self._signer(call, run_id, "cancel", signing)
        reason = self.checked_reason(call, reason)
        actor = self._checked_actor(call, actor if signing is None else signing.user)
        rec = self.store.runs.get(run_id)
        if rec is None:
            raise UnknownRun(run_id)
        if rec.finished:
            raise WorkflowError(f"run {run_id} already finished ({rec.status}); nothing cancelled")
        status = self.store.request_cancel(run_id, actor=actor, reason=reason,
                                           signature=None if signer is None else signer())
        if status is None:
            raise UnknownRun(run_id)
        if status in (r.SUCCESS, r.ERROR):  # it finished between the read and the request
            raise WorkflowError(f"run {run_id} already finished ({status}); nothing cancelled")
        ctx = self.local_runs.get(run_id)
        if ctx is not None:
            ctx.cancel(reason)
        self._run_ends.ended(run_id)
        self.cancel_children(run_id, reason, actor=actor)
        return status

    def retry(self, run_id: str, reason: str | None = None, *, actor: str | None = None) -> str:
        """Execute an ERROR or CANCELLED run again from where it stopped, under the same id (returned
        whole): back to ENQUEUED for any gateway; recorded steps replay, the failed step runs again
        with fresh attempts (as resumed in doubt when it had begun its side effect); see
        :mod:`exchange._store.runs.rerun`. Audited (a ``retried`` event) with ``actor`` and
        ``reason``. WorkflowError naming the status of a run that is not ERROR or CANCELLED
        (nothing changed); UnknownRun; InvalidArgument for a run id, reason or actor that cannot
        be stored."""
        call = "retry"
        run_id = self.checked_run_id(call, run_id)
        reason = self.checked_reason(call, reason)
        actor = self._checked_actor(call, actor)
        done = self.store.reruns.retry(run_id, actor=actor, reason=reason)
        log.info("run %s (%s) retried by %s%s", run_id, done.status, actor,
                 "" if done.step is None else f" from step {done.step.seq} ({done.step.name})")
        for listener in self._enqueue_listeners:
            listener()
        return run_id

    def fork(self, run_id: str, from_step: int, reason: str | None = None, *, actor: str | None = None) -> str:
        """Start a new run of ``run_id``'s workflow and parameters whose steps before sequence
        ``from_step`` are copies of the run's (replayed, not executed); returns its id. The run
        itself is only read. Audited (a ``forked`` event in the new run) with ``actor`` and
        ``reason``. InvalidArgument for a ``from_step`` that is not a whole number from 1 to the
        last recorded sequence number + 1 (the message names both), or a run id, reason or actor
        that cannot be stored; WorkflowError when a step before ``from_step`` has no outcome yet;
        UnknownRun."""
        call = "fork"
        run_id = self.checked_run_id(call, run_id)
        from_step = integer(call, "from_step", from_step)  # its range is the run's: the store says which
        reason = self.checked_reason(call, reason)
        actor = self._checked_actor(call, actor)
        done = self.store.reruns.fork(run_id, from_step, actor=actor, reason=reason)
        log.info("run %s forked from step %s of run %s by %s (%s step(s) copied)", done.run_id, from_step,
                 run_id, actor, done.steps_copied)
        for listener in self._enqueue_listeners:
            listener()
        return done.run_id

    def check_replay(self, run_ids: Sequence[str] = (), *, all_active: bool = False,
                     since: Any = None) -> list[ReplayOutcome]:
        """Replay the recorded history of each run named in ``run_ids`` (ids or unique prefixes),
        and with ``all_active`` (or when none is named) of every unfinished run, against the
        workflows registered now, executing no step, receive, wait or write: one
        :class:`~exchange._engine.execution.ReplayOutcome` per run (``ok``, ``diverges`` with where
        and how, ``error``), oldest first. ``since``: only runs created since (a ``timedelta`` ago, a
        ``datetime``, epoch seconds). UnknownRun, AmbiguousRun, InvalidArgument as for ``get_run``.
        See :mod:`~exchange._engine.operator.replay_checks`."""
        from exchange._engine.operator import replay_checks  # a deploy's check, not every command's import

        whole_ids = [self.checked_run_id("check_replay", run_id) for run_id in run_ids]
        return replay_checks.check_replay(self.store, self.registry, self.config.engine, whole_ids,
                                          all_active=all_active, since=since)

    def export_run(self, run_id: str) -> dict[str, Any]:
        """The run's recorded history as a versioned JSON document (``exchange export-run``; the
        format: :mod:`~exchange._engine.operator.replay_checks`). UnknownRun, InvalidArgument."""
        from exchange._engine.operator import replay_checks

        return replay_checks.export_run(self.store, self.checked_run_id("export_run", run_id))

    def record(self, run_id: str) -> dict[str, Any]:
        """The run's batch record, JSON-ready (``exchange record``, ``GET /api/v1/runs/{id}/record``,
        the console's printable page; the keys: :mod:`~exchange._engine.operator.record_views`).
        ``run_id``: the id or a unique prefix. Reads only. UnknownRun, AmbiguousRun, InvalidArgument."""
        return self._build_record(self.checked_run_id("record", run_id))

    def _build_record(self, run_id: str) -> dict[str, Any]:
        from exchange._engine.operator import record_views

        rec = self.store.runs.get(run_id)
        if rec is None:
            raise UnknownRun(run_id)
        return record_views.build_record(self.store, rec, self.config.phases)

    # ----- electronic signatures (see exchange._engine.operator.signatures) ---------------------
    def signature_required(self, action: str) -> str | None:
        """The default meaning of ``action`` (``verify``, ``release``, a command, ``cancel``,
        ``answer:KEY``) when ``[signatures] required_for`` makes it need a signature, else None: what
        a surface asks before it asks for anything else."""
        from exchange._config_signatures import default_meaning

        return default_meaning(action) if self.config.signatures.requires(action) else None

    def _signer(self, call: str, run_id: str, action: str, signing: Signing | None) -> Signer:
        from exchange._config_signatures import default_meaning
        from exchange._engine.operator import signatures

        return signatures.action_signer(self.store, run_id, lambda: self._build_record(run_id), signing, action,
                                        required=self.config.signatures.requires(action),
                                        default_meaning=default_meaning(action), call=call)

    def sign(self, run_id: str, signing: Signing, *, role: str | None) -> dict[str, Any]:
        """Sign the run's record with ``signing.meaning`` (required) as ``signing.user``, whose
        password the caller checked just now; returns the signature as the record lists it. The
        signature hashes the record as it is (see :mod:`~exchange._engine.operator.signatures`) and
        is written right after its chain head. NotAllowed for a ``role`` without the ``sign``
        right (None: a trusted caller), before anything is read; UnknownRun, InvalidArgument."""
        from exchange._engine.operator import signatures
        from exchange._roles import SIGN

        call = "sign"
        if role is not None and not self.roles.may(role, SIGN):
            raise NotAllowed(self.roles.refusal(role, SIGN, signing.user, "signing a run's record"))
        run_id = self.checked_run_id(call, run_id)
        meaning = signatures.checked_meaning(call, signing.meaning)
        checked_text(call, "user", signing.user, max_chars=signatures.NAME_MAX_CHARS)
        view = signatures.sign_alone(self.store, run_id, lambda: self._build_record(run_id), signing,
                                     kind=SIGNATURE_EVENT, action=signatures.SIGN_ACTION, meaning=meaning)
        log.info("run %s signed by %s: %s", run_id, signing.user, meaning)
        return view

    def release(self, run_id: str, signing: Signing, *, role: str | None) -> dict[str, Any]:
        """Release the finished run: a signature of ``signing.user`` meaning "released" (any other
        meaning given is refused). NotAllowed for a ``role`` without the ``release`` right (None:
        a trusted caller); WorkflowError for a run not finished, or released already (nothing
        signed); UnknownRun, InvalidArgument."""
        from exchange._engine.operator import signatures
        from exchange._roles import RELEASE

        call = "release"
        if role is not None and not self.roles.may(role, RELEASE):
            raise NotAllowed(self.roles.refusal(role, RELEASE, signing.user, "releasing a run"))
        run_id = self.checked_run_id(call, run_id)
        if signing.meaning not in (None, signatures.RELEASED_MEANING):
            raise InvalidArgument(f"{call}: a release means {signatures.RELEASED_MEANING!r}, not "
                                  f"{shown(signing.meaning)} (sign with another meaning: `exchange sign`)")
        checked_text(call, "user", signing.user, max_chars=signatures.NAME_MAX_CHARS)
        view = signatures.sign_alone(self.store, run_id, lambda: self._build_record(run_id), signing,
                                     kind=RELEASE_EVENT, action=signatures.RELEASE_ACTION,
                                     meaning=signatures.RELEASED_MEANING)
        log.info("run %s released by %s", run_id, signing.user)
        return view

    def signatures(self, run_id: str) -> list[dict[str, Any]]:
        """The run's signatures, oldest first, as the record lists them (one read of its events).
        UnknownRun, AmbiguousRun, InvalidArgument."""
        from exchange._engine.operator import signatures

        run_id = self.checked_run_id("signatures", run_id)
        if self.store.runs.get(run_id) is None:
            raise UnknownRun(run_id)
        return signatures.read_signatures(self.store, run_id)

    def signature_checks(self, run_id: str) -> list[bool | None]:
        """Per signature of the run (as :meth:`signatures` lists them): whether its ``record_hash``
        is the hash of the record rebuilt from today's (True/False; see
        :func:`~exchange._engine.operator.signatures.record_as_signed`), or None for the
        signature of an action, which hashed the record before its action. Meaningful for a
        finished run, to which only signatures are added. Reads only."""
        from exchange._engine.operator import signatures

        return signatures.recomputed(self.record(run_id))

    def released(self, run_id: str) -> dict[str, Any] | None:
        """The run's release (a signature, as the record lists it), or None."""
        return next((s for s in self.signatures(run_id) if s["action"] == "release"), None)

    def review(self, *, pending: bool = True, limit: int = 100) -> list[dict[str, Any]]:
        """Finished runs for QA: with ``pending``, those not released yet, the oldest finished first;
        else every finished run, the newest first. Each with its exceptions counted (see
        :func:`exchange._engine.operator.signatures.review`). InvalidArgument for a bad ``limit``."""
        from exchange._engine.operator import record_views, signatures

        limit = integer("review", "limit", limit, minimum=1, maximum=10_000)
        return signatures.review(self.store, lambda rec: record_views.review_parts(self.store, rec),
                                 pending=bool(pending), limit=limit)

    def verify_audit(self, run_ids: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Check the audit chains of ``run_ids`` (ids or unique prefixes; none: every run, oldest
        first), as ``exchange audit verify`` does. Reads only. One dict per run: ``run``, ``state``
        (``ok``; ``tampered``, with ``problem`` naming the first event or step changed or deleted;
        ``unchained``: written before the chain existed), ``links``, ``head``. UnknownRun,
        AmbiguousRun, InvalidArgument."""
        chains = self.store.chains
        ids = [self.checked_run_id("verify_audit", run_id) for run_id in run_ids] or chains.run_ids()
        found = []
        for run_id in ids:
            check = chains.check(run_id)
            if check is None:
                raise UnknownRun(run_id)
            found.append({"run": check.run_id, "state": check.state, "links": check.links, "head": check.head,
                          "problem": check.problem})
        return found

    def check_exported(self, document: Any, where: str = "the history") -> ReplayOutcome:
        """Replay an exported history (the document ``export_run`` returns) against the workflow of
        its name registered now, as ``check_replay`` replays a run of the store. InvalidArgument
        naming ``where`` when the document is not an exported history of a version this reads."""
        from exchange._engine.operator import replay_checks

        history = replay_checks.history_from_export(document, where)
        return replay_checks.check_history(self.store, self.registry, self.config.engine, history)

    def cancel_children(self, run_id: str, reason: str | None, *, actor: str | None = None) -> list[str]:
        """Cancel the unfinished runs ``run_id`` started as children (and theirs, each in turn);
        returns the ids of the children cancelled here."""
        cancelled = []
        why = self.checked_reason("cancel", (f"parent {run_id[:8]} cancelled" + (f": {reason}" if reason else ""))
                                  [: self.config.engine.reason_max_chars])
        for child_id, _workflow, status in self.store.runs.children(run_id):
            if status in r.FINAL_STATUSES:
                continue
            try:
                self.cancel(child_id, why, actor=actor)
            except WorkflowError:  # it finished meanwhile
                continue
            cancelled.append(child_id)
        return cancelled

    def get_event(self, run_id: str, key: str, timeout_seconds: float = 0.0) -> Any:
        """The run's value for ``key`` (set with setEvent), waiting up to ``timeout_seconds`` (a
        finite number >= 0) for it; None if it was not set in time. InvalidArgument for a run id,
        key or timeout that cannot be used; UnknownRun."""
        call = "get_event"
        run_id = self.checked_run_id(call, run_id)
        key = checked_text(call, "key", key, max_chars=EVENT_KEY_MAX_CHARS)
        timeout = number(call, "timeout_seconds", timeout_seconds, minimum=0)
        deadline = time.monotonic() + timeout
        pauses = self._client_pauses()
        while True:
            text = self.store.values.get(run_id, key)
            if text is not None:
                return codec.loads(text)
            if time.monotonic() >= deadline:
                if self.store.runs.get(run_id) is None:
                    raise UnknownRun(run_id)
                return None
            time.sleep(min(next(pauses), max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        self.services.close()
        self.store.close()
