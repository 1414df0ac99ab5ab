"""Calendars through the API (on real Postgres), in the jobs' planning, in the preview, and in both
runner paths (local mode's claim-and-start, the deployment's claim then start), with a real HTTP
target on loopback."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from scheduler import service
from scheduler.api.app import make_app
from scheduler.core.domain import Claim, JobState, LeaseKind, Plan
from scheduler.core.errors import CalendarInUse, ScheduleError
from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.secrets import LocalSecretBox
from scheduler.settings import Settings
from scheduler.sql import QUERIES
from scheduler.store.rows import plan_params as _plan_params
from scheduler.store.rows import spec_params as _spec_params
from scheduler.store.skips import skips_param
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import ALICE, BOB, Client, job_body
from tests.support import http_spec, insert_due_jobs, make_due, poll

UK_ICS = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//uk.gov//EN\r\n"
    "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nDTEND;VALUE=DATE:20261226\r\nSUMMARY:Christmas Day\r\nEND:VEVENT\r\n"
    "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261228\r\nDTEND;VALUE=DATE:20261229\r\nSUMMARY:Boxing Day\r\nEND:VEVENT\r\n"
    "END:VCALENDAR\r\n"
)
LOCAL = TargetPolicy(allow_private=True)


@pytest.fixture
def api(store, tmp_path):
    box = LocalSecretBox(tmp_path / "secret.key")
    return Client(make_app(lambda: store, lambda: box, Settings()).resolve)


def test_calendar_resource_crud_and_owner_scoping(api):
    body = {"name": "uk-holidays", "timezone": "Europe/London", "dates": ["2026-12-25"], "yearly": ["01-01"]}
    created = api("POST", "/v1/calendars", body)
    assert created.status == 201, created.body
    assert created.headers["Location"] == "/prod/v1/calendars/uk-holidays"
    assert created.body["version"] == 1 and created.body["dates"] == ["2026-12-25"]
    assert api("POST", "/v1/calendars", body).status == 409
    assert api("POST", "/v1/calendars", {"name": "uk-ics", "timezone": "Europe/London", "ics": UK_ICS}).status == 201
    listed = api("GET", "/v1/calendars", query={"limit": 1})
    assert [c["name"] for c in listed.body["calendars"]] == ["uk-holidays"]
    second = api("GET", "/v1/calendars", query={"cursor": listed.body["next_cursor"]})
    assert [c["name"] for c in second.body["calendars"]] == ["uk-ics"] and second.body["next_cursor"] is None
    assert api("GET", "/v1/calendars/uk-ics").body["ics"] == UK_ICS
    assert api("GET", "/v1/calendars/uk-holidays", principal=BOB).status == 404
    assert api("GET", "/v1/calendars", principal=BOB).body["calendars"] == []
    assert api("DELETE", "/v1/calendars/uk-ics", principal=BOB).status == 404
    replaced = api(
        "PUT",
        "/v1/calendars/uk-holidays",
        {"timezone": "UTC", "ranges": [{"start": "2026-12-24", "end": "2026-12-26"}]},
    )
    assert replaced.status == 200 and replaced.body["version"] == 2 and "dates" not in replaced.body
    assert api("PUT", "/v1/calendars/nope", {"dates": []}).status == 404
    assert api("DELETE", "/v1/calendars/uk-ics").status == 204
    assert api("GET", "/v1/calendars/uk-ics").status == 404


def test_a_replace_with_if_match_writes_only_the_version_named(api):
    assert api("POST", "/v1/calendars", {"name": "closures", "dates": ["2026-12-25"]}).status == 201
    path = "/v1/calendars/closures"
    replaced = api("PUT", path, {"dates": ["2026-12-26"]}, headers={"If-Match": '"1"'})
    assert replaced.status == 200 and replaced.body["version"] == 2 and replaced.headers["ETag"] == '"2"'
    # A writer that read version 1 is refused, told the current version, and changes nothing.
    stale = api("PUT", path, {"dates": ["2027-01-01"]}, headers={"If-Match": "1"})
    assert stale.status == 412 and stale.body["error"]["code"] == "version_mismatch", stale.body
    assert stale.fields == ["If-Match"] and stale.headers["ETag"] == '"2"'
    assert "calendar" in stale.body["error"]["message"]
    assert api("GET", path).body["dates"] == ["2026-12-26"]
    assert api("PUT", path, {"dates": []}, headers={"If-Match": "*"}).body["version"] == 3  # any version
    assert api("PUT", path, {"dates": []}, headers={"If-Match": "three"}).fields == ["If-Match"]
    # An absent calendar is absent whatever If-Match says; another owner's is absent too.
    assert api("PUT", "/v1/calendars/nope", {"dates": []}, headers={"If-Match": "1"}).status == 404
    assert api("PUT", path, {"dates": []}, headers={"If-Match": "3"}, principal=BOB).status == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "c", "dates": ["2026-02-30"]}, "dates.0"),
        ({"name": "c", "dates": "2026-02-01"}, "dates"),
        ({"name": "c", "yearly": ["1225"]}, "yearly.0"),
        ({"name": "c", "ranges": [{"start": "2026-12-24"}]}, "ranges.0.end"),
        ({"name": "c", "timezone": "Mars/Olympus"}, "timezone"),
        (
            {
                "name": "c",
                "ics": "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20260101\nRRULE:FREQ=HOURLY\nEND:VEVENT\nEND:VCALENDAR",
            },
            "ics",
        ),
        ({"name": "c", "ics": UK_ICS, "dates": ["2026-01-01"]}, "ics"),
        ({"name": "-c"}, "name"),
        ({"name": "c", "dates": ["2026-01-01"] * 1001}, "dates"),
    ],
)
def test_bad_calendars_are_400_naming_the_field(api, body, field):
    answer = api("POST", "/v1/calendars", body)
    assert answer.status == 400, answer.body
    assert field in answer.fields, answer.body
    if field == "ics" and "RRULE" in body.get("ics", ""):
        assert "FREQ=HOURLY" in answer.body["error"]["message"] + str(answer.body["error"]["details"])
    # The message reads after its field, which it does not repeat ("dates.0: must be ...").
    for detail in answer.body["error"]["details"]:
        assert not detail["message"].startswith(detail["field"]), detail
    assert answer.body["error"]["message"].count(f"{answer.fields[0]}:") == 1, answer.body


def test_a_job_skips_or_shifts_and_a_calendar_in_use_cannot_be_deleted(api):
    api("POST", "/v1/calendars", {"name": "uk", "timezone": "Europe/London", "ics": UK_ICS})
    unknown = api("POST", "/v1/jobs", job_body("j0", exclude_calendars=["nope"]))
    assert unknown.status == 400 and unknown.fields == ["exclude_calendars.0"]
    one_off = api(
        "POST", "/v1/jobs", job_body("j1", schedule=None, run_at="2026-12-25T09:00:00Z", exclude_calendars=["uk"])
    )
    assert one_off.status == 400 and "exclude_calendars" in one_off.fields
    base = {"schedule": "0 9 * * *", "timezone": "Europe/London", "start_at": "2026-12-24T10:00:00Z"}
    skip = api("POST", "/v1/jobs", job_body("skipper", **base, exclude_calendars=["uk"]))
    assert skip.status == 201, skip.body
    assert skip.body["exclude_calendars"] == ["uk"] and skip.body["on_excluded"] == "skip"
    assert skip.body["next_run_at"] == "2026-12-26T09:00:00Z"
    shift = api("POST", "/v1/jobs", job_body("shifter", **base, exclude_calendars=["uk"], on_excluded="shift"))
    assert shift.body["next_run_at"] == "2026-12-26T00:00:00Z"

    in_use = api("DELETE", "/v1/calendars/uk")
    assert in_use.status == 409 and in_use.error["code"] == "calendar_in_use"
    assert "shifter" in in_use.error["message"] and "skipper" in in_use.error["message"]
    assert {d["message"] for d in in_use.error["details"]} == {
        f"shifter ({shift.body['id']})",
        f"skipper ({skip.body['id']})",
    }
    # A calendar change replans the jobs that name it.
    changed = api("PUT", "/v1/calendars/uk", {"timezone": "Europe/London", "dates": ["2026-12-26"]})
    assert changed.status == 200
    assert api("GET", f"/v1/jobs/{skip.body['id']}").body["next_run_at"] == "2026-12-25T09:00:00Z"
    # An edit of on_excluded replans too; a PATCH removing the calendar frees it.
    patched = api("PATCH", f"/v1/jobs/{skip.body['id']}", {"start_at": "2026-12-25T10:00:00Z", "on_excluded": "shift"})
    assert patched.body["next_run_at"] == "2026-12-27T00:00:00Z"
    for job in (skip.body, shift.body):
        assert api("PATCH", f"/v1/jobs/{job['id']}", {"exclude_calendars": []}).status == 200
    assert api("DELETE", "/v1/calendars/uk").status == 204


def test_a_calendar_that_would_stop_a_paused_job_is_refused_too(api):
    """A replacement that leaves a job no run in 50 years is refused: an active job's was, and a
    paused one's was completed for good (its resume found it completed)."""
    api("POST", "/v1/calendars", {"name": "blk", "dates": ["2030-01-01"]})
    job = api("POST", "/v1/jobs", job_body("paused-blk", schedule="0 9 * * *", exclude_calendars=["blk"])).body
    assert api("POST", f"/v1/jobs/{job['id']}/pause").status == 200
    everything = {"ranges": [{"start": "2020-01-01", "end": "9998-12-31"}]}
    refused = api("PUT", "/v1/calendars/blk", everything)
    assert refused.status == 400 and "paused-blk" in refused.error["message"], refused.body
    after = api("GET", f"/v1/jobs/{job['id']}").body
    assert after["state"] == "paused" and after["next_run_at"] == job["next_run_at"]
    assert api("GET", "/v1/calendars/blk").body["version"] == 1


