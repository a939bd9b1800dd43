"""docs/phases-plc.md, the test PLC and Exchange agree: the page's table of states and the commands
each takes is the PLC's table, and its numbers are the ones Exchange writes and reads."""

from __future__ import annotations

import re

from exchange._phase_numbering import PACKML, PLI
from tests.docs.markdown import page, sections, table_rows
from tests.phaseplc.logic import PACKML_COMMANDS, PACKML_STATES, PLI_COMMANDS, PLI_STATES, PliPhase

PAGE = page("phases-plc.md")


def section(title: str) -> str:
    return next(s.body for s in sections(PAGE) if s.title.startswith(title))


def test_the_pages_table_of_pli_states_is_the_plcs() -> None:
    rows = table_rows(section("States and commands"))
    table = {}
    for state, number, takes, _ in rows:
        moves = {} if takes == "none" else dict(
            (command.upper(), target.upper()) for command, target in (m.split(" → ") for m in takes.split(", ")))
        table[state.upper()] = (int(number), moves)
    assert {name: number for name, (number, _) in table.items()} == {v: k for k, v in PLI_STATES.items()
                                                                    if v not in ("PAUSING", "PAUSED")}
    for state, (_, moves) in table.items():
        # the page names the state a command leads to first: the transient one when there is one
        assert moves == {command: transient or final
                         for command, (transient, final) in PliPhase.ACCEPTS.get(state, {}).items()}, state


def test_the_pages_numbers_are_exchanges_and_the_plcs() -> None:
    commands = next(p for p in section("States and commands").split("\n\n") if p.strip().startswith("Commands:"))
    numbers = dict(re.findall(r"(\w+) (\d+)", commands))
    assert {name.upper(): int(n) for name, n in numbers.items()} == PLI.commands
    assert {v: k for k, v in PLI_COMMANDS.items()} == PLI.commands and PLI_STATES == PLI.states
    packml = section("PackML")
    for names, expected in ((packml.split("StateCurrent")[0], PACKML.commands),
                            (packml.split("StateCurrent")[1].split(").")[0], {v: k for k, v in PACKML.states.items()})):
        found = {name.upper(): int(n) for name, n in re.findall(r"([A-Z]\w+) (\d+)", names)}
        assert found == expected
    assert PACKML_COMMANDS == {v: k for k, v in PACKML.commands.items()} and PACKML_STATES == PACKML.states
