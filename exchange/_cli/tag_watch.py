"""``exchange tags watch``: a line for every change of some tags, until Ctrl-C or ``--count`` changes.

A tag whose driver pushes changes (OPC UA) is watched through a subscription: every change the
server reports arrives, however short, and the device going down arrives as ``Bad_NotConnected``.
The others are read every ``--interval-ms`` (one request per device), so a change that comes and
goes between two reads is not seen. A change is a new value or a new quality; the same value read
again with a newer timestamp is not one. Each tag's first line is its value when the watch began
(not counted).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
from typing import Any, NoReturn

import click

from exchange._cli.common import Context, print_json
from exchange._cli.tag_view import open_service, reading_dict, reading_line
from exchange._drivers.base import Subscription
from exchange._tags.service import TagService
from exchange._tags.table import TagDef
from exchange._values import QualifiedValue
from exchange.errors import CommunicationError, DeviceError

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C
DEFAULT_INTERVAL_MS = 500
CLOSE_WAIT_SECONDS = 2.0  # how long Ctrl-C lets the devices' connections close before the process ends


class _Watch:
    """The tags watched, their subscriptions and what was printed last for each."""

    def __init__(self, service: TagService, tags: list[TagDef]) -> None:
        self.service = service
        self.tags = tags
        self.changes: queue.Queue[tuple[int, QualifiedValue]] = queue.Queue()
        self.subscriptions: list[Subscription] = []
        self.polled: list[int] = []
        self.last: dict[int, tuple[Any, str]] = {}
        self.shown = 0  # changes printed

    def start(self) -> None:
        """Subscribe where the driver can push changes; poll the rest."""
        for index, tag in enumerate(self.tags):
            subscribe = getattr(self.service.driver(tag.device), "subscribe", None)
            if not callable(subscribe):
                self.polled.append(index)
                continue
            try:
                self.subscriptions.append(subscribe(tag.point, lambda value, i=index: self.changes.put((i, value))))
            except (CommunicationError, DeviceError) as exc:
                log.info("%s: subscription failed (%s); reading it every interval instead", tag.where, exc)
                self.polled.append(index)

    def poll(self) -> None:
        if self.polled:
            values = self.service.read_tags([self.tags[i] for i in self.polled])
            for index, value in zip(self.polled, values, strict=True):
                self.changes.put((index, value))

    def is_change(self, index: int, value: QualifiedValue) -> bool | None:
        """None for the tag's first reading, else whether ``value`` differs from the last one shown."""
        key = (value.value, value.quality.value)
        before = self.last.get(index)
        self.last[index] = key
        if before is None:
            return None
        return before != key

    def stop(self) -> None:
        for subscription in self.subscriptions:
            subscription.cancel()


def _show(tag: TagDef, value: QualifiedValue, width: int, as_json: bool) -> None:
    if as_json:
        print_json(reading_dict(tag, value))
    else:
        click.echo(reading_line(tag, value, width))


@click.command("watch")
@click.argument("paths", metavar="PATH...", nargs=-1, required=True)
@click.option("--interval-ms", type=click.IntRange(min=10, max=3_600_000), default=DEFAULT_INTERVAL_MS,
              show_default=True, help="How often tags without a subscription are read.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="Stop after this many changes (default: until Ctrl-C).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_obj
def watch_tags(obj: Context, paths: tuple[str, ...], interval_ms: int, count: int | None, as_json: bool) -> None:
    """Print a line for every change of the tags (value, quality, timestamp) until Ctrl-C (exit
    130) or --count changes (exit 0). Subscriptions where the driver has them, else a read every
    --interval-ms."""
    with open_service(obj) as service:
        tags = list({t.path: t for t in (service.tag(p) for p in paths)}.values())  # checked, once each
        width = max(len(t.path) for t in tags)
        watch = _Watch(service, tags)
        # Ctrl-C is a handler, not only a KeyboardInterrupt: one raised inside a driver's library
        # could be caught and lost there, a handler cannot (as `exchange follow` does).
        in_main_thread = threading.current_thread() is threading.main_thread()  # where handlers may be set
        previous = None
        if in_main_thread:
            previous = signal.signal(signal.SIGINT, lambda _signum, _frame: _stop_watching(watch))
        try:
            watch.start()
            interval_s = interval_ms / 1000
            next_poll = time.monotonic()
            while count is None or watch.shown < count:
                now = time.monotonic()
                if now >= next_poll:
                    watch.poll()
                    next_poll = now + interval_s
                try:
                    index, value = watch.changes.get(timeout=max(0.0, next_poll - time.monotonic()))
                except queue.Empty:
                    continue
                changed = watch.is_change(index, value)
                if changed is False:
                    continue
                _show(tags[index], value, width, as_json)
                watch.shown += 1 if changed else 0
        except KeyboardInterrupt:
            _stop_watching(watch)
        finally:
            if in_main_thread:
                signal.signal(signal.SIGINT, previous)
        watch.stop()


def _stop_watching(watch: _Watch) -> NoReturn:
    """Ctrl-C: say so and end at once with 130. The interrupt may have landed inside a driver holding
    its lock, so closing the devices (a courtesy: the OPC UA session's end) gets a short while in a
    thread of its own, and the process ends whether it finished or not (``os._exit``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not end in a traceback
    click.echo(f"stopped watching after {watch.shown} change(s)", err=True)

    def close() -> None:
        watch.stop()
        watch.service.close()

    closing = threading.Thread(target=close, name="watch-close", daemon=True)
    closing.start()
    closing.join(CLOSE_WAIT_SECONDS)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


COMMANDS = [watch_tags]

__all__ = ["COMMANDS", "EXIT_INTERRUPTED"]
