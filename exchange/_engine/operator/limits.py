"""The lengths the runtime accepts for a run's id and its listing filters (the store's columns).

A module of constants and nothing else: the CLI reads them to check its options, and ``exchange
--help`` or a usage error must not pay for importing the runtime and the store to do so.
"""

from __future__ import annotations

RUN_ID_CHARS = 36  # a UUID with its hyphens
PREFIX_MIN_CHARS = 4  # 65,536 values: unique among a few hundred runs, and quick to type
STATE_MAX_CHARS = 32  # the run's reported ISA-88 state column
CODE_VERSION_MAX_CHARS = 64  # the store's column

__all__ = ["CODE_VERSION_MAX_CHARS", "PREFIX_MIN_CHARS", "RUN_ID_CHARS", "STATE_MAX_CHARS"]