def test_a_calendar_replacement_replans_every_job_that_names_it(api, store, pool):
    """Not the first 1,000 only: each job naming it moves off the day it now excludes."""
    insert_due_jobs(pool, 1003, owner=ALICE, prefix="many", due_offset_seconds=86400, schedule="0 0 1 1 *")
    api("POST", "/v1/calendars", {"name": "big", "dates": ["2030-01-01"]})
    with pool.connection() as conn:
        conn.execute("UPDATE job_specs SET exclude_calendars = '{big}' WHERE owner = %s", (ALICE,))
    next_new_year = datetime(store.now().year + 1, 1, 1, tzinfo=UTC)
    answer = api("PUT", "/v1/calendars/big", {"dates": [next_new_year.date().isoformat()]})
    assert answer.status == 200, answer.body
    with pool.connection() as conn:
        moved = conn.execute(
            "SELECT count(*) AS n FROM job_runs r JOIN job_specs s ON s.id = r.job_id"
            " WHERE s.owner = %s AND r.next_run_at = %s",
            (ALICE, next_new_year.replace(year=next_new_year.year + 1)),
        ).fetchone()["n"]
    assert moved == 1003


def test_preview_applies_calendars_and_explains(api):
    api("POST", "/v1/calendars", {"name": "uk", "timezone": "Europe/London", "ics": UK_ICS})
    preview = {
        "schedule": "0 9 * * *",
        "timezone": "Europe/London",
        "after": "2026-12-24T10:00:00Z",
        "count": 3,
        "exclude_calendars": ["uk"],
    }
    plain = api("POST", "/v1/schedules/preview", preview)
    assert plain.body == {"occurrences": ["2026-12-26T09:00:00Z", "2026-12-27T09:00:00Z", "2026-12-29T09:00:00Z"]}
    explained = api("POST", "/v1/schedules/preview", {**preview, "explain": True})
    assert explained.body["occurrences"] == [
        {"expression": "0 9 * * *", "spread_seconds": 0, "at": "2026-12-25T09:00:00Z", "excluded_by": "uk"},
        {"expression": "0 9 * * *", "spread_seconds": 0, "at": "2026-12-26T09:00:00Z"},
        {"expression": "0 9 * * *", "spread_seconds": 0, "at": "2026-12-27T09:00:00Z"},
        {"expression": "0 9 * * *", "spread_seconds": 0, "at": "2026-12-28T09:00:00Z", "excluded_by": "uk"},
        {"expression": "0 9 * * *", "spread_seconds": 0, "at": "2026-12-29T09:00:00Z"},
    ]
    shifted = api("POST", "/v1/schedules/preview", {**preview, "explain": True, "on_excluded": "shift", "count": 2})
    assert shifted.body["occurrences"] == [
        {
            "expression": "0 9 * * *",
            "spread_seconds": 0,
            "at": "2026-12-26T00:00:00Z",
            "shifted_from": "2026-12-25T09:00:00Z",
            "excluded_by": "uk",
        },
        {"expression": "0 9 * * *", "spread_seconds": 0, "at": "2026-12-26T09:00:00Z"},
    ]
    missing = api("POST", "/v1/schedules/preview", {**preview, "exclude_calendars": ["nope"]})
    assert missing.status == 400 and missing.fields == ["exclude_calendars.0"]
    other = api("POST", "/v1/schedules/preview", preview, principal=BOB)
    assert other.status == 400  # Bob has no calendar "uk"
    no_calendar = api(
        "POST",
        "/v1/schedules/preview",
        {"schedule": "@daily", "count": 1, "explain": True, "after": "2026-12-24T10:00:00Z"},
    )
    assert no_calendar.body == {
        "occurrences": [{"at": "2026-12-25T00:00:00Z", "expression": "@daily", "spread_seconds": 0}]
    }


