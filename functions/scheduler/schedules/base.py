"""The common ground of the schedule forms: the error, the abstract :class:`Schedule`, the
limits and the check that an instant is aware. Every other module of the package imports it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

from scheduler.core.errors import ScheduleError  # noqa: F401 (re-exported)

UTC = UTC

#: Search horizon, in years, for wall-time expressions without a year field. 50 years covers
#: every expression that fires at all in practice (``0 0 29 2 *`` may wait 8 years across 2100,
#: "the 5th Monday of February" up to 40).
HORIZON_YEARS = 50

MAX_EXPRESSION_LENGTH = 256
MAX_INTERVAL = timedelta(days=36500)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def just_before(at: datetime) -> datetime:
    """The instant just before ``at`` (a microsecond), or ``at`` itself at the first instant a
    datetime can hold (year 1: a start_at there has nothing before it)."""
    return at - _ONE_US if at > _EARLIEST else at


def _require_aware(value: datetime, what: str) -> datetime:
    if value.__class__ is datetime and value.tzinfo is UTC:  # nearly always: the store's instants
        return value
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware")
    return value.astimezone(UTC)


@dataclass(frozen=True, eq=False)
class Schedule(ABC):
    """A parsed schedule: a frozen dataclass (equal and hashed by identity: a job's schedule is
    parsed once per expression and memoized, and its searches are memoized per schedule).

    ``expression`` (the source text, stripped), ``tz`` (the job's ``ZoneInfo``) and ``timezone``
    (its IANA name), ``kind`` (``"cron"``, ``"eventbridge_cron"``, ``"interval"``, ``"at"`` or
    ``"one_off"``) and ``one_off`` (True for ``at(...)`` and ``run_at``).
    """

    expression: str
    tz: ZoneInfo
    kind: str = field(default="", kw_only=True)
    one_off: ClassVar[bool] = False

    @property
    def timezone(self) -> str:
        """The IANA name of the schedule's time zone."""
        return self.tz.key

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.expression!r} tz={self.timezone}>"

    @abstractmethod
    def next_after(self, after: datetime) -> datetime | None:
        """First fire instant strictly after ``after`` (an aware datetime), as an aware UTC
        datetime; ``None`` when there is none (a one-off already past, or nothing within the
        search horizon)."""

    @abstractmethod
    def last_at_or_before(self, at: datetime) -> datetime | None:
        """Latest fire instant ``<= at`` (aware), as an aware UTC datetime; ``None`` when there
        is none (within the search horizon)."""
