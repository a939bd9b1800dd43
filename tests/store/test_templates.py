"""Parameter template rows on SQLite and PostgreSQL: versions appended and never changed, exactly one
active per name, each change audited in its own transaction, concurrent saves each given a version."""

from __future__ import annotations

import threading

from exchange._store.admin.templates import ACTIVATED, SAVED
from exchange._store.store import Store
from exchange.errors import ExchangeError


def test_versions_activation_and_their_audit(store: Store) -> None:
    table = store.templates
    assert table.add_version("cip", "plant.cip", '{"line": 1}', note="v1", actor="eve", activate=True) == 1
    assert table.add_version("cip", "plant.cip", '{"line": 2}', note=None, actor="eve", activate=False) == 2
    assert table.add_version("batch", "plant.batch", "{}", note=None, actor="eve", activate=False) == 1
    active = table.active("cip")
    assert active is not None and active.version == 1 and active.params_json == '{"line": 1}'
    assert table.active("batch") is None
    assert [(r.name, r.version, r.active) for r in table.latest()] == [("batch", 1, False), ("cip", 1, True)]

    assert table.activate("cip", 2, actor="max", reason="line 2 rebuilt")
    assert not table.activate("cip", 3, actor="max")
    assert [(r.version, r.active) for r in table.versions("cip")] == [(2, True), (1, False)]
    assert table.versions("nothing") == []

    saves = store.audit.entries(action=SAVED, target="cip")
    activations = store.audit.entries(action=ACTIVATED, target="cip")
    assert [(e.actor, e.details["version"], e.outcome) for e in saves] == [("eve", 1, "DONE"), ("eve", 2, "DONE")]
    assert [(e.actor, e.reason, e.details) for e in activations] == [("max", "line 2 rebuilt", {"version": 2})]


def test_concurrent_saves_of_one_name_never_share_a_version(store: Store) -> None:
    errors: list[BaseException] = []
    numbers: list[int] = []

    def save(index: int) -> None:
        try:
            numbers.append(store.templates.add_version("race", "plant.cip", f'{{"i": {index}}}', note=None,
                                                       actor=f"e{index}", activate=True))
        except ExchangeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    rows = store.templates.versions("race")
    assert not errors and sorted(numbers) == list(range(1, 9))
    assert sorted(r.version for r in rows) == list(range(1, 9))
    assert sum(r.active for r in rows) == 1
