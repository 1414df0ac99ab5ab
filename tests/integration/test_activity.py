"""Seeing the work through the API: executions across a caller's jobs (GET /v1/executions) and
the preview of a schedule (POST /v1/schedules/preview), on real Postgres through the handler."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.integration.test_api import ALICE, BOB, api, box, create, job_body  # noqa: F401 - fixtures

SECOND_OWNER_JOB = "bob-report"


def add_started(pool, job_id: str, rows: list[tuple[str, int]]) -> None:
    """Executions of a job as (status, minutes ago it started); the owner comes from the job."""
    with pool.connection() as conn:
        for status, minutes_ago in rows:
            conn.execute(
                """INSERT INTO executions (id, job_id, scheduled_at, started_at, finished_at, attempt, trigger,
                                           status, http_status, duration_ms)
                   VALUES (gen_random_uuid(), %s, now() - make_interval(mins => %s),
                           date_trunc('second', now()) - make_interval(mins => %s), now(), 1, 'schedule', %s,
                           200, 7)""",
                (job_id, minutes_ago, minutes_ago, status),
            )


def page_all(api, query: dict[str, Any], principal: str = ALICE) -> list[dict[str, Any]]:
    seen, cursor = [], None
    while True:
        answer = api(
            "GET", "/v1/executions", query={**query, **({"cursor": cursor} if cursor else {})}, principal=principal
        )
        assert answer.status == 200, answer.body
        seen += answer.body["executions"]
        cursor = answer.body["next_cursor"]
        if not cursor:
            return seen


@pytest.fixture
def two_owners(api, pool):
    nightly = create(api, job_body("nightly"))
    hourly = create(api, job_body("hourly", schedule="@hourly"))
    bobs = create(api, job_body(SECOND_OWNER_JOB), principal=BOB)
    add_started(pool, nightly["id"], [("succeeded", 50), ("failed", 40), ("succeeded", 30)])
    # Three started in the same second: the id orders them, and pages split them exactly.
    add_started(
        pool,
        hourly["id"],
        [("succeeded", 45), ("timed_out", 35), ("succeeded", 20), ("succeeded", 20), ("succeeded", 20)],
    )
    add_started(pool, bobs["id"], [("failed", 10), ("succeeded", 5)])
    return nightly, hourly, bobs


def test_executions_across_jobs_newest_first_with_job_names(api, two_owners):
    nightly, hourly, bobs = two_owners
    answer = api("GET", "/v1/executions")
    assert answer.status == 200 and answer.body["next_cursor"] is None
    got = answer.body["executions"]
    assert len(got) == 8
    keys = [(e["started_at"], e["id"]) for e in got]
    assert keys == sorted(keys, reverse=True)
    assert [e["job_name"] for e in got[:3]] == ["hourly"] * 3 and got[-1]["job_name"] == "nightly"
    assert {e["job_id"] for e in got} == {nightly["id"], hourly["id"]}
    assert set(got[0]) == {
        "id",
        "job_id",
        "job_name",
        "scheduled_at",
        "due_at",
        "started_at",
        "finished_at",
        "attempt",
        "trigger",
        "status",
        "http_status",
        "response_excerpt",
        "error",
        "duration_ms",
        "waited_ms",
        "waited_for",
        "caused_by",
        "caused_by_job_id",
        "shifted_from",
        "excluded_by",
    }
    # Pages of 3 give the same rows in the same order, ties on started_at included.
    assert page_all(api, {"limit": 3}) == got
    # Another principal sees only their own.
    bob_sees = page_all(api, {"limit": 1}, principal=BOB)
    assert [e["job_name"] for e in bob_sees] == [SECOND_OWNER_JOB] * 2
    assert page_all(api, {"job_id": nightly["id"]}, principal=BOB) == []
    assert page_all(api, {"job_id": bobs["id"]}) == []


def test_executions_across_jobs_filters(api, two_owners):
    nightly, hourly, _ = two_owners
    everything = api("GET", "/v1/executions").body["executions"]
    failures = page_all(api, {"status": "failed", "limit": 1})
    assert [e["status"] for e in failures] == ["failed"] and failures[0]["job_id"] == nightly["id"]
    assert page_all(api, {"job_id": hourly["id"], "limit": 2}) == [e for e in everything if e["job_id"] == hourly["id"]]
    since = everything[3]["started_at"]  # the 30-minutes-ago one
    recent = page_all(api, {"since": since, "limit": 2})
    assert recent == [e for e in everything if e["started_at"] >= since] and len(recent) == 4
    same_instant = datetime.fromisoformat(since).astimezone(timezone(timedelta(hours=2))).isoformat()
    assert page_all(api, {"since": same_instant}) == recent
    both = page_all(api, {"status": "succeeded", "job_id": nightly["id"], "since": everything[-1]["started_at"]})
    assert [e["status"] for e in both] == ["succeeded", "succeeded"]


def test_executions_across_jobs_bad_input_names_the_parameter(api, two_owners):
    first = api("GET", "/v1/executions", query={"limit": 2})
    cursor = first.body["next_cursor"]
    cases = [
        ({"status": "exploded"}, "status"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-01T00:00:00"}, "since"),
        ({"since": "0001-01-01T00:00:00+01:00"}, "since"),
        ({"job_id": "not-a-uuid"}, "job_id"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"cursor": cursor + "x"}, "cursor"),
        ({"cursor": cursor, "status": "failed"}, "cursor"),
    ]
    for query, field in cases:
        answer = api("GET", "/v1/executions", query=query)
        assert answer.status == 400 and answer.fields == [field], (query, answer.body)
    # A cursor is the caller's own: another principal cannot replay it.
    answer = api("GET", "/v1/executions", query={"cursor": cursor}, principal=BOB)
    assert answer.status == 400 and answer.fields == ["cursor"]
    assert api("POST", "/v1/executions", {}).status == 405


def test_executions_the_runner_records_carry_the_owner(api, store, pool):
    job = create(api, job_body("soon", schedule=None, run_at="2000-01-01T00:00:00Z"))
    claims = store.claim_and_start(10)
    assert [c.job_id for c in claims] == [job["id"]]
    with pool.connection() as conn:
        assert conn.execute("SELECT owner FROM executions").fetchone()["owner"] == ALICE
    listed = api("GET", "/v1/executions").body["executions"]
    assert [(e["job_name"], e["status"]) for e in listed] == [("soon", "running")]
    assert api("GET", "/v1/executions", principal=BOB).body["executions"] == []


# -- preview ---------------------------------------------------------------------------------------


def preview(api, body: dict[str, Any]):
    return api("POST", "/v1/schedules/preview", body)


@pytest.mark.parametrize(
    "body,expected",
    [
        # 02:30 does not exist in Berlin on 2027-03-28: it fires when the clocks jump (03:00 CEST).
        (
            {"schedule": "30 2 * * *", "timezone": "Europe/Berlin", "after": "2027-03-27T12:00:00Z", "count": 3},
            ["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z", "2027-03-30T00:30:00Z"],
        ),
        # Strictly after: an occurrence at `after` itself is not listed.
        (
            {"schedule": "0 * * * *", "after": "2027-01-01T00:00:00Z", "count": 2},
            ["2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z"],
        ),
        # The window ends the schedule: fewer than count.
        (
            {"schedule": "@daily", "end_at": "2027-01-03T00:00:00Z", "after": "2027-01-01T00:00:00Z"},
            ["2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z"],
        ),
        (
            {
                "schedule": "@daily",
                "start_at": "2027-02-01T00:00:00+01:00",
                "after": "2027-01-01T00:00:00Z",
                "count": 1,
            },
            ["2027-02-01T00:00:00Z"],
        ),
        # rate() counts from start_at.
        (
            {
                "schedule": "rate(90 minutes)",
                "start_at": "2027-01-01T00:10:00Z",
                "after": "2027-01-01T01:00:00Z",
                "count": 2,
            },
            ["2027-01-01T01:40:00Z", "2027-01-01T03:10:00Z"],
        ),
        (
            {
                "schedule": "cron(0 3 ? * 1 *)",
                "timezone": "America/New_York",
                "after": "2027-01-01T00:00:00Z",
                "count": 1,
            },
            ["2027-01-03T08:00:00Z"],
        ),
        ({"run_at": "2027-05-01T10:00:00+02:00", "after": "2027-01-01T00:00:00Z"}, ["2027-05-01T08:00:00Z"]),
        ({"run_at": "2027-05-01T10:00:00+02:00", "after": "2027-06-01T00:00:00Z"}, []),
    ],
)
def test_preview(api, body, expected):
    answer = preview(api, body)
    assert answer.status == 200, answer.body
    assert answer.body == {"occurrences": expected}


def test_preview_defaults_to_ten_after_the_database_clock(api, store):
    before = store.now()
    answer = preview(api, {"schedule": "@every 1m"})
    assert answer.status == 200
    found = answer.body["occurrences"]
    assert len(found) == 10 and found == sorted(found) and all(at.endswith("Z") for at in found)
    assert found[0] > before.isoformat() and len(set(found)) == 10


def test_preview_matches_the_job_plan(api):
    job = create(api, job_body("planned", schedule="*/7 * * * *", timezone="Asia/Kolkata"))
    answer = preview(
        api, {"schedule": "*/7 * * * *", "timezone": "Asia/Kolkata", "after": job["created_at"], "count": 1}
    )
    assert answer.body["occurrences"] == [job["next_run_at"]]


def test_preview_bad_input_is_a_400_like_a_job(api):
    shared = [
        {"schedule": "every day at noon"},
        {"schedule": "0 3 * * *", "run_at": "2099-01-01T00:00:00Z"},
        {},
        {"run_at": "2099-01-01T00:00:00"},
        {"schedule": "0 3 * * *", "timezone": "Mars/Olympus"},
        {"schedule": "0 3 * * *", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"},
        {"schedule": "cron(0 3 * * * *)"},
        {"schedule": "0 0 30 2 *"},
        {"schedule": "0 0 1 1 *", "start_at": "2027-02-01T00:00:00Z", "end_at": "2027-03-01T00:00:00Z"},
        {"schedule": "s" * 257},
        {"schedule": 5},
    ]
    for fields in shared:
        as_job = api("POST", "/v1/jobs", {**job_body("x"), "schedule": None, **fields})
        as_preview = preview(api, fields)
        assert as_preview.status == 400 and as_job.status == 400, (fields, as_preview.body)
        assert as_preview.error["details"] == as_job.error["details"], fields
        assert as_preview.fields, fields
    for fields, field in (
        ({"schedule": "@hourly", "count": 0}, "count"),
        ({"schedule": "@hourly", "count": 101}, "count"),
        ({"schedule": "@hourly", "count": True}, "count"),
        ({"schedule": "@hourly", "after": "2027-01-01T00:00:00"}, "after"),
        ({"schedule": "@hourly", "after": "0001-01-01T00:00:00+01:00"}, "after"),
        ({"schedule": "@hourly", "name": "x"}, "name"),
    ):
        answer = preview(api, fields)
        assert answer.status == 400 and field in answer.fields, (fields, answer.body)
    assert api("GET", "/v1/schedules/preview").status == 405


def test_a_preview_names_a_job_in_any_case(api):
    """A job id pasted in upper case previews the job's own spread: ids are stored in lower case."""
    body = {"schedule": "0 0 * * *", "spread": {"window_seconds": 86400}, "after": "2027-01-01T00:00:00Z", "count": 3}
    lower = preview(api, {**body, "job_id": "66b94d6b-0d3c-4b5a-9d77-2f8f6a1c9e01"})
    upper = preview(api, {**body, "job_id": "66B94D6B-0D3C-4B5A-9D77-2F8F6A1C9E01"})
    assert lower.status == upper.status == 200 and lower.body == upper.body
    assert preview(api, {**body, "start_at": "0001-01-01T00:00:00Z"}).status == 200  # (it was a 500)


