"""The occurrences a plan moves past without running them (issue 33, item 7): how many, from
which, and why. Pure functions of a schedule and instants; ``lifecycle`` attaches their answer
to its plans (``Plan.skips``), which the store records as one skipped execution per reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from scheduler.core.domain import Skip, SkipReason
from scheduler.core.records import RecordedSkip, SkipTrim
from scheduler.schedules import IntervalSchedule, Schedule, next_occurrence
from scheduler.schedules.calendars import CalendarSchedule, excluded_span, next_excluded

# Occurrences counted one by one at most (a calendar expression's; an interval is counted by
# arithmetic, whatever the gap): a cron job paused for years counts this many, no more.
COUNT_LIMIT = 10_000

_TINY = timedelta(microseconds=1)


#: Excluded spans a count of calendar skips walks at most (past them, the count stops there).
MAX_SPANS_WALKED = 4000


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


def excluded_between(
    schedule: Schedule,
    after: datetime,
    before: datetime,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> tuple[Skip, ...]:
    """The occurrences strictly between ``after`` and ``before`` that the calendars of
    ``schedule`` leave out (``on_excluded: skip``), as one skip of reason ``calendar`` (none when
    there are none, and always none for a schedule without calendars). Under ``shift``, only
    those whose span ends past ``end_at`` (or nowhere within reach): they had no allowed time to
    move to, and do not run; the others run at their span's end.

    The base schedule's occurrences are walked span by span: an excluded span's are counted
    as :func:`count_between` counts them (an interval's by arithmetic, whatever the span), and
    from an allowed one (one missed, or run before) the walk goes on at the next instant a
    calendar excludes (``next_excluded``). When nothing
    was excluded (the common case) it costs one look-up of the base's next occurrence."""
    if not isinstance(schedule, CalendarSchedule):
        return ()
    base, window = schedule.base, {"start_at": start_at, "end_at": end_at}
    exact = isinstance(base, IntervalSchedule)  # counted by arithmetic: no limit
    total, first, at = 0, None, after
    for _ in range(MAX_SPANS_WALKED):
        occurrence = next_occurrence(base, at, **window)
        if occurrence is None or occurrence >= before:
            break
        span = excluded_span(schedule.calendars, occurrence)
        if span is None:  # allowed: on to the next excluded instant (None: none within reach)
            ahead = next_excluded(schedule.calendars, occurrence)
            if ahead is None or ahead >= before:
                break
            at = ahead - _TINY
            continue
        bound = before if span.end is None else min(span.end, before)
        if schedule.shift and span.end is not None and (end_at is None or span.end <= end_at):
            at = bound - _TINY  # moved to the span's end, which the window holds: it runs there
            if bound == before:
                break
            continue
        count, _ = count_between(base, occurrence - _TINY, bound, **window)
        total, first = total + count, first or occurrence
        if bound == before or (total >= COUNT_LIMIT and not exact):
            break
        at = bound - _TINY
    if first is None:
        return ()
    return (Skip(SkipReason.CALENDAR, total if exact else min(total, COUNT_LIMIT), first),)


def trimmed_at_replan(
    schedule: Schedule,
    recorded: Sequence[RecordedSkip],
    now: datetime,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> tuple[SkipTrim, ...]:
    """What is left of a job's calendar-skipped rows recorded in advance when its plan is replaced
    from ``now`` (an edit of its occurrences: the new plan records its own exclusions from
    ``now``), ``schedule`` being the job's as it was, with its calendars as they are. A row whose
    first occurrence is still to come is dropped (``kept`` 0): none of it came to pass. One whose
    first occurrence passed keeps those from it up to ``now``: the schedule's occurrences there
    (a row counts occurrences one after the other, each excluded), or fewer, those its calendars
    exclude there when they still exclude its first (a calendar edited since does not make it
    lose any); never more than it had, never fewer than its first. Rows left whole (those over
    before ``now``) are not answered."""
    base = schedule.base if isinstance(schedule, CalendarSchedule) else schedule
    window = {"start_at": start_at, "end_at": end_at}
    trims = []
    for row in recorded:
        if row.first > now:
            trims.append(SkipTrim(row, 0))
            continue
        # Those at or before now came to pass (the new plan records from after now): counted as
        # the row counted them, the calendars' exclusions, while they still exclude its first (a
        # row's occurrences may lie apart, others between them recorded as missed or overlap);
        # else the base schedule's.
        excluded = excluded_between(schedule, row.first - _TINY, now + _TINY, **window)
        if excluded and excluded[0].first == row.first:
            passed = excluded[0].count
        else:
            passed, _ = count_between(base, row.first - _TINY, now + _TINY, **window)
        kept = min(row.count, max(1, passed))
        if kept != row.count:
            trims.append(SkipTrim(row, kept))
    return tuple(trims)
