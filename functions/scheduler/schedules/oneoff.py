"""One-offs: ``at(yyyy-mm-ddThh:mm:ss)`` (a wall time in the job's zone) and the API's ``run_at``
(an instant).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar
from zoneinfo import ZoneInfo

from scheduler.schedules.base import UTC, Schedule, ScheduleError, _require_aware
from scheduler.schedules.fields import _show
from scheduler.schedules.zones import _resolve_wall

_AT_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})")


@dataclass(frozen=True, eq=False, repr=False)
class OneOffSchedule(Schedule):
    """Fires once, at ``run_at`` (aware UTC). From ``at(...)`` or the API's ``run_at``."""

    run_at: datetime
    one_off: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_at", self.run_at.astimezone(UTC))

    def next_after(self, after: datetime) -> datetime | None:
        after = _require_aware(after, "after")
        return self.run_at if self.run_at > after else None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        at = _require_aware(at, "at")
        return self.run_at if self.run_at <= at else None


def _parse_at(body: str, tz: ZoneInfo, expression: str) -> OneOffSchedule:
    body = body.strip()
    m = _AT_RE.fullmatch(body)
    if not m:
        raise ScheduleError(
            f"at(): {_show(body)} is not a date-time in the form yyyy-mm-ddThh:mm:ss (e.g. at(2026-12-01T10:00:00))"
        )
    try:
        year, month, day, hour, minute, second = (int(g) for g in m.groups())
        wall = datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise ScheduleError(f"at(): {body} is not a valid date-time ({exc})") from None
    if not 1970 <= wall.year <= 9998:
        raise ScheduleError(f"at(): year {wall.year} is out of range 1970-9998")
    return OneOffSchedule(expression, tz, _resolve_wall(wall, tz), kind="at")


def one_off(run_at: datetime) -> Schedule:
    """A schedule that fires once, at the instant ``run_at`` (aware; the API's ``run_at``).

    Raises :class:`ScheduleError` (``field="run_at"``) when ``run_at`` has no offset.
    """
    if not isinstance(run_at, datetime) or run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ScheduleError("run_at must be an RFC 3339 timestamp with an offset", field="run_at")
    try:
        instant = run_at.astimezone(UTC)
    except OverflowError:
        raise ScheduleError("run_at is out of range", field="run_at") from None
    return OneOffSchedule(instant.isoformat(), ZoneInfo("UTC"), instant, kind="one_off")