def test_one_execution_by_its_id_whichever_job_it_is_of_and_only_its_owners(api, two_owners):
    nightly, hourly, bobs = two_owners
    listed = page_all(api, {})
    for wanted in (listed[0], listed[-1]):
        answer = api("GET", f"/v1/executions/{wanted['id']}")
        assert answer.status == 200 and answer.body == wanted, answer.body  # as listed, job_name included
    bobs_own = page_all(api, {}, principal=BOB)[0]
    for missing in (bobs_own["id"], "0b6f6c5e-0000-4000-8000-000000000000", "not-a-uuid"):
        answer = api("GET", f"/v1/executions/{missing}")  # another principal's, none, not an id
        assert answer.status == 404 and answer.body["error"]["message"] == "no such execution", answer.body
    assert api("GET", f"/v1/executions/{bobs_own['id']}", principal=BOB).body["job_name"] == SECOND_OWNER_JOB


def test_a_preview_with_a_jobs_id_counts_its_interval_from_the_jobs_creation(api):
    """rate() and @every count from a job's creation when it has no start_at: the preview with its
    id shows its real times (it counted from now), and another owner's id is as no id."""
    job = create(api, job_body("every-20", schedule="@every 20s", timezone="UTC"))
    created = datetime.fromisoformat(job["created_at"].replace("Z", "+00:00"))
    body = {"schedule": "@every 20s", "count": 3}
    # Seven seconds on (counted from then, the first time would be 27 s after the creation), and
    # from before the creation (nothing comes before it: not the creation itself).
    for after in (created + timedelta(seconds=7), created - timedelta(hours=1)):
        own = preview(api, {**body, "job_id": job["id"], "after": after.isoformat()})
        assert own.status == 200 and own.body["occurrences"][0] == job["next_run_at"], (after, own.body)
    own = preview(api, {**body, "job_id": job["id"]})
    assert own.status == 200 and own.body["occurrences"][0] == job["next_run_at"]
    explained = preview(api, {**body, "job_id": job["id"], "explain": True})
    assert explained.body["occurrences"][0]["at"] == job["next_run_at"]
    others = api(
        "POST", "/v1/schedules/preview", {**body, "job_id": job["id"], "after": job["created_at"]}, principal=BOB
    )
    assert others.status == 200 and others.body == preview(api, {**body, "after": job["created_at"]}).body


