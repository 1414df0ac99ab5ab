"""The occurrences a calendar leaves out (``on_excluded: skip``), on record as skipped rows with
``skip_reason: calendar`` and their count (real Postgres, through the API and the runner's
completion): written when a plan moves past them (a creation, a completion, a calendar's
replacement), each once, filterable with ``status=skipped`` and counted in the
``SkippedOccurrences`` metric by the runner. A job under ``shift`` or without calendars records
none."""

from __future__ import annotations

import time as time_module
from datetime import UTC, date, datetime, time, timedelta

from scheduler.core.domain import Outcome
from scheduler.core.timeutil import format_time
from scheduler.runner.executor import Executor, Finished
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import api, box, create, job_body  # noqa: F401 - fixtures


def _skipped(api, job_id: str) -> list[dict]:
    answer = api("GET", f"/v1/jobs/{job_id}/executions", query={"status": "skipped"})
    assert answer.status == 200, answer.body
    return answer.body["executions"]


def test_a_job_every_minute_and_every_second_under_a_calendar_excluding_today(api, store):
    today = store.now().astimezone(UTC).date()
    days = [today.isoformat(), (today + timedelta(days=1)).isoformat()]
    assert api("POST", "/v1/calendars", {"name": "off", "timezone": "UTC", "dates": days}).status == 201
    after = today + timedelta(days=2)
    minutely = create(api, job_body("minutely", schedule="* * * * *", timezone="UTC", exclude_calendars=["off"]))
    assert minutely["next_run_at"] == f"{after}T00:00:00Z"
    [row] = _skipped(api, minutely["id"])
    assert (row["status"], row["skip_reason"], row["trigger"]) == ("skipped", "calendar", "schedule")
    now = store.now()
    first = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert row["scheduled_at"] in (format_time(first - timedelta(minutes=1)), format_time(first))
    left = (after - today).days * 1440 - (first - first.replace(hour=0, minute=0)).total_seconds() // 60
    assert left <= row["skipped_count"] <= left + 1  # the minutes from now to the end of tomorrow

    ticking = create(api, job_body("ticking", schedule="@every 1s", timezone="UTC", exclude_calendars=["off"]))
    [tick] = _skipped(api, ticking["id"])
    # Every second from its creation to the end of tomorrow, counted exactly.
    created = datetime.fromisoformat(ticking["created_at"]).replace(microsecond=0)
    assert tick["skip_reason"] == "calendar" and tick["scheduled_at"] == format_time(created + timedelta(seconds=1))
    assert tick["skipped_count"] == (datetime.combine(after, time(), UTC) - created).total_seconds() - 1
    # Across jobs, status=skipped lists both; shift and no calendar record nothing.
    everywhere = api("GET", "/v1/executions", query={"status": "skipped"}).body["executions"]
    assert {e["job_id"] for e in everywhere} == {minutely["id"], ticking["id"]}
    shifted = create(api, job_body("shifted", schedule="* * * * *", exclude_calendars=["off"], on_excluded="shift"))
    plain = create(api, job_body("plain", schedule="* * * * *"))
    assert _skipped(api, shifted["id"]) == [] and _skipped(api, plain["id"]) == []


