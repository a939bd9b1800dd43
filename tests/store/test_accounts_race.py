"""Users added at the same moment under names that differ only in case: exactly one is stored, on
every backend (PostgreSQL's row locks cannot see a row that does not exist yet)."""

from __future__ import annotations

import threading

from exchange._store.store import Store

VARIANTS = ("Anna", "anna", "ANNA", "aNNa", "AnnA", "annA")


def _add_all_at_once(store: Store, suffix: str) -> dict[str, str | None]:
    """Each variant of the name (with ``suffix``) added by its own thread, all released together;
    what each add answered (None: added)."""
    barrier = threading.Barrier(len(VARIANTS))
    answers: dict[str, str | None] = {}

    def add(name: str) -> None:
        barrier.wait(10)
        answers[name] = store.accounts.add_user(f"{name}{suffix}", "operator", "hash", "test")

    threads = [threading.Thread(target=add, args=(name,)) for name in VARIANTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return answers


def test_names_differing_only_in_case_added_at_once_leave_one_user(store: Store) -> None:
    for round_number in range(5):
        answers = _add_all_at_once(store, str(round_number))
        stored = [u.name for u in store.accounts.list_users() if u.name.lower() == f"anna{round_number}"]
        assert len(stored) == 1, (round_number, stored, answers)
        assert [name for name, taken in answers.items() if taken is None] == [stored[0][:-1]]
        assert all(taken == stored[0] for taken in answers.values() if taken is not None), answers
