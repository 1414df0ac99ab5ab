"""Planning: which occurrence a job runs next, bounded by its ``start_at``/``end_at`` window and
its ``missed_runs`` policy. The functions the job lifecycle calls, and :func:`occurrences`, the
preview of a schedule made of the very same calls.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.schedules.base import _ONE_US, UTC, Schedule, ScheduleError, _require_aware, just_before
from scheduler.schedules.calendars import Calendar, CalendarSchedule, excluded_span, with_calendars
from scheduler.schedules.intervals import IntervalSchedule
from scheduler.schedules.oneoff import OneOffSchedule, one_off
from scheduler.schedules.parse import parse_schedule
from scheduler.schedules.spread import Spread
from scheduler.schedules.union import UnionSchedule, parse_union

#: The ``missed_runs`` policies understood by :func:`plan_next`.
MISSED_RUN_POLICIES = ("skip", "run_once", "run_all")


def next_occurrence(
    schedule: Schedule, after: datetime, *, start_at: datetime | None = None, end_at: datetime | None = None
) -> datetime | None:
    """``schedule.next_after(after)`` bounded by the job's window.

    Never before ``start_at`` (when ``start_at`` is later than ``after`` the answer is the
    first occurrence ``>= start_at``), and ``None`` when the occurrence is after ``end_at``
    (``end_at`` is inclusive).
    """
    after = _require_aware(after, "after")
    if start_at is not None:
        start_at = _require_aware(start_at, "start_at")
        if start_at > after:
            after = start_at - _ONE_US
    # One-offs and intervals answer in O(1), and are built per job (an interval counts from its
    # job's own anchor): memoized, they would only push the cron searches out of the memo.
    if schedule.one_off or isinstance(schedule, IntervalSchedule):
        nxt = schedule.next_after(after)
    else:
        nxt = _next_after(schedule, after)
    if nxt is not None and end_at is not None and nxt > _require_aware(end_at, "end_at"):
        return None
    return nxt


# Schedules are immutable and parsed once per expression (``lifecycle``), and a burst of jobs on
# one schedule completes the same occurrence again and again: the search is made once per
# (schedule, instant). One-offs and intervals are not memoized (built per job, and O(1)).
@functools.lru_cache(maxsize=4096)
def _next_after(schedule: Schedule, after: datetime) -> datetime | None:
    return schedule.next_after(after)


def first_run(
    schedule: Schedule, now: datetime, *, start_at: datetime | None = None, end_at: datetime | None = None
) -> datetime | None:
    """The first occurrence of a new, resumed or edited job.

    The first occurrence strictly after ``now`` (and ``>= start_at``, ``<= end_at``). Exception:
    a one-off (``run_at``/``at()``) whose time is already past -- or exactly ``now`` -- answers
    its own time, meaning "fire at once" (it is still ``None`` if that time is outside
    ``start_at``..``end_at``, or left out by its calendars; shifted by them, the end of the span
    that holds it).
    """
    now = _require_aware(now, "now")
    base = schedule.base if isinstance(schedule, CalendarSchedule) else schedule
    if isinstance(base, OneOffSchedule) and base.run_at <= now:
        run_at = base.run_at
        if start_at is not None and run_at < _require_aware(start_at, "start_at"):
            return None
        if end_at is not None and run_at > _require_aware(end_at, "end_at"):
            return None
        if isinstance(schedule, CalendarSchedule):  # its calendars decide, as for a time to come
            span = excluded_span(schedule.calendars, run_at)
            if span is not None:
                return span.end if schedule.shift else None
        return run_at
    return next_occurrence(schedule, now, start_at=start_at, end_at=end_at)


def plan_next(
    schedule: Schedule,
    previous: datetime,
    now: datetime,
    policy: str,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    cap: int = 10,
) -> datetime | None:
    """The occurrence to run after occurrence ``previous`` finished.

    ``now`` is the database's clock; ``policy`` is the job's ``missed_runs``:

    * first ``nxt = next_occurrence(after=previous)``; if it is ``None`` or ``>= now`` nothing
      was missed and it is the answer;
    * ``"skip"``: the first occurrence ``>= now`` (the missed ones are dropped);
    * ``"run_once"``: the latest missed occurrence (``<= now``): one catch-up run at once, then
      the schedule resumes normally;
    * ``"run_all"``: ``nxt`` (the missed ones run one after the other), unless more than
      ``cap`` occurrences were missed, in which case the first of the last ``cap`` missed ones.

    ``start_at``/``end_at`` bound every answer as in :func:`next_occurrence`. The cost is
    bounded whatever the gap: it walks back from ``now`` at most ``cap`` occurrences.
    """
    if policy not in MISSED_RUN_POLICIES:
        raise ValueError(f"unknown missed_runs policy {policy!r} (expected one of {', '.join(MISSED_RUN_POLICIES)})")
    if cap < 1:
        raise ValueError("cap must be at least 1")
    now = _require_aware(now, "now")
    nxt = next_occurrence(schedule, previous, start_at=start_at, end_at=end_at)
    if nxt is None or nxt >= now:
        return nxt
    if policy == "skip":
        return next_occurrence(schedule, now - _ONE_US, start_at=start_at, end_at=end_at)
    horizon = now
    if end_at is not None:
        horizon = min(horizon, _require_aware(end_at, "end_at"))
    last = schedule.last_at_or_before(horizon)
    if last is None or last <= nxt:
        return nxt
    if policy == "run_once":
        return last
    # run_all: walk back from the latest missed one; stop on reaching nxt (few missed).
    candidate = last
    for _ in range(cap - 1):
        earlier = schedule.last_at_or_before(candidate - _ONE_US)
        if earlier is None or earlier <= nxt:
            return nxt
        candidate = earlier
    return candidate


def interval_anchor(start_at: datetime | None, created_at: datetime) -> datetime:
    """What a job's ``rate()``/``@every`` counts from: ``start_at``, else its creation time.

    Occurrences land on whole seconds, so the anchor is a whole second: ``start_at`` rounded
    *up* (the first occurrence is the first whole second ``>= start_at``, not one interval
    later), the creation time rounded down (the first occurrence is one interval after it).
    """
    if start_at is None:
        return created_at.replace(microsecond=0)
    anchor = start_at.replace(microsecond=0)
    if start_at.microsecond:
        try:
            anchor += timedelta(seconds=1)
        except OverflowError:  # within the last second datetime can hold: nothing fires there
            pass
    return anchor


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One time of a preview, explained: ``at`` (when it fires: the occurrence plus its spread),
    ``occurrence`` (the schedule's time, the run's ``scheduled_at``), ``expression`` (the
    expression that produced it) and ``spread_seconds`` (the offset applied)."""

    at: datetime
    occurrence: datetime
    expression: str
    spread_seconds: int


