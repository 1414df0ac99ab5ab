"""Unit tests of ``scheduler.schedules``: every form, the DST rule, errors, and planning.

Expected instants are worked out by hand from the zone rules (2026):
  Europe/Berlin     CET +1 / CEST +2; spring forward 03-29 01:00Z (02:00->03:00),
                    fall back 10-25 01:00Z (03:00->02:00).
  America/New_York  EST -5 / EDT -4; spring forward 03-08 07:00Z (02:00->03:00),
                    fall back 11-01 06:00Z (02:00->01:00).
  Australia/Lord_Howe  +10:30 / +11; fall back 04-05 02:00 local = 04-04 15:00Z (->01:30),
                    spring forward 10-04 02:00 local = 10-03 15:30Z (->02:30).
  Asia/Kolkata      +5:30, no DST.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from scheduler.schedules import (
    IntervalSchedule,
    OneOffSchedule,
    Schedule,
    ScheduleError,
    first_run,
    next_occurrence,
    one_off,
    parse_schedule,
    plan_next,
    validate_timezone,
)

UTC = UTC


def Z(text: str) -> datetime:
    """``"2026-03-29T01:00"`` -> aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def upcoming(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    out = []
    for _ in range(n):
        after = schedule.next_after(after)
        if after is None:
            break
        out.append(after)
    return out


def zs(*texts: str) -> list[datetime]:
    return [Z(t) for t in texts]


# ---------------------------------------------------------------------------------------------
# DST
# ---------------------------------------------------------------------------------------------

DST_CASES = [
    # --- Europe/Berlin, spring forward: 02:00-02:59 do not exist on 2026-03-29 ---
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00", ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"]),
    # several matches in one gap: one run, at the jump
    ("*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00", ["2026-03-29T01:00", "2026-03-30T00:00", "2026-03-30T00:15"]),
    ("* 2 * * *", "Europe/Berlin", "2026-03-29T00:00", ["2026-03-29T01:00", "2026-03-30T00:00"]),
    # 02:00 (gap) and 03:00 (first wall time after the jump) are the same instant: once
    ("0 2,3 * * *", "Europe/Berlin", "2026-03-29T00:00", ["2026-03-29T01:00", "2026-03-30T00:00", "2026-03-30T01:00"]),
    # hourly across the gap: each UTC hour once, none skipped, none doubled
    ("0 * * * *", "Europe/Berlin", "2026-03-28T23:30", ["2026-03-29T00:00", "2026-03-29T01:00", "2026-03-29T02:00"]),
    # --- Europe/Berlin, fall back: 02:00-02:59 happen twice on 2026-10-25 ---
    ("30 2 * * *", "Europe/Berlin", "2026-10-24T00:00", ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"]),
    (
        "*/15 2 * * *",
        "Europe/Berlin",
        "2026-10-24T23:50",
        ["2026-10-25T00:00", "2026-10-25T00:15", "2026-10-25T00:30", "2026-10-25T00:45", "2026-10-26T01:00"],
    ),
    # hourly: 02:00 CEST fires (00:00Z), 02:00 CET (01:00Z) is the repeat and does not
    (
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-24T22:30",
        ["2026-10-24T23:00", "2026-10-25T00:00", "2026-10-25T02:00", "2026-10-25T03:00"],
    ),
    # --- America/New_York ---
    (
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T00:00",
        ["2026-03-07T07:30", "2026-03-08T07:00", "2026-03-09T06:30"],
    ),
    ("0 2 * * *", "America/New_York", "2026-03-08T00:00", ["2026-03-08T07:00", "2026-03-09T06:00"]),
    (
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T00:00",
        ["2026-10-31T05:30", "2026-11-01T05:30", "2026-11-02T06:30"],
    ),
    # hourly across fall back: 01:00 EDT (05Z) fires, 01:00 EST (06Z) is the repeat, then 02:00
    # EST (07Z): the rule leaves the UTC hour 06:00 without a run.
    (
        "0 * * * *",
        "America/New_York",
        "2026-11-01T03:30",
        ["2026-11-01T04:00", "2026-11-01T05:00", "2026-11-01T07:00", "2026-11-01T08:00"],
    ),
    (
        "*/30 * * * *",
        "America/New_York",
        "2026-11-01T04:45",
        ["2026-11-01T05:00", "2026-11-01T05:30", "2026-11-01T07:00"],
    ),
    # after = inside the repeated hour (06:10Z = 01:10 EST): the repeats never fire
    ("*/15 * * * *", "America/New_York", "2026-11-01T06:10", ["2026-11-01T07:00"]),
    # --- Australia/Lord_Howe: 30-minute shifts ---
    # fall back 2026-04-05 02:00 -> 01:30: 01:30-01:59 repeat; first occurrence is at +11
    (
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-03T12:00",
        ["2026-04-03T14:45", "2026-04-04T14:45", "2026-04-05T15:15"],
    ),
    (
        "*/15 * * * *",
        "Australia/Lord_Howe",
        "2026-04-04T14:10",
        ["2026-04-04T14:15", "2026-04-04T14:30", "2026-04-04T14:45", "2026-04-04T15:30", "2026-04-04T15:45"],
    ),
    ("0 2 * * *", "Australia/Lord_Howe", "2026-04-04T12:00", ["2026-04-04T15:30"]),
    # spring forward 2026-10-04 02:00 -> 02:30: 02:00-02:29 do not exist
    (
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-02T12:00",
        ["2026-10-02T15:45", "2026-10-03T15:30", "2026-10-04T15:15"],
    ),
    (
        "*/15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T15:00",
        ["2026-10-03T15:30", "2026-10-03T15:45", "2026-10-04T15:00"],
    ),
    # --- Asia/Kolkata: +05:30 all year ---
    ("30 2 * * *", "Asia/Kolkata", "2026-03-28T00:00", ["2026-03-28T21:00", "2026-03-29T21:00"]),
    ("0 0 * * *", "Asia/Kolkata", "2026-10-24T00:00", ["2026-10-24T18:30", "2026-10-25T18:30"]),
    # --- the same rule for cron() ---
    (
        "cron(30 2 * * ? *)",
        "Europe/Berlin",
        "2026-03-28T00:00",
        ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"],
    ),
    (
        "cron(30 2 * * ? *)",
        "Europe/Berlin",
        "2026-10-24T00:00",
        ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"],
    ),
]


