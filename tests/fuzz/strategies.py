"""Hypothesis strategies shared by the fuzz tests: schedule expressions (arbitrary and
near-valid), time zones, aware datetimes, and job bodies (arbitrary JSON and near-valid jobs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

# Zones with the awkward rules: DST gaps and folds, half-hour DST, +14, a skipped day (Apia
# 2011), negative DST (Dublin, Casablanca), a 2-hour DST (Troll), and plain UTC.
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kathmandu",
    "Pacific/Kiritimati",
    "Pacific/Apia",
    "America/Santiago",
    "Africa/Casablanca",
    "Europe/Dublin",
    "Antarctica/Troll",
    "Etc/GMT+12",
    "Etc/GMT-14",
    "America/St_Johns",
]
BAD_ZONES = [
    "",
    " UTC",
    "utc",
    "Mars/Olympus",
    "Europe",
    "America/",
    "../etc/passwd",
    "/etc/localtime",
    "localtime",
    "posixrules",
    "posix/UTC",
    "right/UTC",
    "Factory",
    "UTC\x00",
    "Europe\\Berlin",
    "Europe/Berlin/",
    "x" * 300,
    "Europe/../UTC",
    "zone.tab",
    "tzdata.zi",
    "leapseconds",
    ".",
]

# Mostly real zones (so that the expression gets parsed), sometimes bad names or any text.
timezones = st.sampled_from(["good"] * 7 + ["bad", "bad", "text"]).flatmap(
    lambda kind: {"good": st.sampled_from(ZONES), "bad": st.sampled_from(BAD_ZONES), "text": st.text(max_size=40)}[kind]
)

# Fixed offsets within what datetime allows (strictly less than a day).
offsets = st.builds(lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-1439, 1439))
tzinfos = st.one_of(st.just(UTC), offsets)


def aware(min_year: int = 1970, max_year: int = 2200) -> st.SearchStrategy[datetime]:
    """Aware datetimes (fixed offsets) between the given years."""
    return st.datetimes(
        min_value=datetime(min_year, 1, 1), max_value=datetime(max_year, 12, 31, 23, 59, 59), timezones=tzinfos
    )


# Every datetime Python can hold, with any offset: the edges overflow on conversion to UTC.
any_aware = st.datetimes(timezones=tzinfos)

# ------------------------------------------------------------------------------------- schedules

_WEIRD_NUMBERS = ["00", "007", "99999999999999999999", "-1", "+5", "1.5", "", "\u0663", "0x1f"]
_number = st.one_of(st.integers(-3, 70), st.integers(0, 10**6), st.sampled_from(_WEIRD_NUMBERS))
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_junk = st.text(alphabet="*/,-?LW#0123456789 \t\u00a0()@xyz", max_size=6)


def _in_range(lo: int, hi: int, wild: bool) -> st.SearchStrategy[str]:
    """A value of the field's range; when ``wild``, sometimes just outside it or not a number."""
    inside = st.integers(lo, hi).map(str)
    if not wild:
        return inside
    return st.one_of(inside, inside, inside, st.integers(lo - 2, hi + 2).map(str), st.sampled_from(_WEIRD_NUMBERS))


@st.composite
def _atom(draw, lo: int, hi: int, names: list[str], eventbridge: bool, wild: bool) -> str:
    n = lambda: draw(_in_range(lo, hi, wild))  # noqa: E731
    steps = st.integers(1, hi - lo + 1).map(str)
    step = lambda: draw(st.one_of(steps, st.sampled_from(["0", "-1", "99"])) if wild else steps)  # noqa: E731
    name = lambda: (  # noqa: E731
        draw(st.sampled_from(names)).lower() if draw(st.booleans()) else draw(st.sampled_from(names))
    )

    def span() -> str:
        a, b = n(), n()
        if not wild:
            a, b = sorted((a, b), key=int)
        return f"{a}-{b}"

    choices = [
        lambda: "*",
        lambda: "*",
        n,
        n,
        lambda: f"*/{step()}",
        span,
        lambda: f"{span()}/{step()}",
        lambda: f"{n()}/{step()}",
    ]
    if names:
        choices += [name, lambda: f"{name()}-{name()}"] + ([lambda: f"{name()}-{n()}"] if wild else [])
    if eventbridge:
        k = lambda: draw(st.integers(0, 6) if wild else st.integers(1, 5))  # noqa: E731
        choices += [lambda: "L", lambda: "LW", lambda: f"{n()}W", lambda: f"{n()}L", lambda: f"{n()}#{k()}"]
        if names:
            choices += [lambda: f"{name()}#{k()}", lambda: f"{name()}L"]
    if wild:
        choices += [lambda: draw(_junk), lambda: "?"]
    return draw(st.sampled_from(choices))()


def _field(draw, lo: int, hi: int, wild: bool, names: list[str] | None = None, eventbridge: bool = False) -> str:
    items = draw(st.lists(_atom(lo, hi, names or [], eventbridge, wild), min_size=1, max_size=3))
    return ",".join(items)


