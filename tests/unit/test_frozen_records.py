"""The domain's per-job records keep the behaviour of frozen dataclasses with the cheaper
``__init__`` of ``scheduler.core.frozen.quick_frozen_init``."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from scheduler.core.domain import Job, JobState, Outcome, Plan, RetryPolicy
from scheduler.core.frozen import quick_frozen_init


def test_a_record_built_by_keyword_positionally_and_by_default_has_every_field():
    at = datetime(2026, 12, 4, 9, tzinfo=UTC)
    plan = Plan(JobState.ACTIVE, at, 2, None)
    assert (plan.state, plan.scheduled_at, plan.attempt, plan.next_run_at) == (JobState.ACTIVE, at, 2, None)
    assert plan.delete is False and plan.skips == () and plan.chain is None
    job = Job(id="j", timezone="Europe/London")
    assert job.timezone == "Europe/London" and job.missed_runs == "run_once" and job.on_success == ()
    defaults = {f.name: f.default for f in dataclasses.fields(Job)}
    assert {name: getattr(job, name) for name in defaults} == {**defaults, "id": "j", "timezone": "Europe/London"}
    assert type(job) is Job and not hasattr(job, "__dict__")  # its slots, its class back


def test_a_record_stays_frozen_equal_replaceable_and_picklable():
    job = Job(id="j", name="n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"  # type: ignore[misc]
    assert job == Job(id="j", name="n") and job != Job(id="j", name="m")
    assert dataclasses.replace(job, name="m") == Job(id="j", name="m")
    assert pickle.loads(pickle.dumps(job)) == job
    assert hash(RetryPolicy()) == hash(RetryPolicy())
    assert "name='n'" in repr(job)


def test_the_arguments_are_checked_as_the_generated_init_checks_them():
    with pytest.raises(TypeError):
        Plan(JobState.ACTIVE)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Outcome(status="succeeded", colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RetryPolicy(1, 2, 3, 4, 5)  # type: ignore[call-arg]


def test_only_classes_it_can_serve_exactly_are_accepted():
    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        a: int = 0

    @dataclasses.dataclass
    class Mutable:
        a: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    for cls in (Unslotted, Mutable, Factory):
        with pytest.raises(TypeError):
            quick_frozen_init(cls)


def test_post_init_still_runs():
    seen = []

    @quick_frozen_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            seen.append(self.a)

    assert Checked(3).a == 3 and seen == [3]
