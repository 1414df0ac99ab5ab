"""Planning: which occurrence a job runs next, bounded by its ``start_at``/``end_at`` window and
its ``missed_runs`` policy. The functions the job lifecycle calls.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.schedules.base import _ONE_US, Schedule, _require_aware
from scheduler.schedules.oneoff import OneOffSchedule

#: The ``missed_runs`` policies understood by :func:`plan_next`.
MISSED_RUN_POLICIES = ("skip", "run_once", "run_all")


def next_occurrence(schedule: Schedule, after: datetime, *, start_at: datetime | None = None,
                    end_at: datetime | None = None) -> datetime | None:
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
    nxt = schedule.next_after(after)
    if nxt is not None and end_at is not None and nxt > _require_aware(end_at, "end_at"):
        return None
    return nxt


def first_run(schedule: Schedule, now: datetime, *, start_at: datetime | None = None,
              end_at: datetime | None = None) -> datetime | None:
    """The first occurrence of a new, resumed or edited job.

    The first occurrence strictly after ``now`` (and ``>= start_at``, ``<= end_at``). Exception:
    a one-off (``run_at``/``at()``) whose time is already past -- or exactly ``now`` -- answers
    its own time, meaning "fire at once" (it is still ``None`` if that time is outside
    ``start_at``..``end_at``).
    """
    now = _require_aware(now, "now")
    if isinstance(schedule, OneOffSchedule) and schedule.run_at <= now:
        run_at = schedule.run_at
        if start_at is not None and run_at < _require_aware(start_at, "start_at"):
            return None
        if end_at is not None and run_at > _require_aware(end_at, "end_at"):
            return None
        return run_at
    return next_occurrence(schedule, now, start_at=start_at, end_at=end_at)


def plan_next(schedule: Schedule, previous: datetime, now: datetime, policy: str, *,
              start_at: datetime | None = None, end_at: datetime | None = None,
              cap: int = 10) -> datetime | None:
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
        raise ValueError(f"unknown missed_runs policy {policy!r} (expected one of "
                         f"{', '.join(MISSED_RUN_POLICIES)})")
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
