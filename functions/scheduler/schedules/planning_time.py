"""The time limit of calendar planning: a job's calendars can make the search for its next run
long (many excluded spans in a row). An API request must answer before API Gateway gives up on
it; the runner, which plans a batch of completions one after the other, pauses a job that takes
too long (``planning.lifecycle.RUNNER_PLANNING_SECONDS``) rather than hold up the others."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from scheduler.schedules.base import ScheduleError

# The time limit of the calendar planning in the current context (an API request's), as a
# time.monotonic() deadline; None: none.
_PLANNING_DEADLINE: ContextVar[float | None] = ContextVar("calendar_planning_deadline", default=None)


@contextmanager
def planning_time_limit(seconds: float) -> Iterator[None]:
    """Within the block, a calendar search that runs past ``seconds`` raises ``ScheduleError``
    (field ``exclude_calendars``): an API request answers 400 in time, not a gateway's 504."""
    token = _PLANNING_DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _PLANNING_DEADLINE.reset(token)


def check_planning_time() -> None:
    """``ScheduleError`` when the context's time limit (``planning_time_limit``) has passed."""
    deadline = _PLANNING_DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline:
        raise ScheduleError(
            "the calendars take too long to plan against this schedule (their excluded spans, one after "
            "the other, are too many); use fewer or simpler calendars",
            field="exclude_calendars",
        )
