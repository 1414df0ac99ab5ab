"""The occurrences a backfill delivers (``POST /v1/jobs/{id}/backfill``): a past range of a
job's schedule, its window and calendars applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.core.domain import Job
from scheduler.core.errors import ScheduleError
from scheduler.planning.lifecycle import Calendars, schedule_of
from scheduler.schedules import next_occurrence

_TINY = timedelta(microseconds=1)
_FIRST_INSTANT = datetime.min.replace(tzinfo=UTC)


def backfill_occurrences(
    job: Job, start: datetime, end: datetime, limit: int, calendars: Calendars = ()
) -> list[datetime]:
    """The job's occurrences from ``start`` to ``end`` (both included, inside its start_at/end_at
    window, its calendars applied), at most ``limit``: ``ScheduleError`` on ``end`` beyond that,
    and on ``end`` before ``start``."""
    if end < start:
        raise ScheduleError("must not be before start", field="end")
    if start <= _FIRST_INSTANT:  # nothing comes before it (and start - _TINY would overflow)
        raise ScheduleError("must be after 0001-01-01T00:00:00Z", field="start")
    schedule = schedule_of(job, calendars)
    found: list[datetime] = []
    at = next_occurrence(schedule, start - _TINY, start_at=job.start_at, end_at=job.end_at)
    while at is not None and at <= end:
        if len(found) == limit:
            raise ScheduleError(f"the range holds more than {limit:,} occurrences: backfill it in parts", field="end")
        found.append(at)
        at = next_occurrence(schedule, at, start_at=job.start_at, end_at=job.end_at)
    return found