When = str | datetime | Sequence[str]


def schedule_for(when: When, timezone: str, anchor: datetime) -> Schedule:
    """The schedule of a job's ``schedule`` (an expression), ``schedules`` (a list of them: their
    union) or ``run_at`` (an aware instant); ``anchor`` as for :func:`parse_schedule`."""
    if isinstance(when, datetime):
        return one_off(when)
    if isinstance(when, str):
        return parse_schedule(when, timezone, anchor)
    return parse_union(when, timezone, anchor)


# The last instant a datetime holds: a spread's fire time past it is held there (near the year
# 9999, where an offset would overflow).
_LAST_INSTANT = datetime.max.replace(tzinfo=UTC)


def fire_time(occurrence: datetime, spread: Spread | None) -> datetime:
    """When ``occurrence`` fires: itself, or later by its spread's offset (at most the last
    instant of the year 9999)."""
    if spread is None:
        return occurrence
    offset = spread.offset(occurrence)
    return occurrence + offset if occurrence <= _LAST_INSTANT - offset else _LAST_INSTANT


def occurrences(
    when: When,
    *,
    timezone: str = "UTC",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    after: datetime,
    count: int = 10,
    spread: Spread | None = None,
    calendars: Sequence[Calendar] = (),
    on_excluded: str = "skip",
) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after`` of a job with these fields.

    ``when`` is a schedule expression (any form of :func:`parse_schedule`), a list of them (the
    job's ``schedules``: their union) or a one-off's ``run_at`` (an aware datetime). The answer
    (aware UTC datetimes, in the order of their occurrences) is what the job would run if created
    at ``after`` and never late: its first occurrence is :func:`first_run`'s and each next one
    :func:`plan_next`'s, so the DST rule, the ``start_at``/``end_at`` window and the
    ``rate()``/``@every`` anchor (:func:`interval_anchor`, with ``after`` as the creation time)
    are the job's; each fires at the occurrence plus its ``spread`` offset. Fewer than ``count``
    when the schedule ends; empty for a one-off at or before ``after`` (a job would fire it at
    once).

    Raises :class:`ScheduleError` naming the field at fault (``schedule``, ``schedules.<i>``,
    ``timezone``, ``run_at``, ``start_at``, ``end_at``, ``after`` or ``count``). ``calendars``
    apply to the occurrences (before the spread) as a job's ``exclude_calendars`` do, as
    ``on_excluded`` says.
    """
    found = explain_occurrences(
        when,
        timezone=timezone,
        start_at=start_at,
        end_at=end_at,
        after=after,
        count=count,
        spread=spread,
        calendars=calendars,
        on_excluded=on_excluded,
    )
    return [item.at for item in found]


def explain_occurrences(
    when: When,
    *,
    timezone: str = "UTC",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    after: datetime,
    count: int = 10,
    spread: Spread | None = None,
    calendars: Sequence[Calendar] = (),
    on_excluded: str = "skip",
    anchor: datetime | None = None,
) -> list[Occurrence]:
    """:func:`occurrences`, each explained (:class:`Occurrence`): which expression produced it
    and the spread offset applied. ``anchor``: what ``rate()`` and ``@every`` count from
    (default :func:`interval_anchor` of ``start_at``, else ``after``: a job's own is its
    ``start_at``, else its creation)."""
    after = _instant(after, "after")
    start_at = None if start_at is None else _instant(start_at, "start_at")
    end_at = None if end_at is None else _instant(end_at, "end_at")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ScheduleError("count must be a whole number >= 1", field="count")
    base = schedule_for(when, timezone, anchor or interval_anchor(start_at, after))
    since = after if start_at is None else max(after, just_before(start_at))
    schedule = with_calendars(base, calendars, on_excluded, since=since)  # its own occurrences: after "after"
    found: list[Occurrence] = []
    occurrence = first_run(schedule, after, start_at=start_at, end_at=end_at)
    fired: datetime | None = None
    while occurrence is not None:
        at = fire_time(occurrence, spread)
        # One at a time, in the order of their occurrences: a spread wider than the interval
        # moves an occurrence no earlier than the one before it fires (the runner's catch-up).
        at = at if fired is None else max(at, fired)
        fired = at
        if at > after:  # first_run answers a one-off already past: "at once", not later
            source = base.source_of(occurrence) if isinstance(base, UnionSchedule) else base.expression
            found.append(Occurrence(at, occurrence, source, int((at - occurrence).total_seconds())))
            if len(found) == count:
                break
        # "now" at the occurrence just run: nothing is missed, plan_next answers the next one.
        occurrence = plan_next(schedule, occurrence, occurrence, "skip", start_at=start_at, end_at=end_at)
    return found


def _instant(value: datetime, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleError(f"{field} must be an RFC 3339 timestamp with an offset", field=field)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ScheduleError(f"{field} is out of range", field=field) from None