def test_a_window_without_an_occurrence_is_refused_from_now_and_a_one_instant_window_taken(api):
    never = api("POST", "/v1/jobs", job_body("never", schedule="0 0 1 1 *", end_at="2099-01-02T00:00:00Z"))
    assert never.status == 201  # 1 January 2027..2099: it fires
    soon = datetime.now(UTC) + timedelta(days=1)
    cron = f"0 0 {(soon + timedelta(days=2)).day} {(soon + timedelta(days=2)).month} *"
    refused = api("POST", "/v1/jobs", job_body("never-2", schedule=cron, end_at=soon.isoformat()))
    assert refused.status == 400 and refused.error["details"] == [
        {"field": "schedule", "message": "never fires between now and end_at"}
    ]
    # An edit is not a creation: a job brought to its last stretch is changed, and completes.
    ending = api("PATCH", f"/v1/jobs/{never.body['id']}", {"end_at": soon.isoformat()})
    assert ending.status == 200 and ending.body["state"] == "completed", ending.body
    at = "2030-01-05T09:00:00Z"
    one = api("POST", "/v1/jobs", job_body("one-instant", schedule="0 9 * * *", timezone="UTC", start_at=at, end_at=at))
    assert one.status == 201 and one.body["next_run_at"] == at
    assert preview(api, {"schedule": "0 9 * * *", "start_at": at, "end_at": at}).body["occurrences"] == [at]
    # The preview of the refused fields: the same 400 (from now), an empty list from a later after.
    fields = {"schedule": cron, "end_at": soon.isoformat()}
    assert preview(api, fields).error["details"] == refused.error["details"]
    later = preview(api, {**fields, "after": (soon + timedelta(days=1)).isoformat()})
    assert later.status == 200 and later.body["occurrences"] == []


def test_a_preview_whose_calendars_leave_no_run_is_a_400_as_for_a_job(api):
    closed = {"name": "closed-for-good", "ranges": [{"start": "2020-01-01", "end": "9998-12-31"}]}
    assert api("POST", "/v1/calendars", closed).status == 201
    fields = {"schedule": "0 0 * * *", "exclude_calendars": ["closed-for-good"]}
    as_job = api("POST", "/v1/jobs", {**job_body("x"), **fields})
    as_preview = preview(api, fields)
    assert as_job.status == as_preview.status == 400
    assert [d["field"] for d in as_preview.error["details"]] == ["exclude_calendars"]
