"""The occurrences a calendar leaves out, on record (``planning.skips.excluded_between``): counted
span by span, agreeing with a brute-force walk of the base schedule; attached to the plans of a
creation, an edit or a replan, a completion and a resume as one ``calendar`` skip; none without
calendars, nor under ``shift`` but for the occurrences it cannot move (past ``end_at``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core.domain import Job, JobState, Outcome, SkipReason
from scheduler.core.records import RecordedSkip, SkipTrim
from scheduler.planning import lifecycle
from scheduler.planning.skips import COUNT_LIMIT, excluded_between, trimmed_at_replan
from scheduler.schedules import next_occurrence, parse_schedule
from scheduler.schedules.calendars import build_calendar, excluded_span, with_calendars

T0 = datetime(2026, 12, 23, 22, 30, 7, tzinfo=UTC)
HOLIDAYS = build_calendar("holidays", {"timezone": "Europe/London", "dates": ["2026-12-25", "2026-12-26"]})
WEEKENDS = build_calendar(
    "weekends",
    {"timezone": "Europe/Berlin", "ranges": [{"start": "2026-12-26T18:00", "end": "2026-12-28T06:00"}]},
)


def _brute(base, calendars, after, before):
    """(count, first) of the base occurrences in (after, before) a calendar excludes, one by one."""
    found, at = [], after
    while (at := next_occurrence(base, at)) is not None and at < before:
        if excluded_span(calendars, at) is not None:
            found.append(at)
    return len(found), found[0] if found else None


@pytest.mark.parametrize(
    ("expression", "zone"),
    [("*/10 * * * *", "UTC"), ("0 9 * * *", "Europe/London"), ("@every 7m", "UTC"), ("17 */3 * * *", "Asia/Tokyo")],
)
@pytest.mark.parametrize("calendars", [(HOLIDAYS,), (WEEKENDS,), (HOLIDAYS, WEEKENDS)])
def test_the_count_agrees_with_a_brute_force_walk(expression, zone, calendars):
    base = parse_schedule(expression, zone, T0)
    schedule = with_calendars(base, calendars, "skip")
    for after, days in ((T0, 6), (T0 + timedelta(days=1, hours=7), 3), (T0 + timedelta(days=2, minutes=3), 1)):
        before = after + timedelta(days=days)
        count, first = _brute(base, calendars, after, before)
        got = excluded_between(schedule, after, before)
        assert [(s.reason, s.count, s.first) for s in got] == (
            [(SkipReason.CALENDAR, count, first)] if count else []
        ), (after, before)


def test_an_interval_is_counted_exactly_and_a_cron_at_the_limit():
    every = with_calendars(parse_schedule("@every 1s", "UTC", T0), (HOLIDAYS,), "skip")
    [skip] = excluded_between(every, T0, T0 + timedelta(days=30))
    assert skip.count == 2 * 86400 and skip.first == datetime(2026, 12, 25, tzinfo=UTC)
    yearly = build_calendar(
        "all-of-2027", {"timezone": "UTC", "ranges": [{"start": "2027-01-01", "end": "2027-12-31"}]}
    )
    minutely = with_calendars(parse_schedule("* * * * *", "UTC", T0), (yearly,), "skip")
    [capped] = excluded_between(minutely, T0, datetime(2028, 1, 2, tzinfo=UTC))
    assert capped.count == COUNT_LIMIT


def test_nothing_under_shift_or_without_calendars():
    base = parse_schedule("0 9 * * *", "Europe/London", T0)
    end = T0 + timedelta(days=5)
    assert excluded_between(with_calendars(base, (HOLIDAYS,), "shift"), T0, end) == ()
    assert excluded_between(base, T0, end) == ()


def test_a_shift_past_end_at_records_the_occurrences_it_could_not_move():
    """Under ``shift``, an excluded occurrence whose span ends past ``end_at`` has no allowed time
    to move to: it does not run, and was lost without a row; it is on record now, as under skip."""
    ran = datetime(2026, 12, 24, 9, tzinfo=UTC)
    end_at = datetime(2026, 12, 26, 12, tzinfo=UTC)  # the holidays end at the 27th's midnight
    job = _job("0 9 * * *", scheduled_at=ran, next_run_at=ran, attempt=1, on_excluded="shift", end_at=end_at)
    now = ran + timedelta(seconds=2)
    plan = lifecycle.plan_completion(job, Outcome("succeeded"), now, None, ran, [HOLIDAYS], now)
    assert plan.state == JobState.COMPLETED
    assert [(s.reason, s.count, s.first) for s in plan.skips] == [
        (SkipReason.CALENDAR, 2, datetime(2026, 12, 25, 9, tzinfo=UTC))
    ]
    # Within the window, the shift runs them at the span's end: nothing on record.
    later = _job("0 9 * * *", scheduled_at=ran, next_run_at=ran, attempt=1, on_excluded="shift")
    moved = lifecycle.plan_completion(later, Outcome("succeeded"), now, None, ran, [HOLIDAYS], now)
    assert moved.scheduled_at == datetime(2026, 12, 27, tzinfo=UTC) and moved.skips == ()


def _job(schedule: str, **fields) -> Job:
    values = {
        "id": "j",
        "owner": "alice",
        "schedule": schedule,
        "timezone": "Europe/London",
        "created_at": T0 - timedelta(days=1),
        "state": JobState.ACTIVE,
        "exclude_calendars": ("holidays",),
        "on_excluded": "skip",
        "missed_runs": "skip",
    }
    return Job(**{**values, **fields})


def test_a_new_job_records_the_occurrences_before_its_first_allowed_one():
    now = datetime(2026, 12, 24, 23, 50, 30, tzinfo=UTC)  # after the last occurrence before Christmas
    plan = lifecycle.plan_first(_job("*/15 * * * *"), now, calendars=[HOLIDAYS])
    assert plan.scheduled_at == datetime(2026, 12, 27, tzinfo=UTC)
    # The 25th and the 26th are excluded: 96 occurrences a day.
    [skip] = plan.skips
    assert (skip.reason, skip.count, skip.first) == (SkipReason.CALENDAR, 2 * 96, datetime(2026, 12, 25, tzinfo=UTC))
    # Nothing excluded before the first one: no skip at all.
    assert lifecycle.plan_first(_job("*/15 * * * *"), T0, calendars=[HOLIDAYS]).skips == ()


def test_a_replan_records_only_from_the_occurrence_it_had_in_hand():
    job = _job("0 9 * * *")
    now = datetime(2026, 12, 23, 12, tzinfo=UTC)
    first = lifecycle.plan_first(job, now, calendars=[HOLIDAYS])
    assert first.scheduled_at == datetime(2026, 12, 24, 9, tzinfo=UTC) and first.skips == ()
    more = build_calendar(
        "holidays", {"timezone": "Europe/London", "dates": ["2026-12-24", "2026-12-25", "2026-12-26"]}
    )
    replanned = lifecycle.plan_first(job, now, calendars=[more], recorded_until=first.scheduled_at)
    [skip] = replanned.skips
    assert (skip.count, skip.first, replanned.scheduled_at) == (
        3,
        datetime(2026, 12, 24, 9, tzinfo=UTC),
        datetime(2026, 12, 27, 9, tzinfo=UTC),
    )


def test_a_completion_records_the_excluded_days_it_plans_past_and_a_plain_job_none():
    ran = datetime(2026, 12, 24, 9, tzinfo=UTC)
    job = _job("0 9 * * *", scheduled_at=ran, next_run_at=ran, attempt=1)
    now = ran + timedelta(seconds=2)
    plan = lifecycle.plan_completion(job, Outcome("succeeded"), now, None, ran, [HOLIDAYS], now)
    assert plan.scheduled_at == datetime(2026, 12, 27, 9, tzinfo=UTC)
    assert [(s.reason, s.count, s.first) for s in plan.skips] == [
        (SkipReason.CALENDAR, 2, datetime(2026, 12, 25, 9, tzinfo=UTC))
    ]
    plain = _job("0 9 * * *", scheduled_at=ran, next_run_at=ran, attempt=1, exclude_calendars=())
    assert lifecycle.plan_completion(plain, Outcome("succeeded"), now, None, ran, (), now).skips == ()


def test_a_late_completion_records_missed_and_calendar_apart():
    ran = datetime(2026, 12, 23, 9, tzinfo=UTC)  # ran on the 23rd, completed on the 28th at noon
    job = _job("0 9 * * *", scheduled_at=ran, next_run_at=ran, attempt=1)
    now = datetime(2026, 12, 28, 12, tzinfo=UTC)
    plan = lifecycle.plan_completion(job, Outcome("succeeded"), now, None, ran, [HOLIDAYS], ran + timedelta(seconds=1))
    assert plan.scheduled_at == datetime(2026, 12, 29, 9, tzinfo=UTC)
    counts = {s.reason: s.count for s in plan.skips}
    assert counts == {SkipReason.OVERLAP: 3, SkipReason.CALENDAR: 2}  # the 24th, 27th, 28th; the 25th, 26th


def test_a_resume_records_the_excluded_ones_apart_from_the_paused_ones():
    pending = datetime(2026, 12, 24, 9, tzinfo=UTC)
    job = _job("0 9 * * *", state=JobState.PAUSED, scheduled_at=pending, next_run_at=pending)
    plan = lifecycle.plan_resume(job, datetime(2026, 12, 27, 12, tzinfo=UTC), calendars=[HOLIDAYS])
    counts = {s.reason: s.count for s in plan.skips}
    assert counts == {SkipReason.PAUSED: 2, SkipReason.CALENDAR: 2}  # the 24th and 27th; the 25th, 26th


def test_an_edit_replanning_from_now_keeps_what_came_to_pass_of_the_rows_recorded_in_advance():
    """``trimmed_at_replan``: an hourly job excluding a weekend (Saturday 26 December 18:00 to
    Monday 06:00, Berlin), its 36 hours there on record as one row on Friday, edited on Sunday
    at 12:30 Berlin: the row keeps the hours up to now (18:00 Saturday to 12:00 Sunday: 19); a row
    still to come is dropped; one over before now stays as it is."""
    hourly = with_calendars(parse_schedule("0 * * * *", "Europe/Berlin", T0), (WEEKENDS,), "skip")
    first = datetime(2026, 12, 26, 17, tzinfo=UTC)  # 18:00 Berlin
    now = datetime(2026, 12, 27, 11, 30, tzinfo=UTC)  # Sunday 12:30 Berlin
    recorded_at = datetime(2026, 12, 25, 20, tzinfo=UTC)
    straddling = RecordedSkip("a", recorded_at, first, 36)
    ahead = RecordedSkip("b", recorded_at, now + timedelta(days=7), 36)
    past = RecordedSkip("c", recorded_at, first - timedelta(days=7), 36)
    assert trimmed_at_replan(hourly, [straddling, ahead, past], now) == (SkipTrim(straddling, 19), SkipTrim(ahead, 0))
    # Never more than the row had.
    assert trimmed_at_replan(hourly, [RecordedSkip("d", recorded_at, first, 5)], now) == ()
    # Calendars edited since (or gone): the schedule's occurrences from the row's first are
    # counted, as a row counts them one after the other.
    plain = parse_schedule("0 * * * *", "Europe/Berlin", T0)
    assert trimmed_at_replan(plain, [straddling, ahead], now) == (SkipTrim(straddling, 19), SkipTrim(ahead, 0))
    a_later_day = build_calendar("later", {"timezone": "Europe/London", "dates": ["2026-12-28"]})
    moved = with_calendars(plain, (a_later_day,), "skip")  # no longer excludes the row's first
    assert trimmed_at_replan(moved, [straddling], now) == (SkipTrim(straddling, 19),)
    # Fewer of the row's span excluded than the schedule has (some allowed between, missed
    # meanwhile): those its calendars still exclude, when they exclude its first.
    holidays = with_calendars(plain, (HOLIDAYS,), "skip")  # 25 and 26 December, London
    row = RecordedSkip("f", recorded_at, datetime(2026, 12, 25, 0, tzinfo=UTC), 70)
    assert trimmed_at_replan(holidays, [row], datetime(2026, 12, 27, 11, tzinfo=UTC)) == (SkipTrim(row, 48),)


def test_a_row_whose_occurrences_lie_apart_keeps_those_its_calendars_excluded_up_to_now():
    """A row may count excluded occurrences that lie apart (between them, allowed ones that were
    missed or overlapped, on record as rows of their own): what came to pass of it is counted as
    the row counted, by its calendars, not by every occurrence of the base schedule since its first."""
    spans = build_calendar(
        "spans",
        {
            "timezone": "UTC",
            "ranges": [
                {"start": "2026-12-26T12:00", "end": "2026-12-26T12:03"},
                {"start": "2026-12-26T12:10", "end": "2026-12-26T12:14"},
            ],
        },
    )
    minutely = with_calendars(parse_schedule("* * * * *", "UTC", T0), (spans,), "skip")
    first = datetime(2026, 12, 26, 12, tzinfo=UTC)
    row = RecordedSkip("a", first - timedelta(hours=1), first, 7)  # 12:00-12:02 and 12:10-12:13
    now = datetime(2026, 12, 26, 12, 11, 30, tzinfo=UTC)
    assert trimmed_at_replan(minutely, [row], now) == (SkipTrim(row, 5),)  # 12:00-12:02, 12:10, 12:11


@pytest.mark.parametrize("on_excluded", ["skip", "shift"])
def test_a_resume_that_completes_the_job_records_the_excluded_ones_up_to_end_at(on_excluded):
    pending = datetime(2026, 12, 24, 9, tzinfo=UTC)
    job = _job(
        "0 9 * * *",
        state=JobState.PAUSED,
        scheduled_at=pending,
        next_run_at=pending,
        on_excluded=on_excluded,
        end_at=datetime(2026, 12, 26, 12, tzinfo=UTC),
    )
    plan = lifecycle.plan_resume(job, datetime(2026, 12, 25, 10, tzinfo=UTC), calendars=[HOLIDAYS])
    assert plan.state == JobState.COMPLETED
    counts = {s.reason: s.count for s in plan.skips}
    assert counts == {SkipReason.PAUSED: 1, SkipReason.CALENDAR: 2}  # the 24th; the 25th and the 26th


def test_a_job_its_calendars_leave_no_run_before_its_end_at_is_refused_naming_end_at():
    from scheduler.calendar_service import refuse_a_schedule_left_without_runs
    from scheduler.schedules.base import ScheduleError

    now = datetime(2026, 12, 24, 23, 0, tzinfo=UTC)
    job = _job("0 9 * * *", on_excluded="shift", end_at=datetime(2026, 12, 26, 12, tzinfo=UTC), created_at=now)
    plan = lifecycle.plan_first(job, now, calendars=[HOLIDAYS])
    assert plan.state == JobState.COMPLETED and [s.reason for s in plan.skips] == [SkipReason.CALENDAR]
    with pytest.raises(ScheduleError, match="leave no run of the schedule before its end_at"):
        refuse_a_schedule_left_without_runs(job, plan, now, [HOLIDAYS])
