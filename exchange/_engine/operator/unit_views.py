"""Who holds each configured unit and who waits for it, for ``exchange units``, ``GET
/api/v1/units``, the console's units page and the OPC UA server (all through
``Runtime.units``): one read of the holders, one of the waiting requests, one of the held ones. And
the units of one run, for its detailed view (``show --json``'s ``units``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from exchange._engine.model import RunUnitsView
from exchange._store import Store
from exchange._timefmt import iso_utc

WAITING_STATUSES = ("WAITING", "HELD")  # a unit request's statuses while the run waits for it (HELD: by a HOLD)


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


def run_units(store: Store, run_id: str, *, finished: bool) -> RunUnitsView:
    """The units the run holds now and those its waiting request asks for (every unit of a class
    asked for; also while a HOLD keeps the request out of the granting), by name; a finished run
    holds nothing and waits for nothing (no query: a holder row it left behind, its gateway killed,
    counts as free)."""
    if finished:
        return {"held": [], "waiting_for": []}
    waiting_for: list[str] = []
    for request in store.units.of_run(run_id):
        if request.status in WAITING_STATUSES:
            waiting_for += [unit for unit in request.wanted if unit not in waiting_for]
    return {"held": store.units.held_by(run_id), "waiting_for": waiting_for}
