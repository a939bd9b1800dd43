"""The configured equipment phases as their PLCs report them now: the state tag's number and its
name in the phase's numbering, and whom the owner tag names. Read by ``exchange phases`` and ``GET
/api/v1/phases`` (through :func:`exchange.workflows._services.phase_states`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from exchange._config_phases import PhaseConfig
from exchange._phase_numbering import NUMBERINGS
from exchange._tags.service import TagService
from exchange._values import QualifiedValue, Quality


class PhaseReading(TypedDict):
    """One phase as read now. ``state`` (the name) and ``state_number`` are None when the state
    tag could not be read (``state_quality`` says why); ``owned_by``: ``free`` (0), ``exchange``
    (the config's ``owner_id``), ``other``, or None (no owner tag, or not read); ``state_error``:
    what the driver said when the state could not be read."""

    phase: str
    unit: str | None
    state: str | None
    state_number: int | None
    state_quality: str
    state_error: str | None
    owner: Any
    owner_quality: str | None
    owned_by: str | None


def owner_of(phase: PhaseConfig, value: Any) -> str | None:
    """Whom the owner tag's ``value`` names: free, exchange or other (None: no owner tag)."""
    if phase.owner is None:
        return None
    if value == 0:
        return "free"
    return "exchange" if value == phase.owner_id else "other"


def reading(phase: PhaseConfig, state: QualifiedValue, owner: QualifiedValue | None) -> PhaseReading:
    """``phase`` with its state tag's and owner tag's values."""
    good = state.quality is Quality.GOOD and isinstance(state.value, int) and not isinstance(state.value, bool)
    owner_value = owner.value if owner is not None and owner.quality is Quality.GOOD else None
    return {
        "phase": phase.name,
        "unit": phase.unit,
        "state": NUMBERINGS[phase.numbering].state_name(state.value) if good else None,
        "state_number": state.value if good else None,
        "state_quality": state.quality.value,
        "state_error": None if good else state.error,
        "owner": owner_value,
        "owner_quality": None if owner is None else owner.quality.value,
        "owned_by": None if owner_value is None else owner_of(phase, owner_value),
    }


def unread(phase: PhaseConfig, quality: Quality) -> PhaseReading:
    """``phase`` when nothing could be read (``quality`` says why)."""
    bad = QualifiedValue.bad(quality)
    return reading(phase, bad, bad if phase.owner is not None else None)


def read_phases(service: TagService, phases: Sequence[PhaseConfig], *, explicit: bool = False) -> list[PhaseReading]:
    """Each of ``phases`` as its PLC reports it now: the state and owner tags read in one
    :meth:`TagService.read_tags` (a request per device). ``explicit``: a device backing off after a
    failure is tried now (a person asked) rather than answered Bad at once."""
    tags = [service.tag(p.state) for p in phases] + [service.tag(p.owner) for p in phases if p.owner]
    values = iter(service.read_tags(tags, explicit=explicit))
    states = [next(values) for _ in phases]
    owners = [next(values) if p.owner else None for p in phases]
    return [reading(p, s, o) for p, s, o in zip(phases, states, owners, strict=True)]
