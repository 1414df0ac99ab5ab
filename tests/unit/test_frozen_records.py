"""The domain's per-job records (``scheduler.core.domain``: msgspec Structs) behave as frozen
records: every field by keyword, by position and by default, immutable, equal by value, hashed,
replaced, pickled and printed; wrong arguments are refused as a generated ``__init__`` refuses."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest
from msgspec import NODEFAULT, structs

from scheduler.core.domain import Claim, Completion, Delivery, Job, JobState, Outcome, Plan, RetryPolicy


def test_a_record_built_by_keyword_positionally_and_by_default_has_every_field():
    at = datetime(2026, 12, 4, 9, tzinfo=UTC)
    plan = Plan(JobState.ACTIVE, at, 2, None)
    assert (plan.state, plan.scheduled_at, plan.attempt, plan.next_run_at) == (JobState.ACTIVE, at, 2, None)
    assert plan.delete is False and plan.skips == () and plan.chain is None
    job = Job(id="j", timezone="Europe/London")
    assert job.timezone == "Europe/London" and job.missed_runs == "run_once" and job.on_success == ()
    defaults = {f.name: f.default for f in structs.fields(Job)}
    assert NODEFAULT not in defaults.values()  # every field of a job has its default
    assert {name: getattr(job, name) for name in defaults} == {**defaults, "id": "j", "timezone": "Europe/London"}
    assert not hasattr(job, "__dict__")


@pytest.mark.parametrize(
    "record",
    [
        Job(id="j", name="n"),
        Plan(JobState.ACTIVE, None, 0, None),
        Outcome("succeeded", http_status=200),
        RetryPolicy(),
        Claim("j", "t", "schedule", datetime(2026, 1, 1, tzinfo=UTC), None, datetime(2026, 1, 1, tzinfo=UTC), None),
        Completion("j", "t", "e", Outcome("failed")),
        Delivery("j", "e", datetime(2026, 1, 1, tzinfo=UTC), 1),
    ],
    ids=lambda record: type(record).__name__,
)
def test_a_record_stays_frozen_equal_replaceable_and_picklable(record):
    first = structs.fields(record)[0].name
    with pytest.raises(AttributeError):
        setattr(record, first, "other")
    assert record == structs.replace(record) and record != structs.replace(record, **{first: "other"})
    assert pickle.loads(pickle.dumps(record)) == record
    assert f"{first}=" in repr(record)


def test_records_of_hashable_values_hash_by_value():
    assert hash(RetryPolicy()) == hash(RetryPolicy()) and hash(Plan(JobState.ACTIVE, None, 0, None)) == hash(
        Plan(JobState.ACTIVE, None, 0, None)
    )


def test_the_arguments_are_checked_as_a_generated_init_checks_them():
    with pytest.raises(TypeError):
        Plan(JobState.ACTIVE)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Outcome(status="succeeded", colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RetryPolicy(1, 2, 3, 4, 5)  # type: ignore[call-arg]