@pytest.mark.parametrize("expr, tz, after, expected", DST_CASES)
def test_dst_table(expr, tz, after, expected):
    got = upcoming(parse_schedule(expr, tz), Z(after), len(expected))
    assert got == zs(*expected)
    assert all(t.tzinfo is UTC for t in got)


@pytest.mark.parametrize(
    "expr, tz, expected",
    [
        ("at(2026-03-29T02:30:00)", "Europe/Berlin", "2026-03-29T01:00"),  # gap: at the jump
        ("at(2026-10-25T02:30:00)", "Europe/Berlin", "2026-10-25T00:30"),  # repeat: first
        ("at(2026-11-01T01:30:00)", "America/New_York", "2026-11-01T05:30"),
        ("at(2026-03-08T02:59:59)", "America/New_York", "2026-03-08T07:00"),
        ("at(2026-10-04T02:10:00)", "Australia/Lord_Howe", "2026-10-03T15:30"),
        ("at(2026-04-05T01:40:00)", "Australia/Lord_Howe", "2026-04-04T14:40"),
        ("at(2026-12-01T10:00:00)", "Asia/Kolkata", "2026-12-01T04:30"),
        ("at(2026-12-01T10:00:00)", "UTC", "2026-12-01T10:00"),
    ],
)
def test_at_dst(expr, tz, expected):
    s = parse_schedule(expr, tz)
    assert s.one_off and isinstance(s, OneOffSchedule)
    assert s.run_at == Z(expected)
    assert s.next_after(Z(expected) - timedelta(seconds=1)) == Z(expected)
    assert s.next_after(Z(expected)) is None


def test_every_and_rate_ignore_dst():
    anchor = Z("2026-03-28T12:00")
    s = parse_schedule("@every 1d", "Europe/Berlin", anchor=anchor)
    assert upcoming(s, anchor, 3) == zs("2026-03-29T12:00", "2026-03-30T12:00", "2026-03-31T12:00")
    s = parse_schedule("rate(1 hour)", "America/New_York", anchor=Z("2026-11-01T04:00"))
    assert upcoming(s, Z("2026-11-01T04:00"), 4) == zs(
        "2026-11-01T05:00", "2026-11-01T06:00", "2026-11-01T07:00", "2026-11-01T08:00"
    )


@pytest.mark.parametrize(
    "expr, tz, at, expected",
    [
        ("* * * * *", "Europe/Berlin", "2026-10-25T01:10", "2026-10-25T00:59"),  # in the repeat
        ("30 2 * * *", "Europe/Berlin", "2026-03-29T01:00", "2026-03-29T01:00"),
        ("30 2 * * *", "Europe/Berlin", "2026-03-29T00:59", "2026-03-28T01:30"),
        ("0 * * * *", "America/New_York", "2026-11-01T06:30", "2026-11-01T05:00"),
        ("0 0 29 2 *", "UTC", "2026-01-01T00:00", "2024-02-29T00:00"),
        ("cron(0 0 1 1 ? 2020-2022)", "UTC", "2030-01-01T00:00", "2022-01-01T00:00"),
    ],
)
def test_last_at_or_before(expr, tz, at, expected):
    assert parse_schedule(expr, tz).last_at_or_before(Z(at)) == Z(expected)


def test_last_at_or_before_none():
    s = parse_schedule("cron(0 0 1 1 ? 2030)", "UTC")
    assert s.last_at_or_before(Z("2029-12-31T00:00")) is None
    assert parse_schedule("0 0 30 2 *", "UTC").last_at_or_before(Z("2026-01-01T00:00")) is None


# ---------------------------------------------------------------------------------------------
# Forms
# ---------------------------------------------------------------------------------------------