# Each expression is either "exact" (every token from its field's domain: mostly valid, or
# invalid only by combination) or "wild" (out-of-range values, stray characters, wrong counts).
_wild = st.sampled_from([False] * 7 + [True] * 3)


@st.composite
def classic_cron(draw) -> str:
    wild = draw(_wild)
    fields = [
        _field(draw, 0, 59, wild),
        _field(draw, 0, 23, wild),
        _field(draw, 1, 31, wild),
        _field(draw, 1, 12, wild, _MONTHS),
        _field(draw, 0, 7, wild, _DAYS),
    ]
    if wild:
        count = draw(st.sampled_from([5, 5, 4, 6]))
        fields = (fields + [_field(draw, 0, 59, wild)])[:count]
    sep = draw(st.sampled_from([" ", " ", " ", "  ", "\t"]))
    return sep.join(fields)


@st.composite
def eventbridge_cron(draw) -> str:
    wild = draw(_wild)
    year = draw(
        st.one_of(
            st.just("*"),
            st.integers(1960, 2210).map(str) if wild else st.integers(2000, 2199).map(str),
            st.builds(lambda _: _field(draw, 1970, 2199, wild), st.none()),
        )
    )
    fields = [
        _field(draw, 0, 59, wild),
        _field(draw, 0, 23, wild),
        _field(draw, 1, 31, wild, eventbridge=True),
        _field(draw, 1, 12, wild, _MONTHS),
        _field(draw, 1, 7, wild, _DAYS, eventbridge=True),
        year,
    ]
    if not wild or draw(st.booleans()):  # one day field is "?"
        fields[draw(st.sampled_from([2, 4]))] = "?"
    if wild:
        count = draw(st.sampled_from([6, 6, 5, 7]))
        fields = (fields + ["*"])[:count]
    return f"{draw(st.sampled_from(['cron', 'cron', 'CRON', 'Cron']))}({' '.join(fields)})"


@st.composite
def rate(draw) -> str:
    units = ["minute", "minutes", "hour", "hours", "day", "days", "second", "seconds", "MINUTES"]
    if draw(_wild):
        unit = draw(st.sampled_from(units + ["week", "ms", "", "minutes minutes"]))
        value = draw(_number)
        return f"rate({draw(st.sampled_from(['', ' ']))}{value} {unit}{draw(st.sampled_from(['', ' ', ')']))})"
    return f"rate({draw(st.integers(1, 10**5))} {draw(st.sampled_from(units))})"


@st.composite
def at(draw) -> str:
    if draw(_wild):
        y, mo, d = draw(st.integers(1, 10000)), draw(st.integers(0, 13)), draw(st.integers(0, 32))
        h, mi, s = draw(st.integers(0, 25)), draw(st.integers(0, 61)), draw(st.integers(0, 61))
        text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}"
        text = draw(
            st.sampled_from([text, text + "Z", text + "+01:00", text.replace("T", " "), text[:-3], text + ".5"])
        )
        return f"at({text})"
    when = draw(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9998, 12, 31)))
    return f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})"


@st.composite
def every(draw) -> str:
    if draw(_wild):
        part = st.tuples(
            st.one_of(
                st.integers(0, 10**7).map(str),
                st.sampled_from(["1.5", "0.5", "99999999999999999999", ".5", "1e3", "-1"]),
            ),
            st.sampled_from(["s", "m", "h", "d", "S", "H", "ms", "us", "w", "", "sec"]),
        )
        parts = draw(st.lists(part, min_size=0, max_size=3))
    else:
        parts = draw(
            st.lists(
                st.tuples(st.integers(1, 5000).map(str), st.sampled_from(["s", "m", "h", "d"])), min_size=1, max_size=3
            )
        )
    return draw(st.sampled_from(["@every", "@EVERY", "@every "])) + " " + "".join(a + b for a, b in parts)


macro = st.sampled_from(
    [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "@reboot",
        "@daily 1",
        "@",
        "@@hourly",
        "@HOURLY",
    ]
)

near_valid_schedules = st.one_of(classic_cron(), eventbridge_cron(), rate(), at(), every(), macro)
any_schedule_text = st.one_of(
    st.text(max_size=300), near_valid_schedules, near_valid_schedules.map(lambda s: f"  {s}\n")
)

# ------------------------------------------------------------------------------------- job JSON

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def _utc_convertible(value: datetime) -> bool:
    try:
        value.astimezone(UTC)
        return True
    except OverflowError:
        return False


def _timestamps(instants: st.SearchStrategy[datetime], edges: list[str]) -> st.SearchStrategy:
    return st.one_of(
        instants.map(lambda d: d.isoformat()),
        st.datetimes().map(lambda d: d.isoformat()),  # naive
        st.sampled_from(
            [
                "2026-12-01T10:00:00Z",
                "2026-12-01T10:00:00+14:00",
                "9999-12-31T23:59:59Z",
                "0001-01-01T00:00:00Z",
                "2026-02-30T00:00:00Z",
                "now",
                "",
                "2026-12-01",
                "1700000000",
                "2026-12-01T10:00:00+24:00",
                "2026-12-01T10:00:00.123456789Z",
            ]
            + edges
        ),
        st.integers(-(10**12), 10**12),
    )


