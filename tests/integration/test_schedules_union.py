"""Several expressions (``schedules``) and ``spread`` through the API, the preview's ``explain``
and the runner's store path, on real Postgres."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler import service
from scheduler.core.domain import Delivery
from scheduler.core.timeutil import format_time
from scheduler.planning.lifecycle import Outcome
from scheduler.store.postgres import Completion
from tests.integration.test_api import ALICE, BOB, api, box, create, job_body  # noqa: F401 - fixtures
from tests.support import http_spec

OWNER = "arn:aws:iam::111111111111:user/alice"
UNION = ["0 9 * * 1-5", "rate(6 hours)"]
SPREAD = {"window_seconds": 900, "mode": "stable"}


def union_body(name: str = "union", **extra):
    body = job_body(name, schedules=UNION, spread=SPREAD, timezone="Europe/London", **extra)
    del body["schedule"]
    return body


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_job_with_several_expressions_and_a_spread(api):
    job = create(api, union_body())
    assert job["schedules"] == UNION and job["schedule"] is None
    assert job["spread"] == {"window_seconds": 900, "mode": "stable"}
    # The next run is the union's first occurrence after creation, plus the job's offset: the
    # preview for this job (its id seeds the offset) says the same, and explains it.
    answer = api(
        "POST",
        "/v1/schedules/preview",
        {
            "schedules": UNION,
            "timezone": "Europe/London",
            "spread": SPREAD,
            "job_id": job["id"],
            "after": job["created_at"],
            "count": 3,
            "explain": True,
        },
    )
    assert answer.status == 200, answer.body
    first, *_ = items = answer.body["occurrences"]
    assert first["at"] == job["next_run_at"]
    assert set(first) == {"at", "expression", "spread_seconds"}
    assert all(item["expression"] in UNION and 0 <= item["spread_seconds"] < 900 for item in items)
    assert len({item["spread_seconds"] for item in items}) == 1  # stable: one offset per job
    assert api("GET", f"/v1/jobs/{job['id']}").body["schedules"] == UNION


def test_preview_without_explain_answers_the_fire_times(api):
    body = {"schedules": ["0 9 * * *", "30 17 * * *"], "after": "2027-01-01T00:00:00Z", "count": 3}
    answer = api("POST", "/v1/schedules/preview", body)
    assert answer.body == {"occurrences": ["2027-01-01T09:00:00Z", "2027-01-01T17:30:00Z", "2027-01-02T09:00:00Z"]}
    explained = api("POST", "/v1/schedules/preview", {**body, "explain": True}).body["occurrences"]
    assert [item["expression"] for item in explained] == ["0 9 * * *", "30 17 * * *", "0 9 * * *"]
    assert [item["spread_seconds"] for item in explained] == [0, 0, 0]
    spread = {"window_seconds": 600, "mode": "random"}
    job_id = "00000000-0000-4000-8000-000000000001"
    random_items = api(
        "POST", "/v1/schedules/preview", {**body, "spread": spread, "job_id": job_id, "explain": True}
    ).body["occurrences"]
    again = api("POST", "/v1/schedules/preview", {**body, "spread": spread, "job_id": job_id, "explain": True})
    assert again.body["occurrences"] == random_items  # fixed: the preview shows the real times
    for item, plain in zip(random_items, answer.body["occurrences"], strict=True):
        assert instant(item["at"]) == instant(plain) + timedelta(seconds=item["spread_seconds"])


@pytest.mark.parametrize(
    "fields,field,words",
    [
        ({"schedule": "@daily", "schedules": ["@hourly"]}, "schedule", ["schedule, schedules or run_at"]),
        ({"schedules": ["@hourly"], "run_at": "2030-01-01T00:00:00Z"}, "schedules", ["schedules and run_at"]),
        ({"schedules": []}, "schedules", []),
        ({"schedules": ["@daily", "every day"]}, "schedules.1", []),
        ({"schedules": ["at(2030-01-01T00:00:00)"]}, "schedules.0", ["run_at"]),
        ({"schedule": "@daily", "spread": {"window_seconds": 0}}, "spread.window_seconds", []),
        ({"schedule": "@daily", "spread": {"window_seconds": 60, "mode": "jitter"}}, "spread.mode", []),
        ({"run_at": "2030-01-01T00:00:00Z", "spread": {"window_seconds": 60}}, "spread", ["run_at"]),
    ],
)
def test_bad_schedules_and_spreads_are_a_400_naming_the_field(api, fields, field, words):
    body = {k: v for k, v in job_body("bad").items() if k != "schedule"} | fields
    for answer in (
        api("POST", "/v1/jobs", body),
        api("POST", "/v1/schedules/preview", {k: v for k, v in fields.items()}),
    ):
        assert answer.status == 400, answer.body
        details = {d["field"]: d["message"] for d in answer.body["error"]["details"]}
        assert field in details, details
        assert all(word in details[field] for word in words), details


def test_preview_job_id_must_be_a_uuid(api):
    answer = api("POST", "/v1/schedules/preview", {"schedule": "@daily", "job_id": "nope"})
    assert answer.status == 400 and answer.body["error"]["details"][0]["field"] == "job_id"


def test_an_edit_moves_between_schedule_and_schedules(api):
    job = create(api, job_body("moving", schedule="0 3 1 1 *", timezone="UTC"))
    patched = api("PATCH", f"/v1/jobs/{job['id']}", {"schedule": None, "schedules": ["@hourly", "0 3 1 1 *"]})
    assert patched.status == 200, patched.body
    assert patched.body["schedules"] == ["@hourly", "0 3 1 1 *"] and patched.body["schedule"] is None
    assert instant(patched.body["next_run_at"]) - instant(patched.body["updated_at"]) <= timedelta(hours=1)
    spread = api("PATCH", f"/v1/jobs/{job['id']}", {"spread": {"window_seconds": 3000}})
    assert spread.status == 200 and spread.body["spread"] == {"window_seconds": 3000, "mode": "stable"}
    assert spread.body["version"] == patched.body["version"] + 1
    back = api("PATCH", f"/v1/jobs/{job['id']}", {"schedules": None, "spread": None, "schedule": "@daily"})
    assert back.status == 200 and back.body["schedules"] is None and back.body["spread"] is None
    assert back.body["next_run_at"].endswith("T00:00:00Z")
    both = api("PATCH", f"/v1/jobs/{job['id']}", {"schedules": ["@hourly"]})
    assert both.status == 400 and both.body["error"]["details"][0]["field"] == "schedule"


def test_other_owners_do_not_see_the_job(api):
    job = create(api, union_body("mine"))
    assert api("GET", f"/v1/jobs/{job['id']}", principal=BOB).status == 404


def test_a_run_keeps_the_occurrence_as_its_key_and_plans_the_next_with_the_spread(store, pool):
    """The runner's path: the started row carries schedules and spread, the execution (and the
    Idempotency-Key) name the occurrence, not the spread time, and the completion plans the
    union's next occurrence plus the offset."""
    spec = http_spec("spread-run", None, schedules=["*/5 * * * *", "rate(7 minutes)"], spread=SPREAD)
    job = service.create_job(store, OWNER, spec)
    offset = job.next_run_at - job.scheduled_at
    assert timedelta(0) <= offset < timedelta(seconds=900)
    with pool.connection() as conn:  # its time has come: occurrence 10 s ago, fire time 1 s ago
        conn.execute(
            """UPDATE job_runs SET scheduled_at = date_trunc('second', now()) - interval '10 seconds',
                                   next_run_at = date_trunc('second', now()) - interval '1 second'
               WHERE job_id = %s""",
            (job.id,),
        )
    occurrence = store.get_job(OWNER, job.id).scheduled_at
    [claim] = store.claim_and_start(10)
    started = claim.started
    assert started.job.schedules == ("*/5 * * * *", "rate(7 minutes)") and started.job.spread == SPREAD
    assert started.scheduled_at == occurrence
    delivery = Delivery(job_id=job.id, execution_id=started.execution_id, scheduled_at=started.scheduled_at, attempt=1)
    assert delivery.idempotency_key == f"{job.id}:{format_time(occurrence)}"
    outcome = Outcome("succeeded", http_status=200)
    assert service.complete_executions(
        store, [Completion(claim.job_id, claim.lock_token, started.execution_id, outcome, started=started)]
    ) == [True]
    after = store.get_job(OWNER, job.id)
    assert after.scheduled_at > occurrence and after.next_run_at - after.scheduled_at == offset
    minute = after.scheduled_at.minute + after.scheduled_at.hour * 60
    created = job.created_at.replace(microsecond=0)
    assert minute % 5 == 0 or (after.scheduled_at - created).total_seconds() % 420 == 0