FORM_CASES = [
    ("0 3 * * *", "2026-01-01T00:00", ["2026-01-01T03:00", "2026-01-02T03:00"]),
    ("  0 3 * * *\n", "2026-01-01T00:00", ["2026-01-01T03:00"]),
    ("*/15 * * * *", "2026-01-01T00:07", ["2026-01-01T00:15", "2026-01-01T00:30"]),
    (
        "1-10/4 0 * * *",
        "2026-01-01T00:00",
        ["2026-01-01T00:01", "2026-01-01T00:05", "2026-01-01T00:09", "2026-01-02T00:01"],
    ),
    ("5/20 0 * * *", "2026-01-01T00:00", ["2026-01-01T00:05", "2026-01-01T00:25", "2026-01-01T00:45"]),
    ("0 0 1 jan,Jul *", "2026-01-01T00:00", ["2026-07-01T00:00", "2027-01-01T00:00"]),
    ("0 12 * * mon-FRI", "2026-01-02T13:00", ["2026-01-05T12:00", "2026-01-06T12:00"]),
    ("@yearly", "2026-01-01T00:00", ["2027-01-01T00:00", "2028-01-01T00:00"]),
    ("@annually", "2026-06-01T00:00", ["2027-01-01T00:00"]),
    ("@monthly", "2026-01-15T00:00", ["2026-02-01T00:00", "2026-03-01T00:00"]),
    ("@weekly", "2026-01-01T00:00", ["2026-01-04T00:00", "2026-01-11T00:00"]),  # Sundays
    ("@daily", "2026-01-01T00:00", ["2026-01-02T00:00"]),
    ("@MIDNIGHT", "2026-01-01T00:00", ["2026-01-02T00:00"]),
    ("@hourly", "2026-01-01T00:30", ["2026-01-01T01:00", "2026-01-01T02:00"]),
    ("cron(0 12 * * ? *)", "2026-01-01T12:00", ["2026-01-02T12:00"]),
    ("cron(0/30 9-10 ? * MON-FRI *)", "2026-01-02T10:00", ["2026-01-02T10:30", "2026-01-05T09:00", "2026-01-05T09:30"]),
    ("CRON( 0 0 ? * 1 * )", "2026-01-01T00:00", ["2026-01-04T00:00"]),  # 1 = Sunday
    ("cron(0 0 ? * 7 *)", "2026-01-01T00:00", ["2026-01-03T00:00"]),  # 7 = Saturday
    (
        "cron(0 9 ? JAN-MAR TUE#2 *)",
        "2026-01-01T00:00",
        ["2026-01-13T09:00", "2026-02-10T09:00", "2026-03-10T09:00", "2027-01-12T09:00"],
    ),
]


@pytest.mark.parametrize("expr, after, expected", FORM_CASES)
def test_forms(expr, after, expected):
    assert upcoming(parse_schedule(expr), Z(after), len(expected)) == zs(*expected)