def test_a_completion_records_the_excluded_occurrences_it_plans_past_and_counts_them(api, store, pool):
    now = store.now().astimezone(UTC).replace(microsecond=0)
    blackout = {"start": format_time(now + timedelta(minutes=30)), "end": format_time(now + timedelta(minutes=150))}
    api("POST", "/v1/calendars", {"name": "blackout", "timezone": "UTC", "ranges": [blackout]})
    start = now + timedelta(minutes=10)  # occurrences at +10m, +70m, +130m, +190m: two in the blackout
    body = job_body("hourly", schedule="@every 1h", start_at=format_time(start), exclude_calendars=["blackout"])
    job = create(api, body)
    assert job["next_run_at"] == format_time(start) and _skipped(api, job["id"]) == []
    with pool.connection() as conn:  # the occurrence in hand is due now (its own time stays)
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '1 second' WHERE job_id = %s", (job["id"],))
    [claim] = store.claim_and_start(10)
    metrics = MemoryMetrics()
    executor = Executor(store, lambda t: t, TargetPolicy(), metrics)
    ok = Outcome("succeeded", http_status=200)
    executor.record([Finished(claim.job_id, claim.lock_token, claim.started, ok, 0.05)])
    assert api("GET", f"/v1/jobs/{job['id']}").body["next_run_at"] == format_time(start + timedelta(hours=3))
    [row] = _skipped(api, job["id"])
    assert (row["skip_reason"], row["skipped_count"]) == ("calendar", 2)
    assert row["scheduled_at"] == format_time(start + timedelta(hours=1))
    assert metrics.total("SkippedOccurrences", reason="calendar") == 2


def test_a_calendar_replacement_records_what_it_newly_excludes_once(api, store):
    api("POST", "/v1/calendars", {"name": "closures", "timezone": "UTC", "dates": ["2031-01-01"]})
    job = create(api, job_body("daily", schedule="0 9 * * *", timezone="UTC", exclude_calendars=["closures"]))
    assert _skipped(api, job["id"]) == []
    first = job["next_run_at"][:10]  # the date of the occurrence in hand
    day = date.fromisoformat(first)
    dates = [(day + timedelta(days=i)).isoformat() for i in range(2)]
    assert api("PUT", "/v1/calendars/closures", {"timezone": "UTC", "dates": dates}).status == 200
    assert api("GET", f"/v1/jobs/{job['id']}").body["next_run_at"] == f"{day + timedelta(days=2)}T09:00:00Z"
    [row] = _skipped(api, job["id"])
    assert (row["skip_reason"], row["skipped_count"], row["scheduled_at"]) == ("calendar", 2, f"{first}T09:00:00Z")
    # One more day: only that one is new (the two before are on record already).
    dates.append((day + timedelta(days=2)).isoformat())
    assert api("PUT", "/v1/calendars/closures", {"timezone": "UTC", "dates": dates}).status == 200
    rows = sorted(_skipped(api, job["id"]), key=lambda r: r["scheduled_at"])
    assert [(r["skipped_count"], r["scheduled_at"]) for r in rows] == [
        (2, f"{first}T09:00:00Z"),
        (1, f"{day + timedelta(days=2)}T09:00:00Z"),
    ]


# -- an edit of the occurrences: the rows recorded in advance for the old schedule ---------------

_WEEKENDS_ICS = "\r\n".join(
    [
        "BEGIN:VCALENDAR",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20300105",  # a Saturday
        "RRULE:FREQ=WEEKLY;BYDAY=SA,SU",
        "END:VEVENT",
        "END:VCALENDAR",
    ]
)


def _rows(api, job_id: str) -> list[tuple[str, int]]:
    return sorted(
        (r["scheduled_at"], r["skipped_count"]) for r in _skipped(api, job_id) if r["skip_reason"] == "calendar"
    )


