"""Property tests of ``scheduler.schedules`` (hypothesis).

Random 5-field cron expressions are generated together with the sets they denote, so an
independent oracle can tell, for any instant, whether it must fire under the contract:

* its local wall time matches the fields and it is the first occurrence of that wall time
  (``fold == 0``), or
* it is the instant a DST gap ends and one of the skipped wall times matches.

Start instants are drawn from 2020-2035, half of them within hours of a DST transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scheduler.schedules import ScheduleError, parse_schedule, plan_next, validate_timezone

UTC = UTC
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
MINUTE = timedelta(minutes=1)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LO = datetime(2020, 1, 1, tzinfo=UTC)
HI = datetime(2035, 12, 31, tzinfo=UTC)

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


# ---------------------------------------------------------------------------------------------
# Expression generation
# ---------------------------------------------------------------------------------------------


@st.composite
def token(draw, value: int, names: list[str] | None, lo: int) -> str:
    """A value, sometimes spelled as a name in random case."""
    if names and value - lo < len(names) and draw(st.booleans()):
        name = names[value - lo]
        return draw(st.sampled_from([name, name.lower(), name.capitalize()]))
    return str(value)


@st.composite
def element(draw, lo: int, hi: int, names=None) -> tuple[str, set[int]]:
    kind = draw(st.sampled_from(["value", "range", "range_step", "value_step"]))
    a = draw(st.integers(lo, hi))
    if kind == "value":
        return draw(token(a, names, lo)), {a}
    if kind == "value_step":
        step = draw(st.integers(1, hi - lo + 1))
        return f"{a}/{step}", set(range(a, hi + 1, step))
    b = draw(st.integers(a, hi))
    text = f"{draw(token(a, names, lo))}-{draw(token(b, names, lo))}"
    if kind == "range":
        return text, set(range(a, b + 1))
    step = draw(st.integers(1, hi - lo + 1))
    return f"{text}/{step}", set(range(a, b + 1, step))


@st.composite
def field(draw, lo: int, hi: int, names=None) -> tuple[str, set[int]]:
    kind = draw(st.sampled_from(["star", "star_step", "list", "list"]))
    if kind == "star":
        return "*", set(range(lo, hi + 1))
    if kind == "star_step":
        step = draw(st.integers(1, hi - lo + 1))
        return f"*/{step}", set(range(lo, hi + 1, step))
    parts = draw(st.lists(element(lo, hi, names), min_size=1, max_size=3))
    return ",".join(p[0] for p in parts), set().union(*(p[1] for p in parts))


@dataclass(frozen=True)
class Oracle:
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]  # cron numbering, 0 = Sunday (7 folded to 0)
    dom_star: bool
    dow_star: bool

    def matches(self, wall: datetime) -> bool:
        if wall.second or wall.microsecond:
            return False
        if wall.minute not in self.minutes or wall.hour not in self.hours:
            return False
        if wall.month not in self.months:
            return False
        dom_ok = wall.day in self.doms
        dow_ok = (wall.weekday() + 1) % 7 in self.dows
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok


@st.composite
def cron_expressions(draw) -> tuple[str, Oracle]:
    m_text, m = draw(field(0, 59))
    # bias the hour towards the local hours DST transitions touch (00:00-03:00)
    h_text, h = draw(
        st.one_of(
            field(0, 23),
            st.sampled_from([("1", {1}), ("2", {2}), ("1-2", {1, 2}), ("0-3", {0, 1, 2, 3}), ("*", set(range(24)))]),
        )
    )
    # bias the day fields towards '*' so that most expressions fire often
    dom_text, dom = draw(st.one_of(st.just(("*", set(range(1, 32)))), field(1, 31)))
    mon_text, mon = draw(st.one_of(st.just(("*", set(range(1, 13)))), field(1, 12, MONTHS)))
    dow_text, dow = draw(st.one_of(st.just(("*", set(range(0, 8)))), field(0, 7, DAYS)))
    # Days that no chosen month has (30 February) never fire: such an expression answers None,
    # which test_schedules checks; here every expression must fire.
    longest = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
    assume(not dow_text.startswith("*") or any(d <= longest[mo] for d in dom for mo in mon))
    oracle = Oracle(
        frozenset(m),
        frozenset(h),
        frozenset(dom),
        frozenset(mon),
        frozenset(d % 7 for d in dow),
        dom_text.startswith("*"),
        dow_text.startswith("*"),
    )
    sep = draw(st.sampled_from([" ", "  ", "\t"]))
    return sep.join([m_text, h_text, dom_text, mon_text, dow_text]), oracle


# ---------------------------------------------------------------------------------------------
# Instants, with a bias towards DST transitions
# ---------------------------------------------------------------------------------------------


@cache
def transitions(zone: str) -> tuple[datetime, ...]:
    """UTC instants in 2020-2035 at which ``zone`` changes its offset (to the second)."""
    tz = ZoneInfo(zone)
    out = []
    t = LO
    while t < HI:
        nxt = t + timedelta(days=1)
        if t.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
            lo, hi = int(t.timestamp()), int(nxt.timestamp())
            before = t.astimezone(tz).utcoffset()
            while lo < hi:
                mid = (lo + hi) // 2
                if datetime.fromtimestamp(mid, tz).utcoffset() != before:
                    hi = mid
                else:
                    lo = mid + 1
            out.append(datetime.fromtimestamp(lo, UTC))
        t = nxt
    return tuple(out)


@st.composite
def zone_and_instant(draw) -> tuple[str, datetime]:
    zone = draw(st.sampled_from(ZONES))
    near = transitions(zone)
    if near and draw(st.booleans()):
        base = draw(st.sampled_from(near))
        # mostly a little before the transition, so that the gap or repeat lies ahead
        offset = draw(st.one_of(st.integers(-3 * 3600, 600), st.integers(-6 * 3600, 6 * 3600)))
        micro = draw(st.sampled_from([0, 0, 1, 999_999]))
        return zone, base + timedelta(seconds=offset, microseconds=micro)
    ts = draw(st.integers(int(LO.timestamp()), int(HI.timestamp())))
    return zone, datetime.fromtimestamp(ts, UTC)


def must_fire(instant: datetime, tz: ZoneInfo, oracle: Oracle) -> bool:
    """Whether ``instant`` is an occurrence under the contract's DST rule (the oracle)."""
    local = instant.astimezone(tz)
    if local.fold == 0 and oracle.matches(local.replace(tzinfo=None)):
        return True
    before = (instant - timedelta(seconds=1)).astimezone(tz).utcoffset()
    after = local.utcoffset()
    if after > before:  # a gap ends here: wall times [instant+before, instant+after) skipped
        wall = (instant + before).replace(tzinfo=None)
        end = (instant + after).replace(tzinfo=None)
        wall = wall.replace(second=0, microsecond=0) + (MINUTE if wall.second or wall.microsecond else timedelta())
        while wall < end:
            if oracle.matches(wall):
                return True
            wall += MINUTE
    return False


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(expr=cron_expressions(), start=zone_and_instant())
def test_next_after_follows_the_contract(expr, start):
    text, oracle = expr
    zone, t = start
    tz = ZoneInfo(zone)
    schedule = parse_schedule(text, zone)

    results = []
    after = t
    for _ in range(6):
        nxt = schedule.next_after(after)
        if nxt is None:
            break
        assert nxt.tzinfo is UTC
        assert nxt > after  # strictly increasing
        # the instant round-trips through the zone (no local time inside a gap)
        local = datetime.fromtimestamp(nxt.timestamp(), tz)
        assert local.astimezone(UTC) == nxt
        assert must_fire(nxt, tz, oracle), (text, zone, after, nxt, local)
        results.append(nxt)
        after = nxt
    assert results, (text, zone, t)  # every generated expression fires within the horizon

    # nothing was skipped between t and the first result (checked minute by minute, bounded)
    first = results[0]
    probe = t.replace(second=0, microsecond=0) + MINUTE
    limit = min(first, t + 1500 * MINUTE)
    while probe < limit:
        assert not must_fire(probe, tz, oracle), (text, zone, t, probe, first)
        probe += MINUTE

    # the backward search agrees with the forward one
    assert schedule.last_at_or_before(first) == first
    before = schedule.last_at_or_before(first - timedelta(microseconds=1))
    assert before is None or before <= t
    for a, b in zip(results, results[1:]):
        assert schedule.last_at_or_before(b - timedelta(microseconds=1)) == a


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schedule_spec=st.one_of(
        cron_expressions().map(lambda e: ("cron", e[0])),
        st.integers(1, 7200).map(lambda s: ("every", f"@every {s}s")),
    ),
    start=zone_and_instant(),
    gap_minutes=st.integers(0, 360),
    cap=st.integers(1, 12),
    policy=st.sampled_from(["skip", "run_once", "run_all"]),
)
def test_plan_next_matches_enumeration(schedule_spec, start, gap_minutes, cap, policy):
    _, text = schedule_spec
    zone, t = start
    schedule = parse_schedule(text, zone, anchor=t - timedelta(seconds=7))
    previous = schedule.next_after(t)
    if previous is None:
        return
    now = previous + timedelta(minutes=gap_minutes, seconds=gap_minutes % 7)

    occurrences = []  # everything after previous, up to the first one > now
    o = previous
    while True:
        o = schedule.next_after(o)
        if o is None:
            break
        occurrences.append(o)
        if o > now:
            break
    missed = [o for o in occurrences if o <= now]
    upcoming = [o for o in occurrences if o > now]
    got = plan_next(schedule, previous, now, policy, cap=cap)
    if not missed:
        assert got == (occurrences[0] if occurrences else None)
    elif policy == "skip":
        assert got == (missed[-1] if missed[-1] == now else (upcoming[0] if upcoming else None))
    elif policy == "run_once":
        assert got == missed[-1]
    else:
        assert got == (missed[0] if len(missed) <= cap else missed[-cap])