def test_macros_equal_their_expansion():
    after = Z("2026-02-17T05:43")
    for macro, expansion in [
        ("@yearly", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ]:
        a, b = parse_schedule(macro, "Europe/Berlin"), parse_schedule(expansion, "Europe/Berlin")
        assert upcoming(a, after, 5) == upcoming(b, after, 5)


@pytest.mark.parametrize(
    "expr, seconds",
    [
        ("@every 90s", 90),
        ("@every 5m", 300),
        ("@every 1h30m", 5400),
        ("@every 2h", 7200),
        ("@every 1d", 86400),
        ("@every 1.5h", 5400),
        ("@every 1d2h3m4s", 93784),
        ("@every 1s", 1),
        ("@every\t10M", 600),
        ("rate(1 minute)", 60),
        ("rate(5 minutes)", 300),
        ("rate(1 hour)", 3600),
        ("rate(2 hours)", 7200),
        ("rate(1 day)", 86400),
        ("rate(3 days)", 259200),
        ("rate(30 seconds)", 30),
        ("rate(1 second)", 1),
        ("rate(1 minutes)", 60),
        ("rate(5 minute)", 300),
        ("RATE( 5  Minutes )", 300),
    ],
)
def test_intervals(expr, seconds):
    anchor = Z("2026-05-05T10:00:07")
    s = parse_schedule(expr, "Asia/Kolkata", anchor=anchor)
    assert isinstance(s, IntervalSchedule) and not s.one_off
    assert s.interval == timedelta(seconds=seconds)
    step = timedelta(seconds=seconds)
    assert s.next_after(anchor - timedelta(days=400)) == anchor  # k = 0 is an occurrence
    assert s.next_after(anchor) == anchor + step
    assert s.next_after(anchor + step * 1000 - timedelta(microseconds=1)) == anchor + step * 1000
    assert s.next_after(anchor + step * 1000) == anchor + step * 1001
    assert s.last_at_or_before(anchor + step * 7 + step / 2) == anchor + step * 7
    assert s.last_at_or_before(anchor - timedelta(microseconds=1)) is None


def test_interval_without_anchor_counts_from_the_epoch():
    s = parse_schedule("rate(5 minutes)")
    assert s.next_after(Z("2026-01-01T00:07:30")) == Z("2026-01-01T00:10")


def test_one_off():
    s = one_off(datetime(2026, 12, 1, 11, 0, tzinfo=timezone(timedelta(hours=1))))
    assert s.one_off and s.run_at == Z("2026-12-01T10:00") and s.run_at.tzinfo is UTC
    assert s.next_after(Z("2026-01-01T00:00")) == Z("2026-12-01T10:00")
    assert s.next_after(Z("2026-12-01T10:00")) is None
    assert s.last_at_or_before(Z("2026-12-01T10:00")) == Z("2026-12-01T10:00")
    with pytest.raises(ScheduleError) as e:
        one_off(datetime(2026, 12, 1))
    assert e.value.field == "run_at"


def test_schedules_are_immutable():
    s = parse_schedule("0 3 * * *", "Europe/Berlin")
    with pytest.raises(AttributeError):
        s.expression = "x"
    with pytest.raises(AttributeError):
        del s.timezone
    assert s.expression == "0 3 * * *" and s.timezone == "Europe/Berlin" and not s.one_off


def test_naive_after_is_rejected():
    with pytest.raises(ValueError):
        parse_schedule("* * * * *").next_after(datetime(2026, 1, 1))


def test_aware_non_utc_after_is_accepted():
    berlin = validate_timezone("Europe/Berlin")
    s = parse_schedule("0 3 * * *", "Europe/Berlin")
    # 01:30 CET on a fold... any aware datetime works; compared as instants
    assert s.next_after(datetime(2026, 1, 1, 2, 59, tzinfo=berlin)) == Z("2026-01-01T02:00")


# ---------------------------------------------------------------------------------------------
# Day rules: Vixie OR, Sunday = 0/7, EventBridge L / W / # / nL, years, Feb 29
# ---------------------------------------------------------------------------------------------


def days_of(expr: str, after: str, n: int, tz: str = "UTC") -> list[str]:
    return [t.strftime("%Y-%m-%d") for t in upcoming(parse_schedule(expr, tz), Z(after), n)]


def test_vixie_or_rule():
    # January 2026 starts on a Thursday: Fridays are 2, 9, 16, 23, 30
    assert days_of("0 0 13 * 5", "2026-01-01T00:00", 6) == [
        "2026-01-02",
        "2026-01-09",
        "2026-01-13",
        "2026-01-16",
        "2026-01-23",
        "2026-01-30",
    ]
    assert days_of("0 0 13 * *", "2026-01-01T00:00", 2) == ["2026-01-13", "2026-02-13"]
    assert days_of("0 0 * * 5", "2026-01-01T00:00", 2) == ["2026-01-02", "2026-01-09"]
    # a field beginning with '*' counts as unrestricted (Vixie): AND of odd days and Fridays
    assert days_of("0 0 */2 * 5", "2026-01-01T00:00", 3) == ["2026-01-09", "2026-01-23", "2026-02-13"]
    # both restricted, with ranges and names
    assert days_of("0 0 1-2 * sat", "2025-12-31T12:00", 4) == ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-10"]


def test_sunday_is_0_and_7():
    expected = days_of("0 0 * * 0", "2026-01-01T00:00", 3)
    assert expected == ["2026-01-04", "2026-01-11", "2026-01-18"]
    for expr in ("0 0 * * 7", "0 0 * * SUN", "0 0 * * sun", "0 0 * * 0,7"):
        assert days_of(expr, "2026-01-01T00:00", 3) == expected
    assert days_of("0 0 * * 5-7", "2026-01-01T00:00", 4) == ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-09"]


def test_feb_29():
    t0 = time.perf_counter()
    assert days_of("0 0 29 2 *", "2026-01-01T00:00", 3) == ["2028-02-29", "2032-02-29", "2036-02-29"]
    assert days_of("0 0 29 2 *", "2096-03-01T00:00", 1) == ["2104-02-29"]  # 2100 is no leap year
    assert days_of("cron(0 0 29 2 ? *)", "2026-01-01T00:00", 1) == ["2028-02-29"]
    assert days_of("cron(0 0 L 2 ? *)", "2027-03-01T00:00", 2) == ["2028-02-29", "2029-02-28"]
    assert time.perf_counter() - t0 < 0.5


def test_eventbridge_last_day_and_weekdays():
    # L: last day of the month
    assert days_of("cron(0 0 L * ? *)", "2026-01-01T00:00", 3) == ["2026-01-31", "2026-02-28", "2026-03-31"]
    # LW: last weekday (Jan 31 2026 is a Saturday, Feb 28 a Saturday, May 31 a Sunday)
    assert days_of("cron(0 0 LW 1,2,5 ? *)", "2026-01-01T00:00", 3) == ["2026-01-30", "2026-02-27", "2026-05-29"]
    # 1W: Feb 1 2026 is a Sunday -> Monday 2nd; Aug 1 2026 a Saturday -> Monday 3rd (the
    # Friday before would leave the month)
    assert days_of("cron(0 0 1W 2,8 ? *)", "2026-01-01T00:00", 2) == ["2026-02-02", "2026-08-03"]
    # 31W: May 31 2026 is a Sunday -> Friday 29th (the Monday after would leave the month)
    assert days_of("cron(0 0 31W 5 ? 2026)", "2026-01-01T00:00", 2) == ["2026-05-29"]
    # 15W: Aug 15 2026 is a Saturday -> Friday 14th; Nov 15 2026 a Sunday -> Monday 16th;
    # Apr 15 2026 a Wednesday
    assert days_of("cron(0 0 15W 4,8,11 ? 2026)", "2026-01-01T00:00", 3) == ["2026-04-15", "2026-08-14", "2026-11-16"]
    # 30W in February never fires; only months with a 30th
    assert days_of("cron(0 0 30W 2,3 ? 2026)", "2026-01-01T00:00", 2) == ["2026-03-30"]


def test_eventbridge_day_of_week_specials():
    # 6L: last Friday of the month
    assert days_of("cron(15 10 ? * 6L 2026)", "2026-01-01T00:00", 3) == ["2026-01-30", "2026-02-27", "2026-03-27"]
    assert days_of("cron(0 0 ? * FRIL *)", "2026-01-01T00:00", 1) == ["2026-01-30"]
    # L alone: the last day of the week, Saturday
    assert days_of("cron(0 0 ? * L *)", "2026-01-01T00:00", 2) == ["2026-01-03", "2026-01-10"]
    # 2#1: first Monday; 1#5: fifth Sunday (only months that have one)
    assert days_of("cron(0 0 ? * 2#1 *)", "2026-01-01T00:00", 3) == ["2026-01-05", "2026-02-02", "2026-03-02"]
    assert days_of("cron(0 0 ? * 1#5 *)", "2026-01-01T00:00", 3) == ["2026-03-29", "2026-05-31", "2026-08-30"]
    assert days_of("cron(0 0 ? * MON#1,FRI#3 2026)", "2026-01-01T00:00", 3) == [
        "2026-01-05",
        "2026-01-16",
        "2026-02-02",
    ]


def test_eventbridge_year_field():
    assert days_of("cron(0 0 1 1 ? 2027,2030)", "2026-01-01T00:00", 3) == ["2027-01-01", "2030-01-01"]
    assert days_of("cron(0 0 1 1 ? 2030-2034/2)", "2026-01-01T00:00", 4) == ["2030-01-01", "2032-01-01", "2034-01-01"]
    assert days_of("cron(0 0 1 1 ? 2020)", "2026-01-01T00:00", 1) == []


def test_far_and_impossible_searches_are_fast():
    t0 = time.perf_counter()
    s = parse_schedule("cron(0 0 ? * 2#5 2099)", "Europe/Berlin")
    first = s.next_after(Z("2026-01-01T00:00"))
    assert first == Z("2099-03-29T22:00")  # Monday 2099-03-30 00:00 CEST
    assert parse_schedule("cron(0 0 ? * 2#5 2199)").next_after(Z("2199-12-31T00:00")) is None
    assert parse_schedule("0 0 30 2 *").next_after(Z("2026-01-01T00:00")) is None
    assert parse_schedule("0 0 31 2,4,6,9,11 *").next_after(Z("2026-01-01T00:00")) is None
    assert parse_schedule("cron(0 0 31W 2 ? *)").next_after(Z("2026-01-01T00:00")) is None
    assert parse_schedule("* * * * *").next_after(Z("9999-12-31T23:00")) is None
    assert time.perf_counter() - t0 < 0.5


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

ERROR_CASES = [
    ("61 * * * *", "minute field: 61 is out of range 0-59"),
    ("* 24 * * *", "hour field: 24 is out of range 0-23"),
    ("* * 0 * *", "day-of-month field: 0 is out of range 1-31"),
    ("* * 32 * *", "day-of-month field: 32 is out of range 1-31"),
    ("* * * 13 *", "month field: 13 is out of range 1-12"),
    ("* * * 0 *", "month field: 0 is out of range 1-12"),
    ("* * * * 8", "day-of-week field: 8 is out of range 0-7"),
    ("* * * FOO *", "month field: unknown name 'FOO'"),
    ("* * * * FUNDAY", "day-of-week field: unknown name 'FUNDAY'"),
    ("* * * * MON-XYZ", "day-of-week field: unknown name 'XYZ'"),
    ("* * * MON *", "month field: unknown name 'MON'"),
    ("* * JAN * *", "day-of-month field: 'JAN' is not a number"),
    ("5-2 * * * *", "minute field: range '5-2' is backwards"),
    ("*/0 * * * *", "minute field: step must be at least 1"),
    ("*/x * * * *", "minute field: step 'x'"),
    ("*/61 * * * *", "minute field: step 61"),
    ("1,,2 * * * *", "minute field: empty list element"),
    ("-1 * * * *", "minute field: '-1' is not a valid value"),
    ("1.5 * * * *", "minute field: '1.5' is not a number"),
    ("* * * *", "expected 5 cron fields"),
    ("0 0 * * * 2026", "use cron(min hr dom mon dow year)"),
    ("* * L * *", "'L' is only supported in the cron(...) form"),
    ("* * * * 1#2", "'#' is only supported in the cron(...) form"),
    ("* * ? * *", "'?' is not supported in 5-field cron"),
    ("@foo", "unknown macro '@foo'"),
    ("@reboot", "unknown macro '@reboot'"),
    ("@daily 5", "@daily takes no arguments"),
    ("@every", "@every needs a duration"),
    ("@every 0s", "at least 1 second"),
    ("@every 90", "has no unit"),
    ("@every 5ms", "unknown unit 'ms'"),
    ("@every 5w", "unknown unit 'w'"),
    ("@every 1.5s", "not a whole number of seconds"),
    ("@every 1h 30m", "is not a duration"),
    ("@every -5m", "is not a duration"),
    ("@every 99999999d", "at most 36500 days"),
    ("cron(0 12 ? * ? *)", "both '?'"),
    ("cron(0 12 * * * *)", "exactly one of day-of-month and day-of-week must be '?'"),
    ("cron(0 12 1 * MON *)", "exactly one of day-of-month and day-of-week must be '?'"),
    ("cron(0 12 * *)", "cron() needs exactly 6 fields"),
    ("cron(0 12 * * ? * *)", "cron() needs exactly 6 fields"),
    ("cron(60 12 * * ? *)", "minute field: 60 is out of range 0-59"),
    ("cron(0 12 ? * 0 *)", "day-of-week field: 0 is out of range 1-7 (1 = Sunday"),
    ("cron(0 12 ? * 8 *)", "day-of-week field: 8 is out of range 1-7"),
    ("cron(0 12 ? * 2#6 *)", "the number after '#' must be 1-5"),
    ("cron(0 12 ? * 2#0 *)", "the number after '#' must be 1-5"),
    ("cron(0 12 ? * #2 *)", "'#' needs a single day"),
    ("cron(0 12 ? * 9L *)", "day-of-week field: 9 is out of range 1-7"),
    ("cron(0 12 ? * 1-3L *)", "'L' needs a single day before it"),
    ("cron(0 12 L-2 * ? *)", "use L, LW or nW"),
    ("cron(0 12 32W * ? *)", "day-of-month field: 32 is out of range 1-31"),
    ("cron(0 12 W * ? *)", "'W' needs a single day"),
    ("cron(0 12 * * ? 1969)", "year field: 1969 is out of range 1970-2199"),
    ("cron(0 12 * * ? 2200)", "year field: 2200 is out of range 1970-2199"),
    ("cron(? 12 * * ? *)", "minute field: '?' is only allowed"),
    ("cron(0 12 * * ? *", "missing closing ')'"),
    ("cron(0 12 ? * MON-BLA *)", "day-of-week field: unknown name 'BLA'"),
    ("cron(0 12 ? XYZ MON *)", "month field: unknown name 'XYZ'"),
    ("rate(0 minutes)", "at least 1"),
    ("rate(5 fortnights)", "unknown unit 'fortnights'"),
    ("rate(five minutes)", "must be a whole number"),
    ("rate(1.5 hours)", "must be a whole number"),
    ("rate(-1 minutes)", "must be a whole number"),
    ("rate(5)", "rate() takes a value and a unit"),
    ("rate()", "rate() takes a value and a unit"),
    ("rate(100000 days)", "at most 36500 days"),
    ("at(2026-13-01T00:00:00)", "not a valid date-time"),
    ("at(2026-02-30T00:00:00)", "not a valid date-time"),
    ("at(2026-12-01 10:00:00)", "yyyy-mm-ddThh:mm:ss"),
    ("at(2026-12-01T10:00)", "yyyy-mm-ddThh:mm:ss"),
    ("at(2026-12-01T10:00:00Z)", "yyyy-mm-ddThh:mm:ss"),
    ("at(tomorrow)", "yyyy-mm-ddThh:mm:ss"),
    ("at(1900-01-01T00:00:00)", "year 1900 is out of range"),
    ("", "schedule is empty"),
    ("   ", "schedule is empty"),
    ("* " * 200, "too long"),
    ("every day", "write rate(1 day) or @every 1d"),  # a hint, not the cron grammar
    ("foo(1)", "unknown schedule form"),
]


@pytest.mark.parametrize("expr, message", ERROR_CASES)
def test_errors(expr, message):
    with pytest.raises(ScheduleError) as e:
        parse_schedule(expr, "Europe/Berlin")
    assert message in str(e.value)
    assert e.value.field == "schedule"


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus",
        "",
        " Europe/Berlin",
        "../etc/passwd",
        "/etc/localtime",
        "Europe/Berlin\x00",
        "x" * 300,
        5,
        None,
        "localtime",
        "posixrules",
        "Factory",
        "posix/Europe/Berlin",
        "right/UTC",
        "zone.tab",
        "europe/berlin",
    ],
)
def test_bad_timezones(name):
    with pytest.raises(ScheduleError) as e:
        validate_timezone(name)
    assert e.value.field == "timezone"
    with pytest.raises(ScheduleError) as e:
        parse_schedule("0 3 * * *", name)
    assert e.value.field == "timezone"