# Instants at the edge of the calendar whose UTC conversion overflows.
OVERFLOWING = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]
_timestamp_text = _timestamps(any_aware, OVERFLOWING)
# start_at without the overflowing edge: test_fuzz_models checks that edge on its own.
_start_text = _timestamps(any_aware.filter(_utc_convertible), [])

_http_target = st.fixed_dictionaries(
    {
        "type": st.just("http"),
        "url": st.one_of(
            st.sampled_from(
                [
                    "https://example.com/hook",
                    "http://127.0.0.1:9/x",
                    "ftp://x/",
                    "https://",
                    "https://u:p@example.com/",
                    "https://[::1]:99999/",
                    "https://exa mple.com/",
                    "//example.com",
                    "https://example.com/" + "a" * 3000,
                ]
            ),
            st.text(max_size=30),
        ),
    },
    optional={
        "method": st.one_of(
            st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "get", "TRACE", "CONNECT"]),
            json_values,
        ),
        "headers": st.one_of(
            st.dictionaries(
                st.sampled_from(["X-A", "Idempotency-Key", "Host", "X-Scheduler-X", "bad name", "", "Content-Type"]),
                st.one_of(st.text(max_size=20), json_scalars),
                max_size=3,
            ),
            json_values,
        ),
        "body": st.one_of(st.none(), st.text(max_size=50), json_values),
        "auth": st.one_of(
            st.none(),
            json_values,
            st.fixed_dictionaries(
                {"type": st.sampled_from(["basic", "bearer", "header", "digest"])},
                optional={
                    "username": st.text(max_size=5),
                    "password": st.text(max_size=5),
                    "token": st.text(max_size=5),
                    "name": st.text(max_size=8),
                    "value": st.text(max_size=5),
                },
            ),
        ),
        "timeout_seconds": st.one_of(st.integers(-5, 1000), st.floats(allow_nan=True), json_scalars),
        "success_codes": st.one_of(st.none(), st.lists(st.integers(0, 1000), max_size=5), json_values),
        "follow_redirects": st.one_of(st.booleans(), json_scalars),
    },
)

_amqp_target = st.fixed_dictionaries(
    {"type": st.just("amqp")},
    optional={
        "url": st.one_of(
            st.none(),
            st.sampled_from(
                ["amqp://u:p@broker:5672/v", "amqps://h", "amqp://h:99999/", "amqp://h:abc/", "http://h/", "amqp://"]
            ),
            st.text(max_size=20),
        ),
        "exchange": st.one_of(st.text(max_size=10), json_scalars),
        "routing_key": st.text(max_size=10),
        "body": st.one_of(st.text(max_size=20), json_scalars),
        "body_encoding": st.sampled_from(["utf-8", "base64", "latin-1", ""]),
        "headers": st.one_of(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3), json_values),
        "content_type": st.one_of(st.none(), st.text(max_size=10)),
        "timeout_seconds": st.one_of(st.integers(-5, 400), json_scalars),
    },
)

_retry = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "max_attempts": st.one_of(st.integers(-2, 200), json_scalars),
            "min_backoff_seconds": st.one_of(
                st.floats(-10, 10**6), st.floats(allow_nan=True, allow_infinity=True), json_scalars
            ),
            "max_backoff_seconds": st.one_of(
                st.floats(-10, 10**6), st.floats(allow_nan=True, allow_infinity=True), json_scalars
            ),
            "max_age_seconds": st.one_of(st.none(), st.integers(-5, 10**8), json_scalars),
        },
    ),
)


@st.composite
def near_valid_jobs(draw) -> dict:
    """A valid job, then a few of its fields replaced by near-valid or wrong values."""
    job = {
        "name": "job-1",
        "schedule": "0 3 * * *",
        "timezone": "UTC",
        "target": {"type": "http", "url": "https://example.com/hook"},
    }
    fields = {
        "name": st.one_of(st.text(max_size=140), st.sampled_from(["-x", "a b", "a" * 129, "ok.name:1"]), json_scalars),
        "description": st.one_of(st.none(), st.text(max_size=30), json_scalars),
        "tags": st.one_of(st.lists(st.text(max_size=70), max_size=22), json_values),
        "schedule": st.one_of(st.none(), any_schedule_text, json_scalars),
        "run_at": st.one_of(st.none(), _timestamp_text),
        "timezone": st.one_of(timezones, json_scalars),
        "start_at": st.one_of(st.none(), _start_text),
        "end_at": st.one_of(st.none(), _timestamp_text),
        "target": st.one_of(_http_target, _amqp_target, json_values),
        "retry": _retry,
        "missed_runs": st.one_of(st.sampled_from(["skip", "run_once", "run_all", "RUN_ALL", ""]), json_scalars),
        "unexpected": json_values,
    }
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=4, unique=True))
    for name in chosen:
        if draw(st.integers(0, 9)) == 0:
            job.pop(name, None)
        else:
            job[name] = draw(fields[name])
    return job
