"""The preview's times as the runner fires them: a spread's occurrences in order, and an
existing job's time still to come of an occurrence before ``after``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.schedules.planning import explain_occurrences, fire_time
from scheduler.schedules.spread import Spread

AFTER = datetime(2027, 1, 1, tzinfo=UTC)
JOB = "66b94d6b-0d3c-4b5a-9d77-2f8f6a1c9e01"


def test_a_random_spread_wider_than_the_interval_keeps_the_occurrences_order():
    """rate(5 seconds) spread at random over 60 s: each fires no earlier than the one before."""
    found = explain_occurrences(
        "rate(5 seconds)", after=AFTER, start_at=AFTER, count=20, spread=Spread(60, "random", JOB)
    )
    times = [item.at for item in found]
    assert times == sorted(times) and len(times) == 20
    assert all(item.at >= item.occurrence for item in found)


def test_an_existing_jobs_spread_time_after_after_is_listed():
    """*/5 * * * * with a stable spread: the 00:00 occurrence fires at 00:00 plus its offset, which
    is after an ``after`` of 00:00:01 when the offset is more than a second."""
    spread = Spread(100, "stable", JOB)
    offset = fire_time(AFTER, spread) - AFTER
    assert offset > timedelta(seconds=1)  # this id's offset: the case the test is about
    [first] = explain_occurrences("*/5 * * * *", after=AFTER + timedelta(seconds=1), count=1, spread=spread)
    assert first.occurrence == AFTER and first.at == AFTER + offset
    # A new job (no id) created at that instant has no such occurrence: its first is 00:05.
    [new] = explain_occurrences("*/5 * * * *", after=AFTER + timedelta(seconds=1), count=1, spread=Spread(100))
    assert new.occurrence == AFTER + timedelta(minutes=5)