def test_good_timezones():
    for name in ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Etc/GMT+5"]:
        assert validate_timezone(name).key == name


def test_non_string_schedule_and_naive_anchor():
    with pytest.raises(ScheduleError):
        parse_schedule(None)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError) as e:
        parse_schedule("rate(5 minutes)", anchor=datetime(2026, 1, 1))
    assert e.value.field == "start_at"


def test_schedule_error_is_a_value_error():
    err = ScheduleError("boom", field="end_at")
    assert isinstance(err, ValueError) and str(err) == "boom" and err.field == "end_at"
    assert ScheduleError("x").field == "schedule"


# ---------------------------------------------------------------------------------------------
# start_at / end_at, first_run
# ---------------------------------------------------------------------------------------------

HOURLY = parse_schedule("0 * * * *")


def test_next_occurrence_window():
    assert next_occurrence(HOURLY, Z("2026-01-01T10:30")) == Z("2026-01-01T11:00")
    # start_at inclusive: the first occurrence >= start_at
    assert next_occurrence(HOURLY, Z("2026-01-01T10:30"), start_at=Z("2026-01-01T15:00")) == Z("2026-01-01T15:00")
    assert next_occurrence(HOURLY, Z("2026-01-01T10:30"), start_at=Z("2026-01-01T15:00:01")) == Z("2026-01-01T16:00")
    # start_at in the past does not matter
    assert next_occurrence(HOURLY, Z("2026-01-01T10:30"), start_at=Z("2020-01-01T00:00")) == Z("2026-01-01T11:00")
    # end_at inclusive
    assert next_occurrence(HOURLY, Z("2026-01-01T10:30"), end_at=Z("2026-01-01T11:00")) == Z("2026-01-01T11:00")
    assert next_occurrence(HOURLY, Z("2026-01-01T10:30"), end_at=Z("2026-01-01T10:59:59")) is None


