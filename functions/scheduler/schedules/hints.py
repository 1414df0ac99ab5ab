"""What a refused schedule or time zone probably meant: ``every 5 minutes`` is ``rate(5 minutes)``
or ``@every 5m``, ``daily`` is ``@daily``, ``Europe/Berln`` is ``Europe/Berlin``. Used to word
the API's 400 answers (and so the CLI's and the console's errors)."""

from __future__ import annotations

import functools
import re
import zoneinfo

_UNITS = {"s": "second", "sec": "second", "m": "minute", "min": "minute", "h": "hour", "hr": "hour", "d": "day"}
# Compiled on first use (an error's path): not with the schedules, which every runner loads.
_EVERY = (
    r"(?i)^\s*(?:every|each)\s+(?:(\d+)\s*)?(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|w)\s*\Z"
)
_BARE = r"(?i)^\s*(\d+)\s*(s|m|h|d)\s*\Z"
_WORDS = {
    "hourly": "@hourly",
    "daily": "@daily",
    "nightly": "@daily",
    "midnight": "@midnight",
    "weekly": "@weekly",
    "monthly": "@monthly",
    "yearly": "@yearly",
    "annually": "@yearly",
}


def _interval(count: int, unit: str) -> str:
    unit = unit.lower().rstrip("s") or "s"
    name = _UNITS.get(unit, unit)
    if name in ("week", "w"):
        count, name = count * 7, "day"
    short = {"second": "s", "minute": "m", "hour": "h", "day": "d"}[name]
    return f"rate({count} {name}{'' if count == 1 else 's'}) or @every {count}{short}"


def schedule_hint(text: str) -> str | None:
    """What to write instead of ``text``, when it reads as an interval or a period in words."""
    word = _WORDS.get(text.strip().lower())
    if word:
        return f"write {word}"
    every = re.match(_EVERY, text)
    if every:
        return f"write {_interval(int(every.group(1) or 1), every.group(2))}"
    bare = re.match(_BARE, text)
    if bare:
        return f"write {_interval(int(bare.group(1)), bare.group(2))}"
    return None


@functools.lru_cache(maxsize=1)
def _zones() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def closest_zones(name: str, count: int = 3) -> list[str]:
    """The zone names nearest to ``name`` (case aside), best first: ``Europe/Berln`` -> ``Europe/Berlin``."""
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        return []
    zones = _zones()
    by_lower = {zone.lower(): zone for zone in zones}
    wanted = name.strip().lower().replace(" ", "_")
    if wanted in by_lower:
        return [by_lower[wanted]]
    import difflib  # on an error's path only: not loaded with the schedules

    found = difflib.get_close_matches(wanted, list(by_lower), n=count, cutoff=0.6)
    if not found:  # a city alone: "Berlin", "new york"
        found = [z for z in by_lower if z.rsplit("/", 1)[-1] == wanted][:count]
    return [by_lower[z] for z in found]
