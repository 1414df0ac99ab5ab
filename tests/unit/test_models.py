"""Job validation: every error collected, with its field path."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.schema.models import JobSpec, validation_details


def spec(**overrides):
    base = {
        "name": "nightly-report",
        "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target": {"type": "http", "url": "https://example.com/hook"},
    }
    base.update(overrides)
    return base


def details(data) -> dict[str, str]:
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate(data)
    return {d["field"]: d["message"] for d in validation_details(err.value)}


def test_valid_job_gets_defaults():
    job = JobSpec.model_validate(spec(tags=["b", "a", "b"]))
    assert job.tags == ["a", "b"] and job.missed_runs == "run_once"
    assert job.retry.max_attempts == 3 and job.target.method == "POST" and job.target.timeout_seconds == 30


def test_errors_are_collected_with_their_paths():
    found = details(
        spec(
            name="",
            timezone="Mars/Olympus",
            missed_runs="never",
            target={"type": "http", "url": "ftp://x", "timeout_seconds": 0, "extra": 1},
            retry={"max_attempts": 0},
        )
    )
    assert {
        "name",
        "timezone",
        "missed_runs",
        "target.url",
        "target.timeout_seconds",
        "target.extra",
        "retry.max_attempts",
    } <= set(found)
    assert "http" in found["target.url"]


def test_exactly_one_of_schedule_and_run_at():
    assert "exactly one" in details(spec(schedule=None))["schedule"]
    assert "exactly one" in details(spec(run_at="2026-12-01T10:00:00Z"))["schedule"]
    JobSpec.model_validate(spec(schedule=None, run_at="2026-12-01T10:00:00+01:00"))
    assert "run_at" in details(spec(schedule=None, run_at="2026-12-01T10:00:00"))


def test_bad_schedule_names_the_field():
    found = details(spec(schedule="61 * * * *"))
    assert "schedule" in found and "minute" in found["schedule"].lower()


def test_end_before_start():
    assert "end_at" in details(spec(start_at="2026-12-02T00:00:00Z", end_at="2026-12-01T00:00:00Z"))


def test_headers_and_auth_checked():
    found = details(
        spec(
            target={
                "type": "http",
                "url": "https://e.com",
                "headers": {"X-Scheduler-Job-Id": "x", "Bad Name": "v"},
                "auth": {"type": "basic", "username": ""},
            }
        )
    )
    assert "target.headers" in found
    assert {"target.auth.username", "target.auth.password"} <= set(found)
    assert "target.url" in details(spec(target={"type": "http", "url": "https://u:p@e.com"}))


def test_amqp_target():
    JobSpec.model_validate(
        spec(target={"type": "amqp", "exchange": "x", "routing_key": "k", "body": "aGk=", "body_encoding": "base64"})
    )
    assert "target.url" in details(spec(target={"type": "amqp", "url": "http://broker"}))
    assert "target.body" in details(spec(target={"type": "amqp", "body": "not base64!", "body_encoding": "base64"}))
    assert "target.type" in details(spec(target={"type": "smtp"}))


def test_schedule_that_never_fires_is_refused():
    assert "never fires" in details(spec(schedule="0 0 30 2 *"))["schedule"]


def test_a_start_at_on_the_schedules_only_occurrence_is_that_occurrence():
    """start_at is inclusive: on the one time a schedule fires, the job runs then."""
    job = JobSpec.model_validate(spec(schedule="cron(0 0 1 1 ? 2030)", timezone="UTC", start_at="2030-01-01T00:00:00Z"))
    assert job.start_at is not None


def test_a_window_holding_no_occurrence_is_refused():
    """A yearly 1 January between February and March never fires: refused, naming the schedule."""
    found = details(spec(schedule="0 0 1 1 *", start_at="2027-02-01T00:00:00Z", end_at="2027-03-01T00:00:00Z"))
    assert found == {"schedule": "never fires between start_at and end_at"}
    assert details(spec(start_at="2027-03-01T00:00:00Z", end_at="2027-02-01T00:00:00Z")) == {
        "end_at": "must not be before start_at (both are included)"
    }


def test_a_start_at_at_the_first_instant_a_datetime_holds_is_planned():
    """Year 1: the instant just before it does not exist (a 500 in the preview and with calendars)."""
    job = JobSpec.model_validate(spec(start_at="0001-01-01T00:00:00Z", timezone="UTC"))
    assert job.start_at is not None