def test_first_run():
    now = Z("2026-01-01T10:00")
    assert first_run(HOURLY, now) == Z("2026-01-01T11:00")  # strictly after now
    assert first_run(HOURLY, now, start_at=Z("2026-02-01T00:00")) == Z("2026-02-01T00:00")
    assert first_run(HOURLY, now, end_at=Z("2026-01-01T10:30")) is None
    # a one-off in the past (or exactly now) fires at once: its own time is answered
    past = one_off(Z("2025-12-31T00:00"))
    assert first_run(past, now) == Z("2025-12-31T00:00")
    assert first_run(one_off(now), now) == now
    assert first_run(one_off(Z("2026-06-01T00:00")), now) == Z("2026-06-01T00:00")
    assert first_run(parse_schedule("at(2020-01-01T00:00:00)", "Asia/Kolkata"), now) == Z("2019-12-31T18:30")
    # ...unless outside the window
    assert first_run(past, now, end_at=Z("2025-01-01T00:00")) is None
    assert first_run(past, now, start_at=Z("2026-01-01T00:00")) is None


def test_first_run_rate_anchors():
    now = Z("2026-01-01T10:00:00")
    created = parse_schedule("rate(5 minutes)", anchor=now)  # anchored at creation
    assert first_run(created, now) == Z("2026-01-01T10:05")
    start = Z("2026-01-02T08:00")
    started = parse_schedule("rate(5 minutes)", anchor=start)  # anchored at start_at
    assert first_run(started, now, start_at=start) == start
    assert started.next_after(start) == Z("2026-01-02T08:05")