def test_an_edit_of_the_schedule_drops_the_old_schedule_s_skips_still_to_come(api):
    """A weekday-only job planned on a Friday evening records the weekend's occurrences at once,
    ahead of their time; an edit of its schedule (or timezone) plans afresh and records the
    weekend of the new schedule: the old schedule's, none of which came to pass, are gone."""
    assert api("POST", "/v1/calendars", {"name": "weekends", "timezone": "UTC", "ics": _WEEKENDS_ICS}).status == 201
    friday_evening = "2030-01-04T19:00:00Z"  # far ahead: every occurrence here is still to come
    body = job_body("weekdays", schedule="0 18 * * *", timezone="UTC", start_at=friday_evening)
    job = create(api, {**body, "exclude_calendars": ["weekends"]})
    assert job["next_run_at"] == "2030-01-07T18:00:00Z"  # Monday
    assert _rows(api, job["id"]) == [("2030-01-05T18:00:00Z", 2)]  # Saturday and Sunday, on record

    edited = api("PATCH", f"/v1/jobs/{job['id']}", {"schedule": "0 9 * * *"})
    assert edited.status == 200 and edited.body["next_run_at"] == "2030-01-07T09:00:00Z", edited.body
    assert _rows(api, job["id"]) == [("2030-01-05T09:00:00Z", 2)]  # the weekend once, as it now is

    # A timezone that moves the next run to Friday evening itself skips nothing (yet).
    moved = api("PATCH", f"/v1/jobs/{job['id']}", {"schedule": "0 18 * * *", "timezone": "America/New_York"})
    assert moved.status == 200 and moved.body["next_run_at"] == "2030-01-04T23:00:00Z", moved.body
    assert _rows(api, job["id"]) == []


def _ticking_through_three_days_off(api, store) -> tuple[dict, datetime, str]:
    """A job every second under a calendar excluding today and the next two days, its row on
    record at once (every second to come), once its first seconds passed (the database's
    clock): the job, its creation to the second, the row's first occurrence."""
    today = store.now().astimezone(UTC).date()
    days = [(today + timedelta(days=i)).isoformat() for i in range(3)]
    assert api("POST", "/v1/calendars", {"name": "off", "timezone": "UTC", "dates": days}).status == 201
    job = create(api, job_body("ticking", schedule="@every 1s", timezone="UTC", exclude_calendars=["off"]))
    created = datetime.fromisoformat(job["created_at"]).replace(microsecond=0)
    [(first, count)] = _rows(api, job["id"])
    assert first == format_time(created + timedelta(seconds=1)) and count > 2 * 86400
    deadline = time_module.monotonic() + 10
    while store.now() < created + timedelta(seconds=2.5):  # the first occurrences pass (the database's clock)
        assert time_module.monotonic() < deadline, "the database's clock did not move"
        time_module.sleep(0.05)
    return job, created, first


def test_an_edit_of_the_schedule_keeps_what_came_to_pass_of_a_row_that_straddles_now(api, store):
    """A row whose first occurrence passed and whose count reaches past now keeps the part that
    came to pass (counted with the schedule as it was), and the new schedule's row begins after
    now: each excluded occurrence on record once."""
    job, created, first = _ticking_through_three_days_off(api, store)

    before = store.now()
    edited = api("PATCH", f"/v1/jobs/{job['id']}", {"schedule": "* * * * *"})
    after = store.now()
    assert edited.status == 200, edited.body
    [(kept_first, kept), (new_first, new_count)] = _rows(api, job["id"])
    assert kept_first == first  # every second from the first up to the edit's now
    assert int((before - created).total_seconds()) <= kept <= int((after - created).total_seconds())
    assert datetime.fromisoformat(new_first) > created + timedelta(seconds=kept)  # no occurrence twice
    end = datetime.combine(created.date() + timedelta(days=3), time(), UTC)
    assert new_count == (end - datetime.fromisoformat(new_first)).total_seconds() // 60