def test_calendars_with_several_expressions_and_a_spread(api):
    """A calendar applies to the occurrences of a union; the spread then moves each that runs:
    the preview names the expression, the offset and the calendar of each time."""
    api("POST", "/v1/calendars", {"name": "xmas", "timezone": "Europe/London", "dates": ["2026-12-25"]})
    job_id = "6f1c2a9e-3d0b-4f5e-9a61-0c2b7d4e8f10"
    preview = {
        "schedules": ["0 9 * * *", "30 17 * * *"],
        "timezone": "Europe/London",
        "spread": {"window_seconds": 600, "mode": "stable"},
        "job_id": job_id,
        "exclude_calendars": ["xmas"],
        "after": "2026-12-24T12:00:00Z",
        "count": 3,
        "explain": True,
    }
    items = api("POST", "/v1/schedules/preview", preview).body["occurrences"]
    offset = items[0]["spread_seconds"]
    assert 0 <= offset < 600 and all(item["spread_seconds"] in (0, offset) for item in items)
    ran = [item for item in items if "excluded_by" not in item]
    left_out = [item for item in items if "excluded_by" in item]
    assert [item["expression"] for item in ran] == ["30 17 * * *", "0 9 * * *", "30 17 * * *"]
    assert all(item["spread_seconds"] == offset for item in ran)
    assert ran[1]["at"].startswith("2026-12-26T09:") and ran[2]["at"].startswith("2026-12-26T17:")
    assert [(item["at"], item["excluded_by"]) for item in left_out] == [
        ("2026-12-25T09:00:00Z", "xmas"),
        ("2026-12-25T17:30:00Z", "xmas"),
    ]
    assert [item["expression"] for item in left_out] == ["0 9 * * *", "30 17 * * *"]


