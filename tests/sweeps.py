"""Long sweeps that sample per run: a seeded share of their cases, the seed printed, the whole sweep
one environment variable away.

``EXCHANGE_TEST_FULL_SWEEPS=1`` runs every case of every sweep (before a release, after a change to
what a sweep covers); ``EXCHANGE_TEST_SWEEP_SEED=N`` repeats a run's sample (its seed is printed,
``pytest -s`` shows it, and a failing sweep names it in its message).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

FULL_SWEEPS_ENV = "EXCHANGE_TEST_FULL_SWEEPS"
SEED_ENV = "EXCHANGE_TEST_SWEEP_SEED"


def full_sweeps() -> bool:
    return os.environ.get(FULL_SWEEPS_ENV, "").strip() not in ("", "0")


def sample(cases: Sequence[T], share: float, label: str) -> tuple[list[T], str]:
    """``cases`` whole with full sweeps, else a seeded ``share`` of them (at least one) in their
    order; and a line saying which (put it in the assertion messages)."""
    if full_sweeps():
        return list(cases), f"{label}: all {len(cases)} cases ({FULL_SWEEPS_ENV} set)"
    seed_text = os.environ.get(SEED_ENV, "").strip()
    seed = int(seed_text) if seed_text else time.time_ns() % 1_000_000_007
    count = max(1, round(len(cases) * share))
    chosen = set(random.Random(seed).sample(range(len(cases)), count))
    line = (f"{label}: {count} of {len(cases)} cases, seed {seed} ({SEED_ENV}={seed} repeats them, "
            f"{FULL_SWEEPS_ENV}=1 runs all)")
    print(line)
    return [case for i, case in enumerate(cases) if i in chosen], line
