"""Time zones and the DST rule: which zone names a job may use, and at which instant a local
wall time fires (the first occurrence when repeated, the jump when skipped).
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from scheduler.schedules.base import UTC, ScheduleError
from scheduler.schedules.hints import closest_zones

# Files of the zone database that are not zones a job should name: the host's own setting,
# and the "posix/" and "right/" (leap-second) copies.
_HOST_SPECIFIC_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def validate_timezone(name: str) -> ZoneInfo:
    """Return the ``ZoneInfo`` for an IANA name such as ``"Europe/Berlin"``.

    Raises :class:`ScheduleError` (``field="timezone"``) for anything that is not a known zone
    name: unknown names, empty strings, paths, non-strings, and host-specific entries of the
    zone database (``localtime``, ``posixrules``, ``Factory``, ``posix/...``, ``right/...``).
    Names are case-sensitive and must not carry surrounding whitespace.
    """
    if not isinstance(name, str):
        raise ScheduleError("timezone must be a string (an IANA name such as Europe/Berlin)", field="timezone")
    if not name.strip():
        raise ScheduleError("timezone must not be empty (an IANA name such as Europe/Berlin)", field="timezone")
    shown = name if len(name) <= 64 else name[:61] + "..."
    if (
        name != name.strip()
        or len(name) > 255
        or "\x00" in name
        or "\\" in name
        or name.startswith("/")
        or ".." in name.split("/")
        or name in _HOST_SPECIFIC_ZONES
        or name.startswith(("posix/", "right/"))
    ):
        raise ScheduleError(
            f"unknown time zone {shown!r} (expected an IANA name such as Europe/Berlin)", field="timezone"
        )
    try:
        return ZoneInfo(name)
    except Exception:  # ZoneInfoNotFoundError, ValueError, OSError, UnicodeError, ...
        close = closest_zones(name)
        expected = f"did you mean {', '.join(close)}?" if close else "expected an IANA name such as Europe/Berlin"
        raise ScheduleError(f"unknown time zone {shown!r} ({expected})", field="timezone") from None


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    """Local wall time (naive) of an aware instant."""
    return instant.astimezone(tz).replace(tzinfo=None)


def _resolve_wall(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant (aware UTC) at which wall time ``wall`` fires under the DST rule.

    Existing wall times: the instant itself, the first one (``fold=0``) when repeated.
    Wall times in a gap: the instant the clocks jump, i.e. the earliest instant whose wall time
    is ``>= wall``.
    """
    first = wall.replace(tzinfo=tz).astimezone(UTC)  # fold=0: first occurrence when repeated
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    # In a gap. fold=1 uses the offset after the transition (an instant before the jump whose
    # wall time is < wall); fold=0 the offset before it (an instant after the jump).
    lo = int(wall.replace(tzinfo=tz, fold=1).astimezone(UTC).timestamp())
    hi = int(first.timestamp()) + 1
    if lo > hi:
        lo, hi = hi, lo
    while lo < hi:  # smallest whole second whose wall time is >= wall (transitions are whole)
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) >= wall:
            hi = mid
        else:
            lo = mid + 1
    return datetime.fromtimestamp(lo, UTC)