def _blackout(store, minutes_from: int, minutes_to: int) -> tuple[datetime, datetime]:
    now = store.now().astimezone(UTC).replace(second=0, microsecond=0)
    return now + timedelta(minutes=minutes_from), now + timedelta(minutes=minutes_to)


def _calendar_job(store, name: str, url: str, mode: str) -> tuple[str, datetime, datetime]:
    start, end = _blackout(store, 30, 180)
    span = {"start": start.isoformat(), "end": end.isoformat()}
    try:
        service.create_calendar(store, ALICE, "blackout", {"timezone": "UTC", "ranges": [span]})
    except Exception:
        pass
    # Anchored 10 minutes ago: the occurrence after one run now is 50 minutes ahead, in the blackout.
    anchor = start - timedelta(minutes=40)
    spec = http_spec(name, "@every 1h", url=url, start_at=anchor, exclude_calendars=["blackout"], on_excluded=mode)
    job = service.create_job(store, ALICE, spec)
    return str(job.id), start, end


def _expected(job, end: datetime, mode: str) -> datetime:
    """The next occurrence after one run now: start_at + 1h is in the blackout."""
    if mode == "shift":
        return end
    at = job.start_at + timedelta(hours=1)
    while at < end:
        at += timedelta(hours=1)
    return at


