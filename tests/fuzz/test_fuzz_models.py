"""Fuzzing the job model: ``JobSpec.model_validate`` on arbitrary JSON values and on near-valid
jobs (a valid job with a few fields replaced by wrong, edge or random values).

Properties: only ``pydantic.ValidationError`` is raised, and ``validation_details`` turns it into
a non-empty list of ``{"field": str, "message": str}`` (what the API answers in a 400); a job
that validates says exactly one of schedule / run_at, its schedule parses, and its JSON form
validates again to the same job.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from pydantic import ValidationError

from scheduler.schedules import parse_schedule
from scheduler.schema.models import JobSpec, validation_details
from tests.fuzz.strategies import json_values, near_valid_jobs

# FUZZ_EXAMPLES=5000 for a longer hunt.
MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
VALID = {"name": "job-1", "schedule": "0 3 * * *", "target": {"type": "http", "url": "https://example.com/hook"}}


def validate(value) -> JobSpec | None:
    """The model, or None for a ValidationError whose details are checked."""
    try:
        spec = JobSpec.model_validate(value)
    except ValidationError as exc:
        details = validation_details(exc)
        assert details and isinstance(details, list)
        for detail in details:
            assert set(detail) == {"field", "message"}
            assert isinstance(detail["field"], str) and detail["field"]
            assert isinstance(detail["message"], str) and detail["message"]
        event(f"refused: {details[0]['field'].split('.')[0]}")
        return None
    event("accepted")
    return spec


def check_valid(spec: JobSpec) -> None:
    assert (spec.schedule is None) != (spec.run_at is None)
    if spec.schedule is not None:
        parse_schedule(spec.schedule, spec.timezone, spec.start_at)
    if spec.start_at and spec.end_at:
        assert spec.end_at > spec.start_at
    again = JobSpec.model_validate(spec.model_dump(mode="json"))
    assert again == spec


@FUZZ
@given(value=json_values)
@example(value=None)
@example(value=[VALID])
@example(value={**VALID, "target": [VALID["target"]]})
def test_arbitrary_json_gives_only_validation_errors(value):
    spec = validate(value)
    if spec is not None:
        check_valid(spec)


@FUZZ
@given(job=near_valid_jobs())
@example(job=VALID)
@example(job={**VALID, "schedule": None, "run_at": "2026-12-01T10:00:00+14:00"})
@example(job={**VALID, "start_at": "9999-12-31T23:59:59Z"})
@example(job={**VALID, "timezone": "posix/Europe/Berlin"})
@example(job={**VALID, "target": {"type": "http", "url": "https://example.com/", "auth": {"type": "digest"}}})
@example(job={**VALID, "target": {"type": "amqp", "body": "!!", "body_encoding": "base64"}})
@example(job={**VALID, "retry": {"min_backoff_seconds": float("nan")}})
def test_near_valid_jobs_give_only_validation_errors(job):
    spec = validate(job)
    if spec is not None:
        check_valid(spec)


@pytest.mark.parametrize("start_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_start_at_at_the_edge_of_the_calendar_is_a_validation_error(start_at):
    with pytest.raises(ValidationError):
        JobSpec.model_validate({**VALID, "start_at": start_at})


def test_the_edge_cases_that_do_work():
    """Neighbours of the bug above that are handled: a far future start_at in UTC, a run_at at
    the calendar's first instant."""
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({**VALID, "start_at": "9999-12-31T23:59:59Z"})
    assert validation_details(caught.value)[0]["field"] == "schedule"
    spec = JobSpec.model_validate({**VALID, "schedule": None, "run_at": "0001-01-01T00:00:00Z"})
    assert spec.run_at == datetime(1, 1, 1, tzinfo=UTC)