# ---------------------------------------------------------------------------------------------
# plan_next
# ---------------------------------------------------------------------------------------------

PREV = Z("2026-01-01T10:00")


@pytest.mark.parametrize("policy", ["skip", "run_once", "run_all"])
def test_plan_next_without_miss(policy):
    assert plan_next(HOURLY, PREV, Z("2026-01-01T10:30"), policy) == Z("2026-01-01T11:00")
    assert plan_next(HOURLY, PREV, Z("2026-01-01T11:00"), policy) == Z("2026-01-01T11:00")
    assert plan_next(one_off(PREV), PREV, Z("2026-01-01T12:00"), policy) is None
    assert plan_next(HOURLY, PREV, Z("2026-01-01T10:30"), policy, end_at=Z("2026-01-01T10:59")) is None


def test_plan_next_policies():
    now = Z("2026-01-01T15:30")  # missed: 11, 12, 13, 14, 15
    assert plan_next(HOURLY, PREV, now, "skip") == Z("2026-01-01T16:00")
    assert plan_next(HOURLY, PREV, now, "run_once") == Z("2026-01-01T15:00")
    assert plan_next(HOURLY, PREV, now, "run_all") == Z("2026-01-01T11:00")
    assert plan_next(HOURLY, PREV, now, "run_all", cap=5) == Z("2026-01-01T11:00")  # not more
    assert plan_next(HOURLY, PREV, now, "run_all", cap=4) == Z("2026-01-01T12:00")
    assert plan_next(HOURLY, PREV, now, "run_all", cap=3) == Z("2026-01-01T13:00")
    assert plan_next(HOURLY, PREV, now, "run_all", cap=1) == Z("2026-01-01T15:00")


