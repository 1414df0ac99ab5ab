"""The common ground of the schedule forms: the error, the abstract :class:`Schedule`, the
limits and the check that an instant is aware. Every other module of the package imports it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta
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


def _require_aware(value: datetime, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware")
    return value.astimezone(UTC)


class Schedule(ABC):
    """A parsed schedule. Immutable.

    Attributes: ``expression`` (the source text, stripped), ``timezone`` (IANA name),
    ``tz`` (its ``ZoneInfo``), ``kind`` (``"cron"``, ``"eventbridge_cron"``, ``"interval"``,
    ``"at"`` or ``"one_off"``) and ``one_off`` (True for ``at(...)`` and ``run_at``).
    """

    one_off: bool = False
    kind: str = ""

    def __init__(self, expression: str, tz: ZoneInfo):
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "tz", tz)
        object.__setattr__(self, "timezone", tz.key)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name):
        raise AttributeError(f"{type(self).__name__} is immutable")

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
