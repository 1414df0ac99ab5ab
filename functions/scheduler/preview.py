"""The occurrences a schedule would fire at, computed by the planning code that plans jobs.

``occurrences`` builds the job a schedule describes and walks it with the functions the job's
lifecycle uses (``lifecycle.schedule_of``, ``first_run``, ``plan_next``), so a preview follows
the same DST rule, ``start_at``/``end_at`` window and ``rate()`` anchor as the job would.
"""

from __future__ import annotations

from datetime import datetime

from scheduler import lifecycle
from scheduler.schedules import first_run, plan_next


def occurrences(schedule_or_run_at: str | datetime, *, timezone: str = "UTC", start_at: datetime | None = None,
                end_at: datetime | None = None, after: datetime, count: int = 10) -> list[datetime]:
    """The first ``count`` occurrences strictly after ``after`` (aware UTC datetimes); fewer when
    the schedule ends. ``rate()``/``@every`` count from ``start_at``, else from ``after`` (a job
    created at that instant). The schedule must be valid (``JobSpec`` checks it)."""
    job = {"schedule": None, "run_at": None, "timezone": timezone, "start_at": start_at, "created_at": after}
    job["run_at" if isinstance(schedule_or_run_at, datetime) else "schedule"] = schedule_or_run_at
    schedule = lifecycle.schedule_of(job)
    found: list[datetime] = []
    occurrence = first_run(schedule, after, start_at=start_at, end_at=end_at)
    while occurrence is not None and len(found) < count:
        if occurrence > after:  # a one-off already past is "at once" to first_run: not a future occurrence
            found.append(occurrence)
        # With "now" at the previous occurrence nothing is missed: plan_next answers the next one.
        occurrence = plan_next(schedule, occurrence, occurrence, "skip", start_at=start_at, end_at=end_at)
    return found
