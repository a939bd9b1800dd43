"""What every CLI command shares: the lazily built config and runtime, errors, JSON output.

Every command module imports this one, and so do ``exchange --help`` and every usage error: it
imports the config, the engine and the store only when a command asks for them (see
tests/cli/test_cli_lazy.py).
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import click

from exchange._cli.render import printable

if TYPE_CHECKING:
    from exchange._config import Config
    from exchange._engine import Runtime


@contextmanager
def collector_paused() -> Iterator[None]:
    """Import the engine, the store and SQLAlchemy inside this block: the cyclic collector pauses,
    then what the block made is frozen, and the collector is as it was before.

    Those imports make some 77,000 objects that the collector tracks and that live as long as the
    process, SQLAlchemy's most of all. Collecting while they are made walks them again and again and
    frees next to nothing: 40-60 ms of a gateway's start, a tenth of its imports. Frozen, no later
    collection walks them either (the pre-fork advice of the gc module's docs, which suits the test
    suite's zygote too)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


class Context:
    def __init__(self, config_path: str | None) -> None:
        self.config_path = config_path
        self._config: Config | None = None
        self._runtime: Runtime | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from exchange._config import load_config

            self._config = load_config(self.config_path)
        return self._config

    def runtime(self, *, load_apps: bool = True, create: bool | None = None) -> Runtime:
        """The runtime, built on first use. ``create``: whether a store that does not exist yet may be
        created; by default only the commands that load the apps (they run or start workflows) create
        it, and the others (runs, show, send, cancel) refuse a missing store, creating nothing."""
        if self._runtime is None:
            with collector_paused():
                from exchange._engine import Runtime
                from exchange._store import Store
                from exchange.workflows import apps
                from exchange.workflows.engine.instance import set_runtime

            config = self.config
            may_create = load_apps if create is None else create
            store = Store(config.store_url, create=may_create, shared=config.store_shared)
            self._runtime = Runtime(config, store=store)
            set_runtime(self._runtime)
            if load_apps:
                apps.load(self.config)
        return self._runtime


def default_actor() -> str:
    """Who acts (:func:`exchange._engine.default_actor`), imported when a command acts, not when its
    module is imported for ``--help``."""
    from exchange._engine import default_actor as actor

    return actor()


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo("error: " + " ".join(message.split()), err=True)
    sys.exit(code)


def confirmed(question: str) -> bool:
    """Ask ``question`` (shown neutralised, on stderr); True only for a yes. End of input or Ctrl-C
    at the question is a no."""
    try:
        agreed = click.confirm(printable(question), default=False, err=True)
    except click.Abort:  # end of input, or Ctrl-C at the question
        click.echo("", err=True)
        return False
    if not sys.stdin.isatty():  # a piped answer is not echoed: end the question's line
        click.echo("", err=True)
    return bool(agreed)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


def parse_params(items: tuple[str, ...]) -> dict[str, Any]:
    """``-p key=value``: the value is JSON where it parses (``n=3`` → 3), else the string."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="-p")
        try:
            params[key.strip()] = json.loads(text)
        except ValueError:
            params[key.strip()] = text
    return params


def parse_key_values(items: tuple[str, ...], hint: str) -> dict[str, Any]:
    """``KEY=VALUE`` items (``-p``, ``-v``; see :func:`parse_params`); a value nested too deeply to
    parse, or a key given twice (which value was meant?), is a usage error naming its key, not a
    crash nor the last value silently."""
    values: dict[str, Any] = {}
    for item in items:
        try:
            parsed = parse_params((item,))
        except RecursionError:
            key = item.partition("=")[0].strip()
            raise click.BadParameter(f"the value of {key!r} nests too deeply", param_hint=hint) from None
        except click.BadParameter as exc:
            raise click.BadParameter(exc.message, param_hint=hint) from None
        for key, value in parsed.items():
            if key in values:
                raise click.BadParameter(f"{key!r} is given twice ({values[key]!r} and {value!r}); give it once",
                                         param_hint=hint)
            values[key] = value
    return values