@pytest.mark.parametrize("mode", ["skip", "shift"])
def test_local_runner_plans_the_next_time_with_the_calendar(store, pool, target_server, mode):
    job_id, _, end = _calendar_job(store, f"local-{mode}", target_server.url + "/hook", mode)
    make_due(pool, job_id)
    invoker = InProcessDispatch(Executor(store, lambda t: t, LOCAL), max_workers=2)
    run_fanout(store, invoker, budget_seconds=0)
    invoker.close()
    target_server.wait_for(1)
    job = store.get_job(ALICE, job_id)
    assert job.run_count == 1
    assert job.next_run_at == _expected(job, end, mode)


@pytest.mark.parametrize("mode", ["skip", "shift"])
def test_deployed_executor_plans_the_next_time_with_the_calendar(store, pool, target_server, mode):
    job_id, _, end = _calendar_job(store, f"deployed-{mode}", target_server.url + "/hook", mode)
    make_due(pool, job_id)
    [claim] = store.claim_due(10, 60)
    report = Executor(store, lambda t: t, LOCAL).run(Claim.from_event(claim.to_event()))
    assert report is not None
    target_server.wait_for(1)
    job = store.get_job(ALICE, job_id)
    assert job.run_count == 1 and claim.lease_kind == LeaseKind.SCHEDULE
    assert job.next_run_at == _expected(job, end, mode)


@pytest.mark.parametrize("runner", ["local", "deployed"])
def test_an_execution_of_a_shifted_occurrence_records_where_from(api, store, pool, target_server, runner):
    """The history says why a run came at an odd time: the occurrence a calendar moved it from
    (the first one of the schedule in the excluded span) and the calendar, as the preview does;
    a run at an occurrence of the schedule itself says nothing of the kind."""
    job_id, start, end = _calendar_job(store, f"shifted-{runner}", target_server.url + "/hook", "shift")

    def run_due() -> None:
        if runner == "local":
            invoker = InProcessDispatch(Executor(store, lambda t: t, LOCAL), max_workers=2)
            run_fanout(store, invoker, budget_seconds=0)
            invoker.close()
        else:
            [claim] = store.claim_due(10, 60)
            assert Executor(store, lambda t: t, LOCAL).run(Claim.from_event(claim.to_event())) is not None

    make_due(pool, job_id)
    run_due()
    assert store.get_job(ALICE, job_id).scheduled_at == end  # the occurrence in hand: shifted
    with pool.connection() as conn:  # its time has come (the occurrence stays the shifted one)
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '1 second' WHERE job_id = %s", (job_id,))
    run_due()
    target_server.wait_for(2)
    answer = api("GET", f"/v1/jobs/{job_id}/executions")
    assert answer.status == 200, answer.body
    shifted, plain = answer.body["executions"]
    moved_from = store.get_job(ALICE, job_id).start_at + timedelta(hours=1)  # the first in the blackout
    assert start <= moved_from < end
    assert shifted["scheduled_at"] == end.isoformat().replace("+00:00", "Z")
    assert (shifted["shifted_from"], shifted["excluded_by"]) == (
        moved_from.isoformat().replace("+00:00", "Z"),
        "blackout",
    )
    assert plain["shifted_from"] is None and plain["excluded_by"] is None


