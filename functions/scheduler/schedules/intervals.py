"""Fixed intervals: ``@every <duration>`` and ``rate(N unit)``, counted from an anchor in absolute
time (no drift, independent of the time zone and of DST).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from scheduler.schedules.base import MAX_INTERVAL, UTC, Schedule, ScheduleError, _require_aware
from scheduler.schedules.fields import _show

_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)([A-Za-zµ]+)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE_UNITS = {
    "second": 1,
    "seconds": 1,
    "minute": 60,
    "minutes": 60,
    "hour": 3600,
    "hours": 3600,
    "day": 86400,
    "days": 86400,
}


@dataclass(frozen=True, eq=False, repr=False)
class IntervalSchedule(Schedule):
    """Fires at ``anchor + k * interval`` for k >= 0 (``rate()`` and ``@every``)."""

    interval: timedelta
    anchor: datetime
    kind: str = field(default="interval", kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "anchor", self.anchor.astimezone(UTC))

    def next_after(self, after: datetime) -> datetime | None:
        after = _require_aware(after, "after")
        if after < self.anchor:
            return self.anchor
        k = (after - self.anchor) // self.interval + 1
        try:
            return self.anchor + k * self.interval
        except OverflowError:
            return None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        at = _require_aware(at, "at")
        if at < self.anchor:
            return None
        k = (at - self.anchor) // self.interval
        return self.anchor + k * self.interval


def _parse_duration(text: str) -> timedelta:
    if not text:
        raise ScheduleError("@every needs a duration, e.g. @every 90s, @every 1h30m")
    pos, total = 0, Decimal(0)
    while pos < len(text):
        m = _DURATION_PART_RE.match(text, pos)
        if m is None:
            if re.fullmatch(r"\d+(?:\.\d+)?", text):
                raise ScheduleError(f"@every: {_show(text)} has no unit (use d, h, m or s, e.g. 90s)")
            raise ScheduleError(f"@every: {_show(text)} is not a duration (expected e.g. 90s, 5m, 1h30m, 1d)")
        unit = _DURATION_UNITS.get(m.group(2).lower())
        if unit is None:
            raise ScheduleError(f"@every: unknown unit {_show(m.group(2))} in {_show(text)} (use d, h, m or s)")
        total += Decimal(m.group(1)) * unit
        pos = m.end()
    if total != total.to_integral_value():
        raise ScheduleError(f"@every: {_show(text)} is not a whole number of seconds")
    if total < 1:
        raise ScheduleError("@every: the interval must be at least 1 second")
    if total > Decimal(int(MAX_INTERVAL.total_seconds())):
        raise ScheduleError("@every: the interval must be at most 36500 days")
    return timedelta(seconds=int(total))


def _parse_rate(body: str) -> timedelta:
    parts = body.split()
    if len(parts) != 2:
        raise ScheduleError("rate() takes a value and a unit, e.g. rate(5 minutes)")
    value_text, unit_text = parts
    if not (value_text.isascii() and value_text.isdigit()):
        raise ScheduleError(f"rate(): the value {_show(value_text)} must be a whole number >= 1")
    value = int(value_text)
    if value < 1:
        raise ScheduleError("rate(): the value must be at least 1")
    unit = _RATE_UNITS.get(unit_text.lower())
    if unit is None:
        raise ScheduleError(f"rate(): unknown unit {_show(unit_text)} (use minute(s), hour(s), day(s) or second(s))")
    if value * unit > MAX_INTERVAL.total_seconds():
        raise ScheduleError("rate(): the interval must be at most 36500 days")
    return timedelta(seconds=value * unit)