def test_an_edit_that_keeps_the_occurrences_leaves_the_skipped_rows_alone(api, store, pool, monkeypatch):
    """An edit of a field that changes no occurrence (the description), or of a job without
    calendars, reads and writes no skipped row: no statement more than before."""
    assert api("POST", "/v1/calendars", {"name": "weekends", "timezone": "UTC", "ics": _WEEKENDS_ICS}).status == 201
    body = job_body("weekdays", schedule="0 18 * * *", timezone="UTC", start_at="2030-01-04T19:00:00Z")
    job = create(api, {**body, "exclude_calendars": ["weekends"]})
    plain = create(api, job_body("plain", schedule="0 18 * * *", start_at="2030-01-04T19:00:00Z"))
    with pool.connection() as conn:
        recorded = conn.execute("SELECT * FROM executions WHERE job_id = %s", (job["id"],)).fetchall()
    assert len(recorded) == 1

    def refused(*args, **kwargs):
        raise AssertionError("no skipped row is read for this edit")

    monkeypatch.setattr(type(store), "calendar_skips_ahead", refused, raising=False)
    touched = api("PATCH", f"/v1/jobs/{job['id']}", {"description": "touched"})
    assert touched.status == 200 and touched.body["version"] == job["version"] + 1, touched.body
    ended = api("PATCH", f"/v1/jobs/{job['id']}", {"end_at": "2031-01-01T00:00:00Z"})  # the same occurrences
    assert ended.status == 200, ended.body
    assert api("PATCH", f"/v1/jobs/{plain['id']}", {"schedule": "0 9 * * *"}).status == 200
    with pool.connection() as conn:
        assert conn.execute("SELECT * FROM executions WHERE job_id = %s", (job["id"],)).fetchall() == recorded


def test_an_edit_of_the_exclusions_drops_the_skips_recorded_for_the_old_ones(api):
    """Unnaming the calendars, or shifting rather than skipping what they exclude, runs the
    occurrences the rows recorded in advance said were skipped: those rows go (the new plan
    records what its own exclusions leave out, from now), and a later edit finds none left."""
    assert api("POST", "/v1/calendars", {"name": "weekends", "timezone": "UTC", "ics": _WEEKENDS_ICS}).status == 201
    body = job_body("weekdays", schedule="0 18 * * *", timezone="UTC", start_at="2030-01-04T19:00:00Z")
    for change in ({"exclude_calendars": []}, {"on_excluded": "shift"}):
        job = create(
            api, {**body, "name": f"weekdays-{len(change)}-{next(iter(change))}", "exclude_calendars": ["weekends"]}
        )
        assert _rows(api, job["id"]) == [("2030-01-05T18:00:00Z", 2)]
        edited = api("PATCH", f"/v1/jobs/{job['id']}", change)
        assert edited.status == 200, edited.body
        assert _rows(api, job["id"]) == [], change  # the weekend now runs (or is shifted): not skipped
    # Another calendar instead (Sundays only): Saturday runs now, so nothing is skipped before it
    # (Sunday goes on record when Saturday's run plans past it); the old row is gone.
    sundays = _WEEKENDS_ICS.replace("DTSTART;VALUE=DATE:20300105", "DTSTART;VALUE=DATE:20300106").replace("SA,SU", "SU")
    assert api("POST", "/v1/calendars", {"name": "sundays", "timezone": "UTC", "ics": sundays}).status == 201
    job = create(api, {**body, "name": "weekdays-moved", "exclude_calendars": ["weekends"]})
    moved = api("PATCH", f"/v1/jobs/{job['id']}", {"exclude_calendars": ["sundays"]})
    assert moved.status == 200 and moved.body["next_run_at"] == "2030-01-05T18:00:00Z", moved.body
    assert _rows(api, job["id"]) == []


def test_an_end_moved_before_the_occurrence_in_hand_drops_the_skips_past_it(api, store):
    """A job every second under a calendar excluding three days has them on record at once (a
    row counting every second to come); an ``end_at`` moved into the past completes it, and the
    row keeps the seconds that came to pass only (those after will not come). An ``end_at`` past
    the occurrence in hand (the test above: 2031) keeps the row whole."""
    job, created, first = _ticking_through_three_days_off(api, store)

    before = store.now()
    ended = api("PATCH", f"/v1/jobs/{job['id']}", {"end_at": format_time(created)})
    after = store.now()
    assert ended.status == 200 and ended.body["state"] == "completed", ended.body
    [(kept_first, kept)] = _rows(api, job["id"])
    assert kept_first == first  # every second from the first up to the edit's now, no more
    assert int((before - created).total_seconds()) <= kept <= int((after - created).total_seconds())