def test_resume_applies_the_calendar(store, pool):
    job_id, _, end = _calendar_job(store, "resumed", "https://example.com/hook", "shift")
    job = service.pause_job(store, ALICE, job_id)
    with pool.connection() as conn:  # paused at an occurrence before now (the time it was created)
        conn.execute(
            "UPDATE job_runs SET scheduled_at = %s, next_run_at = %s WHERE job_id = %s",
            (job.created_at, job.created_at, job_id),
        )
    # Nothing was missed: the occurrence after it (start_at + 1h) is in the blackout: shifted.
    assert service.resume_job(store, ALICE, job_id).scheduled_at == end


def _waiting(pool) -> bool:
    """Whether some session waits for a lock (the statement under test is blocked)."""
    with pool.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM pg_locks WHERE NOT granted").fetchone()["n"] > 0


def test_a_job_and_a_delete_of_its_calendar_at_once(store, pool, db_url):
    """The delete holds the calendar while it looks for jobs, a job's write holds the calendars it
    names: whichever comes second sees the first (no job is left naming a deleted calendar)."""
    service.create_calendar(store, ALICE, "doomed", {"dates": ["2026-12-25"]})
    spec = http_spec("racer", "@daily", exclude_calendars=["doomed"])
    outcome: list[BaseException | object] = []
    # A delete under way: the calendar held, its jobs read (none yet); the create waits for it.
    with psycopg.connect(db_url, row_factory=dict_row) as deleting:
        deleting.execute(QUERIES["lock_calendar"], {"owner": ALICE, "name": "doomed"})

        def create() -> None:
            try:
                outcome.append(service.create_job(store, ALICE, spec))
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=create)
        worker.start()
        poll(lambda: _waiting(pool), what="the job's write waiting for the calendar")
        deleting.execute(QUERIES["delete_calendar"], {"owner": ALICE, "name": "doomed"})
        deleting.commit()
        worker.join(30)
    [refused] = outcome
    assert isinstance(refused, ScheduleError) and refused.field == "exclude_calendars.0"
    assert store.list_jobs(ALICE) == []

    # The other order: a job's write (hold_calendars, then insert_job, as Store.insert_job does in
    # one transaction) holds the calendar; the delete waits for it, then finds the job: 409.
    service.create_calendar(store, ALICE, "kept", {"dates": ["2026-12-25"]})
    params = {
        **_spec_params(http_spec("holder", "@daily", exclude_calendars=["kept"])),
        **_plan_params(Plan(JobState.ACTIVE, None, 0, None)),
        "id": "0b6f6c5e-3c1a-4e8e-9d55-0f0f0f0f0f0a",
        "owner": ALICE,
        "created_at": store.now(),
        "skips": skips_param(()),
    }
    errors: list[BaseException] = []
    with psycopg.connect(db_url, row_factory=dict_row) as writing:
        assert len(writing.execute(QUERIES["hold_calendars"], {"owner": ALICE, "names": ["kept"]}).fetchall()) == 1

        def delete() -> None:
            try:
                store.delete_calendar(ALICE, "kept")
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=delete)
        worker.start()
        poll(lambda: _waiting(pool), what="the delete waiting for the job's write")
        writing.execute(QUERIES["insert_job"], params)
        writing.commit()
        worker.join(30)
    [in_use] = errors
    assert isinstance(in_use, CalendarInUse) and in_use.jobs == [(params["id"], "holder")]


