"""Differential property test: our 5-field cron against cronsim, an independent implementation.

cronsim (a dev dependency) and ``scheduler.schedules`` are compared on random 5-field
expressions (lists, ranges, steps, names, the Vixie rule for the day fields) only where both
follow the same rule, which cronsim's source decides:

* In a zone without DST (``UTC``, ``Asia/Kolkata``, ``Asia/Tokyo``) every local wall time
  exists exactly once, so any expression has one meaning: both must agree on all of them.
* In a zone with DST, cronsim has two modes. When neither the minute nor the hour field starts
  with ``*`` (``30 2 * * *``, ``0,30 1-3 * * *``) it walks naive wall time, fires a repeated wall
  time at its first occurrence (``fold=0``) and moves a skipped one forward to the first minute
  that exists, i.e. the instant the clocks jump: exactly our DST rule, so those expressions are
  compared in ``Europe/Berlin``, ``America/New_York`` and ``Australia/Lord_Howe`` (a 30-minute
  shift), with start instants biased towards the transitions. When the minute or the hour
  field starts with ``*`` (``*/15 * * * *``, ``0 * * * *``) cronsim walks real instants
  instead: it fires a repeated wall time twice and never fires a skipped one, which our rule
  deliberately does not do, so those expressions are compared in the zones without DST only.
* cronsim starts from the *wall time* of the start instant. During the second pass of a
  repeated hour (``fold=1``) that wall time lies before instants already past, so it would
  answer occurrences earlier than the start; such start instants are left out.

Both sides list the occurrences after the start up to a horizon of a few years. Two parsing
quirks of cronsim are kept out: it refuses a day that no chosen month has (``0 0 30 2 *``), where
ours answers nothing, and it reads a one-value range with a step (``5-5/10``) as ``5/10``
(5, 15, 25, ...), where ours, like Vixie cron, reads the range: only 5.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from scheduler.schedules import parse_schedule
from tests.unit.test_schedules_properties import DAYS, HI, LO, MONTHS, cron_expressions, transitions

cronsim = pytest.importorskip("cronsim")

UTC = UTC
FIXED_ZONES = ["UTC", "Asia/Kolkata", "Asia/Tokyo"]
DST_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]
COUNT = 8
HORIZON = timedelta(days=4 * 366)
NAMES = {**{day: i for i, day in enumerate(DAYS)}, **{month: i + 1 for i, month in enumerate(MONTHS)}}


def cronsim_walks_wall_time(expression: str) -> bool:
    """cronsim's own test for its Debian-cron mode (fixed minute and hour fields)."""
    minute, hour = expression.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def one_value_range_with_step(expression: str) -> bool:
    """``a-a/step`` somewhere in the expression (see the module docstring); names count as their
    numbers (``6-SAT/1``)."""

    def number(token: str) -> str:
        return str(NAMES.get(token, token))

    return any(number(m.group(1)) == number(m.group(2)) for m in re.finditer(r"(\w+)-(\w+)/", expression.upper()))


@st.composite
def start_in(draw, zone: str) -> datetime:
    """An instant in 2020-2035, half of the time within hours of one of ``zone``'s transitions."""
    near = transitions(zone)
    if near and draw(st.booleans()):
        base = draw(st.sampled_from(near))
        offset = draw(st.integers(-3 * 3600, 3 * 3600))
        micro = draw(st.sampled_from([0, 0, 1, 999_999]))
        return base + timedelta(seconds=offset, microseconds=micro)
    return datetime.fromtimestamp(draw(st.integers(int(LO.timestamp()), int(HI.timestamp()))), UTC)


def ours(expression: str, zone: str, start: datetime, until: datetime) -> list[datetime]:
    schedule = parse_schedule(expression, zone)
    out: list[datetime] = []
    after = start
    while len(out) < COUNT:
        after = schedule.next_after(after)
        if after is None or after > until:
            break
        out.append(after)
    return out


def theirs(expression: str, zone: str, start: datetime, until: datetime) -> list[datetime]:
    try:
        iterator = cronsim.CronSim(expression, start.astimezone(ZoneInfo(zone)))
    except cronsim.CronSimError:
        reject()  # a day no chosen month has: cronsim refuses it, ours never fires (tested elsewhere)
    out: list[datetime] = []
    for local in iterator:  # cronsim stops by itself after 50 years without a match
        instant = local.astimezone(UTC)
        if instant > until:
            break
        out.append(instant)
        if len(out) == COUNT:
            break
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=cron_expressions(), data=st.data())
def test_next_occurrences_match_cronsim(expr, data):
    text, _ = expr
    if one_value_range_with_step(text):
        reject()
    # wall-time expressions mostly go to the zones with DST, where the rule has work to do
    zones = DST_ZONES * 2 + ["Asia/Kolkata"] if cronsim_walks_wall_time(text) else FIXED_ZONES
    zone = data.draw(st.sampled_from(zones), label="zone")
    start = data.draw(start_in(zone), label="start")
    if start.astimezone(ZoneInfo(zone)).fold:
        reject()  # the second pass of a repeated hour: see the module docstring
    until = start + HORIZON
    assert ours(text, zone, start, until) == theirs(text, zone, start, until), (text, zone, start)


@pytest.mark.parametrize(
    ("expression", "zone", "start", "expected"),
    [
        # spring forward in Berlin: 02:30 does not exist, both fire at the jump (03:00 CEST = 01:00Z)
        ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00", ["2026-03-29T01:00", "2026-03-30T00:30"]),
        # fall back in New York: 01:30 happens twice, both fire at the first (EDT, 05:30Z) only
        ("30 1 * * *", "America/New_York", "2026-10-31T12:00", ["2026-11-01T05:30", "2026-11-02T06:30"]),
    ],
)
def test_the_two_agree_on_a_dst_night(expression, zone, start, expected):
    begin = datetime.fromisoformat(start).replace(tzinfo=UTC)
    want = [datetime.fromisoformat(e).replace(tzinfo=UTC) for e in expected]
    until = begin + timedelta(days=3)
    assert ours(expression, zone, begin, until)[:2] == want
    assert theirs(expression, zone, begin, until)[:2] == want


@st.composite
def wall_time_expressions(draw) -> str:
    """Expressions in cronsim's wall-time mode whose hours are those DST transitions touch."""
    text, _ = draw(cron_expressions())
    minutes = draw(st.lists(st.integers(0, 59), min_size=1, max_size=4, unique=True))
    hours = draw(st.sampled_from(["1", "2", "3", "1,2", "2-3", "0-3", "0-4/2", "2,14"]))
    return " ".join([",".join(map(str, minutes)), hours, *text.split()[2:]])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=wall_time_expressions(), zone=st.sampled_from(DST_ZONES), data=st.data())
def test_dst_nights_match_cronsim(text, zone, data):
    """Start within hours before a transition, so that a skipped or repeated wall time lies ahead."""
    if one_value_range_with_step(text):
        reject()
    base = data.draw(st.sampled_from(transitions(zone)), label="transition")
    start = base + timedelta(seconds=data.draw(st.integers(-6 * 3600, 3600), label="offset"))
    if start.astimezone(ZoneInfo(zone)).fold:
        reject()
    until = start + HORIZON
    assert ours(text, zone, start, until) == theirs(text, zone, start, until), (text, zone, start)