@st.composite
def junk(draw) -> str:
    """Text that looks a bit like schedules, to reach deep into the parsers."""
    alphabet = st.sampled_from(list("0123456789*/,-?LW# ()@.:TZmshdMONJAFRISUcronateyvz\t\n"))
    body = draw(st.text(alphabet, max_size=40))
    prefix = draw(st.sampled_from(["", "cron(", "rate(", "at(", "@every ", "@", "0 0 "]))
    suffix = draw(st.sampled_from(["", ")", " *", " ? *)"]))
    return prefix + body + suffix


@SETTINGS
@given(text=st.one_of(st.text(), junk()), zone=st.one_of(st.sampled_from(ZONES), st.text(max_size=30)))
def test_parse_schedule_only_raises_schedule_error(text, zone):
    try:
        schedule = parse_schedule(text, zone)
    except ScheduleError as exc:
        assert str(exc)
        assert exc.field in ("schedule", "timezone")
        return
    # whatever parsed must answer without crashing
    nxt = schedule.next_after(datetime(2026, 1, 1, tzinfo=UTC))
    assert nxt is None or nxt > datetime(2026, 1, 1, tzinfo=UTC)


@SETTINGS
@given(name=st.text(max_size=40))
def test_validate_timezone_only_raises_schedule_error(name):
    try:
        validate_timezone(name)
    except ScheduleError as exc:
        assert exc.field == "timezone"