def test_plan_next_now_on_an_occurrence():
    now = Z("2026-01-01T15:00")  # 15:00 is due now: counted as missed, and the skip answer
    assert plan_next(HOURLY, PREV, now, "skip") == now
    assert plan_next(HOURLY, PREV, now, "run_once") == now
    assert plan_next(HOURLY, PREV, now, "run_all", cap=2) == Z("2026-01-01T14:00")


def test_plan_next_with_end_at_and_start_at():
    now, end = Z("2026-01-01T15:30"), Z("2026-01-01T13:30")  # missed within the window: 11-13
    assert plan_next(HOURLY, PREV, now, "skip", end_at=end) is None
    assert plan_next(HOURLY, PREV, now, "run_once", end_at=end) == Z("2026-01-01T13:00")
    assert plan_next(HOURLY, PREV, now, "run_all", end_at=end) == Z("2026-01-01T11:00")
    assert plan_next(HOURLY, PREV, now, "run_all", end_at=end, cap=2) == Z("2026-01-01T12:00")
    start = Z("2026-01-01T13:00")
    assert plan_next(HOURLY, PREV, now, "run_all", start_at=start) == Z("2026-01-01T13:00")


def test_plan_next_rejects_bad_input():
    with pytest.raises(ValueError):
        plan_next(HOURLY, PREV, Z("2026-01-02T00:00"), "sometimes")
    with pytest.raises(ValueError):
        plan_next(HOURLY, PREV, Z("2026-01-02T00:00"), "run_all", cap=0)


def test_plan_next_huge_gaps_are_instant():
    t0 = time.perf_counter()
    anchor = Z("2016-01-01T00:00")
    every = parse_schedule("@every 1s", anchor=anchor)
    now = Z("2026-01-01T00:00:00.5")  # ten years of seconds missed
    assert plan_next(every, anchor, now, "skip") == Z("2026-01-01T00:00:01")
    assert plan_next(every, anchor, now, "run_once") == Z("2026-01-01T00:00:00")
    assert plan_next(every, anchor, now, "run_all") == Z("2025-12-31T23:59:51")
    assert plan_next(every, anchor, now, "run_all", cap=1000) == Z("2025-12-31T23:43:21")
    minutely = parse_schedule("* * * * *", "Europe/Berlin")
    assert plan_next(minutely, anchor, now, "skip") == Z("2026-01-01T00:01")
    assert plan_next(minutely, anchor, now, "run_once") == Z("2026-01-01T00:00")
    assert plan_next(minutely, anchor, now, "run_all") == Z("2025-12-31T23:51")
    sparse = parse_schedule("cron(0 0 ? * 2#5 *)", "Australia/Lord_Howe")
    assert plan_next(sparse, Z("2000-01-01T00:00"), now, "run_all", cap=3) is not None
    assert time.perf_counter() - t0 < 1.0


def test_plan_next_across_dst_repeat():
    ny = parse_schedule("*/30 * * * *", "America/New_York")
    prev, now = Z("2026-11-01T04:30"), Z("2026-11-01T06:45")  # inside the repeated hour
    assert plan_next(ny, prev, now, "skip") == Z("2026-11-01T07:00")
    assert plan_next(ny, prev, now, "run_once") == Z("2026-11-01T05:30")
    assert plan_next(ny, prev, now, "run_all") == Z("2026-11-01T05:00")


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("every 5 minutes", "rate(5 minutes) or @every 5m"),
        ("Every 30 seconds", "rate(30 seconds) or @every 30s"),
        ("every hour", "rate(1 hour) or @every 1h"),
        ("every 2 weeks", "rate(14 days) or @every 14d"),
        ("5m", "rate(5 minutes) or @every 5m"),
        ("daily", "@daily"),
    ],
)
def test_a_schedule_in_words_is_refused_with_what_to_write(text, hint):
    with pytest.raises(ScheduleError) as error:
        parse_schedule(text)
    assert error.value.field == "schedule" and hint in error.value.message


@pytest.mark.parametrize(
    ("zone", "suggested"),
    [
        ("Europe/Berln", "Europe/Berlin"),
        ("europe/berlin", "Europe/Berlin"),
        ("Berlin", "Europe/Berlin"),
        ("America/New York", "America/New_York"),
    ],
)
def test_an_unknown_time_zone_suggests_the_closest_names(zone, suggested):
    with pytest.raises(ScheduleError) as error:
        parse_schedule("0 3 * * *", zone)
    assert error.value.field == "timezone" and f"did you mean {suggested}" in error.value.message


def test_a_zone_nothing_resembles_gets_the_usual_message():
    with pytest.raises(ScheduleError, match="expected an IANA name"):
        parse_schedule("0 3 * * *", "Mars/Olympus_Mons")
