"""The occurrences a plan moves past without running them (issue 33, item 7): how many, from
which, and why. Pure functions of a schedule and instants; ``lifecycle`` attaches their answer
to its plans (``Plan.skips``), which the store records as one skipped execution per reason.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.core.domain import Skip, SkipReason
from scheduler.schedules import IntervalSchedule, Schedule, next_occurrence

# Occurrences counted one by one at most (a calendar expression's; an interval is counted by
# arithmetic, whatever the gap): a cron job paused for years counts this many, no more.
COUNT_LIMIT = 10_000

_TINY = timedelta(microseconds=1)


def count_between(
    schedule: Schedule,
    after: datetime,
    before: datetime,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> tuple[int, datetime | None]:
    """The occurrences strictly after ``after`` and strictly before ``before`` (inside the
    job's window): how many (at most ``COUNT_LIMIT`` for a calendar expression) and the first."""
    first = next_occurrence(schedule, after, start_at=start_at, end_at=end_at)
    if first is None or first >= before:
        return 0, None
    if isinstance(schedule, IntervalSchedule):
        last_bound = before - _TINY if end_at is None else min(before - _TINY, end_at)
        last = schedule.last_at_or_before(last_bound)
        return (0, None) if last is None or last < first else ((last - first) // schedule.interval + 1, first)
    count, at = 1, first
    while count < COUNT_LIMIT:
        following = next_occurrence(schedule, at, start_at=start_at, end_at=end_at)
        if following is None or following >= before:
            break
        count, at = count + 1, following
    return count, first


def skipped(
    schedule: Schedule,
    reason: SkipReason,
    after: datetime,
    before: datetime,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> tuple[Skip, ...]:
    """The occurrences strictly between ``after`` and ``before`` as one skip of ``reason`` (none
    when there are none)."""
    count, first = count_between(schedule, after, before, start_at=start_at, end_at=end_at)
    return () if first is None else (Skip(reason, count, first),)


def skipped_at_completion(
    schedule: Schedule,
    ran: datetime,
    chosen: datetime | None,
    now: datetime,
    *,
    attempt: int,
    started_at: datetime | None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> tuple[Skip, ...]:
    """What an attempt's completion moved past between the occurrence that ran (``ran``) and the
    one it plans (``chosen``; None: the schedule ended, and ``now`` bounds them). Those due
    before a first attempt started were missed (no runner took them: ``missed``); the rest fell
    while the occurrence in hand was running or retrying (``overlap``).

    The common case costs one look-up of the next occurrence, memoized for recurring
    schedules: when it is the one planned, nothing was skipped."""
    following = next_occurrence(schedule, ran, start_at=start_at, end_at=end_at)
    bound = now if chosen is None else chosen
    if following is None or following >= bound:
        return ()
    window = {"start_at": start_at, "end_at": end_at}
    if attempt > 1 or started_at is None or started_at <= following:
        return skipped(schedule, SkipReason.OVERLAP, ran, bound + (_TINY if chosen is None else timedelta()), **window)
    split = min(started_at, bound)
    missed = skipped(schedule, SkipReason.MISSED, ran, split, **window)
    overlap = skipped(schedule, SkipReason.OVERLAP, split - _TINY, bound, **window)
    return missed + overlap
