"""The time limit of calendar planning within an API request: a job's calendars can make the
search for its next run long (many excluded spans in a row), and a request must answer before
API Gateway gives up on it. The runner plans without a limit what the API accepted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from scheduler.schedules.base import ScheduleError

# The time limit of the calendar planning in the current context (an API request's), as a
# time.monotonic() deadline; None: none (the runner, which plans what the API accepted).
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
