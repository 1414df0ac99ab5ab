"""The SDK's records and errors (``scheduler.client``): typed from the API's JSON, frozen, and
the error of each status its own subclass carrying the API's code and field."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.client import (
    AccessDenied,
    ApiCallFailed,
    Conflict,
    Execution,
    InvalidRequest,
    Job,
    ResourceNotFound,
    ServerError,
    error_from_response,
    execution_timing,
)
from scheduler.transport.api_resources import rfc3339

JOB = {
    "id": "0b6f6c5e-3c1a-4e8e-9d55-0f0f0f0f0f01",
    "name": "nightly",
    "description": None,
    "tags": ["billing"],
    "schedule": "0 3 * * *",
    "run_at": None,
    "timezone": "Europe/Berlin",
    "start_at": None,
    "end_at": None,
    "target": {"type": "http", "url": "https://example.com/h", "auth": {"type": "bearer", "token": "***"}},
    "retry": {"max_attempts": 4, "min_backoff_seconds": 1, "max_backoff_seconds": 300, "max_age_seconds": None},
    "missed_runs": "run_once",
    "after_completion": "keep",
    "owner": "arn:aws:iam::1:user/a",
    "state": "paused",
    "version": 3,
    "next_run_at": "2026-12-01T02:00:00Z",
    "last_run_at": None,
    "created_at": "2026-11-01T00:00:00.5Z",
    "updated_at": "2026-11-01T00:00:00.5Z",
    "stats": {"run_count": 2, "failure_count": 1, "last_status": "failed", "last_error": "boom"},
    "a_newer_field": 1,
}


def test_a_job_is_typed_frozen_and_keeps_its_answer():
    job = Job.from_json(JOB)
    assert job.next_run_at == datetime(2026, 12, 1, 2, tzinfo=UTC)
    assert job.tags == ("billing",) and job.retry.max_attempts == 4 and job.stats.failure_count == 1
    assert job.paused and job.next_run is None  # a paused job's next_run_at is not a run
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        job.target["url"] = "x"  # type: ignore[index]
    assert job.raw["a_newer_field"] == 1
    definition = job.definition()
    assert "id" not in definition and "stats" not in definition and definition["target"]["auth"]["token"] == "***"
    definition["target"]["url"] = "changed"  # plain JSON again, the record untouched
    assert job.target["url"] == "https://example.com/h"


def test_a_job_carries_its_alerts_and_limits_and_is_hashable():
    rules = [{"on": "failure", "threshold": None, "target": {"type": "http", "url": "https://x", "auth": None}}]
    job = Job.from_json({**JOB, "alerts": rules, "limits": {"max_in_flight": 2, "per_second": None, "key": None}})
    assert job.alerts[0]["on"] == "failure" and job.limits is not None and job.limits["max_in_flight"] == 2
    with pytest.raises(TypeError):
        job.limits["max_in_flight"] = 3  # type: ignore[index]
    plain = Job.from_json(JOB)
    assert plain.alerts == () and plain.limits is None
    assert {plain, Job.from_json(JOB)} == {plain} and hash(job) == hash(plain)  # one version of one job
    assert Job.from_json({**JOB, "version": 4}) not in {plain}


def _execution(**fields):
    base = {
        "id": "e1",
        "job_id": "j1",
        "scheduled_at": "2026-12-01T02:00:00Z",
        "started_at": "2026-12-01T02:00:09Z",
        "attempt": 2,
        "trigger": "retry",
        "status": "succeeded",
    }
    return {**base, **fields}


def test_lateness_is_the_start_against_the_due_time_and_the_backoff_stands_apart():
    retry = Execution.from_json(_execution(due_at="2026-12-01T02:00:08.5Z"))
    assert retry.lateness == timedelta(seconds=0.5) and retry.backoff == timedelta(seconds=8.5)
    # recorded before due_at existed: a retry has no lateness (it would count the backoff) ...
    assert execution_timing(_execution()) == (None, None)
    # ... a first scheduled attempt does
    first = _execution(attempt=1, trigger="schedule", started_at="2026-12-01T02:00:00.012Z")
    assert execution_timing(first) == (timedelta(milliseconds=12), None)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, InvalidRequest),
        (403, AccessDenied),
        (404, ResourceNotFound),
        (409, Conflict),
        (412, Conflict),
        (503, ServerError),
    ],
)
def test_each_error_status_is_its_own_subclass_with_the_api_s_code_and_field(status, kind):
    body = '{"error": {"code": "c", "message": "m", "details": [{"field": "target.url", "message": "bad"}]}}'
    error = error_from_response(status, body)
    assert isinstance(error, kind) and isinstance(error, ApiCallFailed)
    assert (error.status, error.code, error.field, error.fields) == (status, "c", "target.url", ["target.url"])


def test_instants_are_sent_in_rfc_3339():
    assert rfc3339(datetime(2027, 3, 27, tzinfo=UTC)) == "2027-03-27T00:00:00Z"
    assert rfc3339(datetime(2027, 3, 27)) == "2027-03-27T00:00:00Z"  # naive: read as UTC
    assert rfc3339("2027-03-27T00:00:00+01:00") == "2027-03-27T00:00:00+01:00"
