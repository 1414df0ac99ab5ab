"""``on_excluded: shift`` moves only the schedule's own occurrences: not an ``@every`` job's
anchor (its creation instant), nor an occurrence before a job's creation or a preview's
``after``. Before, such an instant inside a span was moved to the span's end: a run no schedule
would make, and a ``shifted_from`` that was never an occurrence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.core.domain import Job, JobState
from scheduler.planning import lifecycle
from scheduler.schedules.calendars import build_calendar
from scheduler.schedules.planning import explain_occurrences
from scheduler.schedules.shifts import shifted_from


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def span(start: str, end: str, name: str = "blk"):
    return build_calendar(name, {"ranges": [{"start": start + "Z", "end": end + "Z"}]})


def test_a_preview_of_an_interval_starts_after_its_after_and_moves_nothing_before_it():
    calendars = [span("2027-01-04T10:00:00", "2027-01-04T10:00:08")]
    found = explain_occurrences(
        "@every 30s", after=at("2027-01-04T10:00:01"), count=2, calendars=calendars, on_excluded="shift"
    )
    assert [o.at for o in found] == [at("2027-01-04T10:00:31"), at("2027-01-04T10:01:01")]


def test_a_preview_names_the_first_occurrence_after_its_after_that_was_moved():
    calendars = [span("2027-01-04T10:00:30", "2027-01-04T10:02:30")]
    found = explain_occurrences(
        "* * * * *", after=at("2027-01-04T10:01:10"), count=1, calendars=calendars, on_excluded="shift"
    )
    assert [o.at for o in found] == [at("2027-01-04T10:02:30")]
    base = lifecycle._parse_schedule("* * * * *", "UTC")
    assert shifted_from(base, calendars, at("2027-01-04T10:02:30"), since=at("2027-01-04T10:01:10")) == (
        at("2027-01-04T10:02:00"),
        "blk",
    )


def test_a_job_created_inside_a_span_runs_at_its_first_occurrence_not_at_the_span_end():
    created = at("2027-01-04T10:00:01")
    job = Job(
        id="j",
        owner="o",
        name="n",
        schedule="@every 30s",
        created_at=created,
        state=JobState.ACTIVE,
        exclude_calendars=("blk",),
        on_excluded="shift",
        target={"type": "http", "url": "https://e.com/"},
    )
    calendars = [span("2027-01-04T10:00:00", "2027-01-04T10:00:08")]
    plan = lifecycle.plan_first(job, created + timedelta(milliseconds=5), calendars=calendars)
    assert plan.scheduled_at == at("2027-01-04T10:00:31")
    # An occurrence of its own inside a span is moved to the span's end, and says where from.
    later = [span("2027-01-04T10:00:20", "2027-01-04T10:00:40")]
    plan = lifecycle.plan_first(job, created + timedelta(milliseconds=5), calendars=later)
    assert plan.scheduled_at == at("2027-01-04T10:00:40")
    assert lifecycle.shift_of_run(job, plan.scheduled_at, later, None).shifted_from == at("2027-01-04T10:00:31")


def test_a_shift_across_chained_calendars_names_the_one_that_excluded_the_occurrence():
    """Christmas in one calendar, Boxing Day in another: the 25th's 09:00 moves past both, and is
    said excluded by the first (it named the calendar holding the span's end)."""
    christmas = build_calendar("xa", {"dates": ["2027-12-25"]})
    boxing_day = build_calendar("xb", {"dates": ["2027-12-26"]})
    base = lifecycle._parse_schedule("0 9 * * *", "UTC")
    assert shifted_from(base, [christmas, boxing_day], at("2027-12-27T00:00:00")) == (at("2027-12-25T09:00:00"), "xa")
    assert shifted_from(base, [boxing_day, christmas], at("2027-12-27T00:00:00")) == (at("2027-12-25T09:00:00"), "xa")


def test_a_day_whose_clocks_turned_back_across_midnight_moves_nothing_backwards():
    """St. John's turned its clocks back at 00:01 until 2010: the second pass of 23:01 to 00:00
    reads the day just excluded, after its end. A span not holding the instant asked about moved
    an occurrence back (shift: 02:45Z to 02:30Z, again and again) or spun for seconds (skip)."""
    from scheduler.schedules import parse_schedule
    from scheduler.schedules.calendars import with_calendars

    closed = build_calendar("c", {"timezone": "America/St_Johns", "dates": ["2010-11-06"]})
    assert closed.piece(at("2010-11-07T02:45:00")) is None  # 23:15, read a second time
    base = parse_schedule("45 2 * * *", "UTC", at("2010-11-01T00:00:00"))
    for mode, expected in (
        ("shift", ["2010-11-07T02:30:00", "2010-11-07T02:45:00", "2010-11-08T02:45:00"]),
        ("skip", ["2010-11-07T02:45:00", "2010-11-08T02:45:00", "2010-11-09T02:45:00"]),
    ):
        schedule, found, t = with_calendars(base, [closed], mode), [], at("2010-11-05T12:00:00")
        for _ in range(3):
            t = schedule.next_after(t)
            found.append(t)
        assert found == [at(e) for e in expected], mode
