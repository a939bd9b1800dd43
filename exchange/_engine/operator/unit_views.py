"""Who holds each configured unit and who waits for it, for ``exchange units`` (and, to come, the
API, the console and the OPC UA server): one read of the holders, one of the waiting requests, one
of the held ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from exchange._store import Store
from exchange._timefmt import iso_utc


class UnitView(TypedDict):
    """One configured unit now: its holder (a run id) and since when (ISO), or None when free, and
    the runs waiting for it, in the order they will be granted, then those held by a HOLD while
    they waited (passed over until a RESUME), also in ``held``."""

    unit: str
    unit_class: str
    holder: str | None
    since: str | None
    waiting: list[str]
    held: list[str]


def unit_views(store: Store, classes: Mapping[str, str]) -> list[UnitView]:
    """Every configured unit (``classes``: unit name -> its class), sorted by name. A request for a
    class waits on each unit of the class."""
    holders = {holder.unit: holder for holder in store.units.holders()}
    waiting: dict[str, list[str]] = {name: [] for name in classes}
    held: dict[str, list[str]] = {name: [] for name in classes}
    for requests, lists in ((store.units.waiting(), (waiting,)), (store.units.held_waiters(), (waiting, held))):
        for request in requests:
            for unit in request.wanted:
                for runs in lists:
                    if unit in runs and request.run_id not in runs[unit]:
                        runs[unit].append(request.run_id)
    views: list[UnitView] = []
    for name in sorted(classes):
        holder = holders.get(name)
        views.append({"unit": name, "unit_class": classes[name], "holder": None if holder is None else holder.run_id,
                      "since": None if holder is None else iso_utc(holder.since), "waiting": waiting[name],
                      "held": held[name]})
    return views


def as_json(view: UnitView) -> dict[str, Any]:
    """The view as DESIGN.md's ``exchange units --json`` gives it (``class`` for ``unit_class``), and
    ``held``: which of ``waiting`` are held."""
    return {"unit": view["unit"], "class": view["unit_class"], "holder": view["holder"], "since": view["since"],
            "waiting": view["waiting"], "held": view["held"]}
