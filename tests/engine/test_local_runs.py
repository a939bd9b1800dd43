"""LocalRuns: the table of runs executing in this process, and the mail wake-ups it hands on."""

from __future__ import annotations

from dataclasses import dataclass

from exchange._engine.operator.local_runs import LocalRuns


@dataclass
class FakeRun:
    run_id: str
    woken: int = 0

    def mail_arrived(self) -> None:
        self.woken += 1


def test_attached_runs_are_found_counted_and_woken_until_detached() -> None:
    local = LocalRuns()
    one, two = FakeRun("run-1"), FakeRun("run-2")
    local.attach(one)  # type: ignore[arg-type]
    local.attach(two)  # type: ignore[arg-type]
    assert local.get("run-1") is one and local.get("run-3") is None and local.count() == 2
    local.notify_mail("run-1")
    local.notify_mail("run-3")  # not here: nothing to wake
    local.notify_all_mail()
    assert (one.woken, two.woken) == (2, 1)
    local.detach("run-1")
    local.detach("run-1")  # twice is harmless
    assert local.get("run-1") is None and local.count() == 1
    local.notify_all_mail()
    assert (one.woken, two.woken) == (2, 2)