def test_an_ics_calendar_with_byday_exdate_and_a_timed_window_through_the_api(api):
    ics = "\r\n".join(
        [
            "BEGIN:VCALENDAR",
            "BEGIN:VEVENT",
            "DTSTART;VALUE=DATE:20260103",
            "RRULE:FREQ=WEEKLY;BYDAY=SA,SU",
            "EXDATE;VALUE=DATE:20270103",
            "END:VEVENT",
            "BEGIN:VEVENT",
            "DTSTART;TZID=Europe/London:20261230T080000",
            "DURATION:PT2H",
            "RRULE:FREQ=MONTHLY;BYDAY=-1WE",
            "END:VEVENT",
            "END:VCALENDAR",
        ]
    )
    assert api("POST", "/v1/calendars", {"name": "weekends", "timezone": "Europe/London", "ics": ics}).status == 201
    body = job_body("weekdays", schedule="0 9 * * *", timezone="Europe/London", start_at="2027-01-01T10:00:00Z")
    job = api("POST", "/v1/jobs", {**body, "exclude_calendars": ["weekends"]}).body
    # Saturday 2 January is a weekend day; Sunday 3 January is an exception to the rule.
    assert job["next_run_at"] == "2027-01-03T09:00:00Z"
    # The last Wednesday of January, 08:00 to 10:00 London: its 09:00 left out, and said why.
    preview = {"schedule": "0 9 * * *", "timezone": "Europe/London", "exclude_calendars": ["weekends"]}
    later = api(
        "POST", "/v1/schedules/preview", {**preview, "after": "2027-01-26T10:00:00Z", "count": 2, "explain": True}
    )
    assert later.status == 200, later.body
    assert [(i["at"], i.get("excluded_by")) for i in later.body["occurrences"]] == [
        ("2027-01-27T09:00:00Z", "weekends"),
        ("2027-01-28T09:00:00Z", None),
        ("2027-01-29T09:00:00Z", None),
    ]


def test_a_calendar_put_of_what_it_has_writes_nothing(api):
    """As a job's: no new version (an If-Match of it stays good), no empty change-log entry."""
    body = {"timezone": "Europe/London", "dates": ["2030-01-01", "2030-12-25"]}
    created = api("POST", "/v1/calendars", {"name": "same", **body}).body
    again = api("PUT", "/v1/calendars/same", body, headers={"If-Match": f'"{created["version"]}"'})
    assert again.status == 200 and again.body["version"] == created["version"], again.body
    assert api("PUT", "/v1/calendars/same", body).body["version"] == created["version"]
    changes = api("GET", "/v1/calendars/same/changes").body["changes"]
    assert [entry["action"] for entry in changes] == ["create"]
    stale = api("PUT", "/v1/calendars/same", body, headers={"If-Match": '"7"'})
    assert stale.status == 412
    moved = api("PUT", "/v1/calendars/same", {**body, "dates": ["2030-01-01"]})
    assert moved.body["version"] == created["version"] + 1


FREEZE_ICS = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:f\r\nDTSTART;VALUE=DATE:20200101\r\n"
    "RRULE:FREQ=DAILY;UNTIL=20401231\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def test_a_long_freeze_is_planned_and_a_search_past_the_time_limit_is_a_400(api, monkeypatch):
    """Every day excluded until 2040: the job's first run is on 1 January 2041 (it was refused,
    'no run in the coming 50 years'). A request whose calendar search outlasts its time limit
    answers 400 on exclude_calendars, in time, rather than running on past API Gateway's 29 s."""
    from scheduler.api import app as app_module

    assert api("POST", "/v1/calendars", {"name": "freeze", "timezone": "UTC", "ics": FREEZE_ICS}).status == 201
    body = job_body("frozen", schedule="0 12 * * *", timezone="UTC", exclude_calendars=["freeze"])
    created = api("POST", "/v1/jobs", body)
    assert created.status == 201, created.body
    assert created.body["next_run_at"] == "2041-01-01T12:00:00Z"
    monkeypatch.setattr(app_module, "CALENDAR_PLANNING_SECONDS", 0.0)
    late = api("POST", "/v1/jobs", {**body, "name": "frozen-2"})
    assert late.status == 400 and late.fields == ["exclude_calendars"], late.body
    assert "too long" in late.body["error"]["details"][0]["message"]


