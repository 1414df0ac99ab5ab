"""The entry point from text: :func:`parse_schedule` recognises the form and hands the
expression to its module.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from scheduler.schedules.base import _EPOCH, MAX_EXPRESSION_LENGTH, UTC, Schedule, ScheduleError
from scheduler.schedules.cron import _MACROS, _parse_classic
from scheduler.schedules.eventbridge import _parse_eventbridge
from scheduler.schedules.fields import _show
from scheduler.schedules.hints import schedule_hint
from scheduler.schedules.intervals import IntervalSchedule, _parse_duration, _parse_rate
from scheduler.schedules.oneoff import _parse_at
from scheduler.schedules.zones import validate_timezone

_FORM_RE = re.compile(r"(?is)(cron|rate|at)\s*\((.*)\)")


def parse_schedule(expression: str, timezone: str = "UTC", anchor: datetime | None = None) -> Schedule:
    """Parse a schedule expression (any form listed in the docstring of ``scheduler.schedules``).

    ``timezone`` is the job's IANA zone (wall-time forms are matched in it). ``anchor`` (aware)
    is what ``rate()``/``@every`` count from: the job's ``start_at``, else its creation time;
    without one the Unix epoch is used. Raises :class:`ScheduleError` with a precise message
    (which field is wrong and why); ``field`` is ``"timezone"`` for a bad zone, ``"start_at"``
    for a naive anchor, ``"schedule"`` otherwise.
    """
    tz = validate_timezone(timezone)
    text = _checked_text(expression)
    start = _anchor_utc(anchor) or _EPOCH
    if text.startswith("@"):
        return _parse_macro(text, tz, start)
    form = _FORM_RE.fullmatch(text)
    if form:
        name, body = form.group(1).lower(), form.group(2)
        if name == "cron":
            return _parse_eventbridge(body, tz, text)
        if name == "rate":
            return IntervalSchedule(text, tz, _parse_rate(body), start)
        return _parse_at(body, tz, text)
    head = re.match(r"(?i)(cron|rate|at)\s*\(", text)
    if head:
        raise ScheduleError(f"{head.group(1).lower()}(...): missing closing ')'")
    if "(" in text or ")" in text:
        raise ScheduleError(
            "unknown schedule form (expected 5-field cron, a macro such as "
            "@daily, @every <duration>, cron(...), rate(...) or at(...))"
        )
    try:
        return _parse_classic(text, tz, text)
    except ScheduleError:
        hint = schedule_hint(text)
        if hint is None:
            raise
        raise ScheduleError(f"{_show(text)} is not a schedule: {hint}") from None


def _checked_text(expression: object) -> str:
    """The expression, stripped: a non-empty string of at most ``MAX_EXPRESSION_LENGTH``."""
    if not isinstance(expression, str):
        raise ScheduleError("schedule must be a string")
    text = expression.strip()
    if not text:
        raise ScheduleError("schedule is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ScheduleError(f"schedule is too long (at most {MAX_EXPRESSION_LENGTH} characters)")
    return text


def anchored(schedule: Schedule, anchor: datetime | None) -> Schedule:
    """``schedule``, parsed without an anchor, counting from ``anchor``: what ``parse_schedule``
    answers for the same expression, zone and anchor, without parsing again. Only an interval
    (``rate()``, ``@every``) counts from an anchor; any other schedule is answered as it is, so
    that jobs on one cron expression share one parsed schedule (and its memoized searches)
    whenever they were created."""
    if not isinstance(schedule, IntervalSchedule):
        return schedule
    return IntervalSchedule(schedule.expression, schedule.tz, schedule.interval, _anchor_utc(anchor) or _EPOCH)


def _anchor_utc(anchor: datetime | None) -> datetime | None:
    """The anchor in UTC (``start_at``'s errors when it has no offset or is out of range)."""
    if anchor is None:
        return None
    if not isinstance(anchor, datetime) or anchor.tzinfo is None or anchor.utcoffset() is None:
        raise ScheduleError("start_at must include a time-zone offset", field="start_at")
    try:
        return anchor.astimezone(UTC)
    except OverflowError:
        raise ScheduleError("start_at is out of range", field="start_at") from None


def _parse_macro(text: str, tz: ZoneInfo, anchor: datetime) -> Schedule:
    """``@every <duration>`` or one of the ``@daily``-style macros."""
    word, *rest_parts = text.split(None, 1)
    word_l, rest = word.lower(), (rest_parts[0].strip() if rest_parts else "")
    if word_l == "@every":
        return IntervalSchedule(text, tz, _parse_duration(rest), anchor)
    if word_l in _MACROS:
        if rest:
            raise ScheduleError(f"{word} takes no arguments")
        return _parse_classic(_MACROS[word_l], tz, text, kind="cron")
    raise ScheduleError(
        f"unknown macro {_show(word)} (supported: @yearly, @annually, "
        "@monthly, @weekly, @daily, @midnight, @hourly, @every <duration>)"
    )
