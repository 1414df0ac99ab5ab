"""WakeGuard: a sleep noticed from the two clocks, the leases kept once (again after a failure),
and the claims held off for the grace."""

from __future__ import annotations

import pytest

from scheduler.runner.wakes import WakeGuard


class Clocks:
    def __init__(self) -> None:
        self.wall, self.monotonic = 1_000_000.0, 50.0

    def run(self, seconds: float) -> None:  # awake: both clocks move
        self.wall += seconds
        self.monotonic += seconds

    def sleep(self, seconds: float) -> None:  # asleep: the monotonic clock stops
        self.wall += seconds


def _guard(clocks: Clocks, keep) -> WakeGuard:
    return WakeGuard(
        keep, slept_seconds=2.0, grace_seconds=2.0, wall_clock=lambda: clocks.wall, monotonic=lambda: clocks.monotonic
    )


def test_time_that_passes_awake_keeps_nothing_and_holds_nothing():
    clocks, kept = Clocks(), []
    guard = _guard(clocks, lambda: kept.append(1))
    for _ in range(10):
        clocks.run(30.0)
        clocks.sleep(0.5)  # a clock correction, not a sleep
        assert guard.check() == 0.0
    assert kept == []


def test_a_sleep_keeps_the_leases_once_and_holds_the_claims_for_the_grace():
    clocks, kept = Clocks(), []
    guard = _guard(clocks, lambda: kept.append(clocks.monotonic))
    clocks.sleep(300.0)
    assert guard.check() == pytest.approx(2.0)
    assert kept == [50.0]
    clocks.run(1.5)
    assert guard.check() == pytest.approx(0.5)
    clocks.run(0.5)
    assert guard.check() == 0.0
    assert kept == [50.0]


def test_leases_not_kept_when_the_database_is_away_are_kept_at_the_next_check():
    clocks, calls = Clocks(), []

    def keep() -> None:
        calls.append(clocks.monotonic)
        if len(calls) == 1:
            raise ConnectionError("the database is away")

    guard = _guard(clocks, keep)
    clocks.sleep(300.0)
    with pytest.raises(ConnectionError):
        guard.check()
    clocks.run(3.0)  # the database answers again after longer than the grace
    assert guard.check() == pytest.approx(2.0)  # the grace counts from the leases kept, not the wake
    assert calls == [50.0, 53.0]
    clocks.run(1.5)
    assert guard.check() == pytest.approx(0.5)
    clocks.run(0.5)
    assert guard.check() == 0.0 and len(calls) == 2


def test_the_warning_names_what_its_guard_keeps(caplog):
    from scheduler.runner.alerts import Alerts

    clocks = Clocks()
    deliveries = _guard(clocks, lambda: None)
    alerts = WakeGuard(
        lambda: None, held="the alerts being sent", wall_clock=lambda: clocks.wall, monotonic=lambda: clocks.monotonic
    )
    clocks.sleep(300.0)
    with caplog.at_level("WARNING", logger="scheduler.runner.wakes"):
        deliveries.check()
        alerts.check()
    assert [r.getMessage() for r in caplog.records] == [
        "the machine slept for about 300 s: the leases of the deliveries under way are kept before the next claim",
        "the machine slept for about 300 s: the leases of the alerts being sent are kept before the next claim",
    ]
    assert Alerts(store=None, send=None)._wakes._held == "the alerts being sent"  # type: ignore[arg-type]  # the alert loop's own