def test_a_job_whose_next_run_takes_too_long_to_plan_is_paused_not_the_batch_held(api, store, pool, monkeypatch):
    """The runner plans a job's next run against its calendars for at most RUNNER_PLANNING_SECONDS
    (one job's calendars held every owner's completions for a minute): past it, that job is paused,
    its pause saying why, and the other completions of the batch are written as usual. A resume
    plans it again, under the API's own limit."""
    from scheduler.planning import lifecycle
    from tests.support import succeeded

    assert api("POST", "/v1/calendars", {"name": "freeze", "timezone": "UTC", "ics": FREEZE_ICS}).status == 201
    frozen = api("POST", "/v1/jobs", job_body("frozen", schedule="0 12 * * *", exclude_calendars=["freeze"])).body
    plain = api("POST", "/v1/jobs", job_body("plain", schedule="0 12 * * *")).body
    for job in (frozen, plain):
        make_due(pool, job["id"])  # now is inside the freeze: its next run is in 2041
    monkeypatch.setattr(lifecycle, "RUNNER_PLANNING_SECONDS", 0.0)
    claims = store.claim_and_start(10)
    assert len(claims) == 2
    assert (
        service.complete_executions(store, [succeeded(claim, elapsed_seconds=0.01) for claim in claims]) == [True] * 2
    )
    paused = api("GET", f"/v1/jobs/{frozen['id']}").body
    assert paused["state"] == "paused" and paused["next_run_at"] is None, paused
    assert paused["pause"]["by"] == "scheduler" and paused["pause"]["at"] is not None
    assert paused["pause"]["note"].startswith("paused by the scheduler: the calendars take too long to plan")
    [pause, _] = api("GET", f"/v1/jobs/{frozen['id']}/changes").body["changes"]  # and the create
    assert (pause["action"], pause["by"], pause["version"]) == ("pause", "scheduler", paused["version"])
    assert pause["diff"] == {"state": {"from": "active", "to": "paused"}}
    assert api("GET", f"/v1/jobs/{plain['id']}").body["state"] == "active"
    runs = api("GET", f"/v1/jobs/{frozen['id']}/executions").body["executions"]
    assert [run["status"] for run in runs if run["status"] != "skipped"] == ["succeeded"]  # the run stands
    monkeypatch.setattr(lifecycle, "RUNNER_PLANNING_SECONDS", 5.0)
    resumed = api("POST", f"/v1/jobs/{frozen['id']}/resume")
    assert resumed.status == 200 and resumed.body["next_run_at"] == frozen["next_run_at"], resumed.body
    assert "pause" not in resumed.body


def test_a_past_one_off_with_calendars_fires_at_once_unless_they_leave_it_out(api):
    """A one-off whose time has passed fires at once with calendars too (it was refused: its
    calendars were asked for a time after now); a calendar that holds its time skips it, or
    shifts it to the span's end."""
    now = datetime.now(UTC).replace(microsecond=0)
    past = now - timedelta(minutes=1)
    api("POST", "/v1/calendars", {"name": "far", "dates": ["2030-01-01"]})
    api("POST", "/v1/calendars", {"name": "today", "dates": [past.date().isoformat()]})
    at = f"at({past.strftime('%Y-%m-%dT%H:%M:%S')})"
    # In UTC, as the calendars' dates and the expected instants (the job's own zone, Berlin, put
    # at(...) on the day before for the first hour after midnight UTC).
    created = api("POST", "/v1/jobs", job_body("past-one-off", schedule=at, timezone="UTC", exclude_calendars=["far"]))
    assert created.status == 201, created.body  # (run_at takes no calendars: a 400 of its own)
    assert datetime.fromisoformat(created.body["next_run_at"].replace("Z", "+00:00")) >= now, created.body
    shifted = api(
        "POST",
        "/v1/jobs",
        job_body("shifted", schedule=at, timezone="UTC", exclude_calendars=["today"], on_excluded="shift"),
    )
    assert shifted.status == 201, shifted.body
    tomorrow = datetime.combine(past.date() + timedelta(days=1), datetime.min.time(), UTC)
    assert shifted.body["next_run_at"] == tomorrow.strftime("%Y-%m-%dT%H:%M:%SZ"), shifted.body
