"""How late a started execution began counts from when it was due (the API's ``started_at -
due_at``), not from its occurrence: a retry's backoff, a pause's catch-up and a spread's offset
are the job's own timing, not the scheduler's delay (the lateness metric and the log line)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core.domain import Job, JobState, StartedExecution, Trigger

OCCURRENCE = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


def started(trigger: Trigger, due: datetime | None, started_after: float) -> StartedExecution:
    job = Job(
        id="j", owner="alice", schedule="0 * * * *", state=JobState.ACTIVE, created_at=OCCURRENCE, next_run_at=due
    )
    start = (due or OCCURRENCE) + timedelta(milliseconds=started_after)
    return StartedExecution(job, "e", OCCURRENCE, 2 if trigger is Trigger.RETRY else 1, trigger, start)


@pytest.mark.parametrize(
    ("trigger", "due"),
    [
        (Trigger.SCHEDULE, OCCURRENCE),  # on time
        (Trigger.SCHEDULE, OCCURRENCE + timedelta(minutes=14)),  # a catch-up due at the resume
        (Trigger.SCHEDULE, OCCURRENCE + timedelta(seconds=40)),  # a spread's offset
        (Trigger.RETRY, OCCURRENCE + timedelta(seconds=2)),  # after its backoff
    ],
)
def test_lateness_counts_from_when_the_run_was_due(trigger, due):
    assert started(trigger, due, 35).lateness_ms == pytest.approx(35)


def test_a_manual_run_counts_from_its_request_and_a_backfill_not_at_all():
    manual = started(Trigger.MANUAL, None, 12)  # a manual run's scheduled_at is its request
    assert manual.lateness_ms == pytest.approx(12)
    assert started(Trigger.BACKFILL, None, 3_600_000).lateness_ms == 0.0


def test_the_wait_for_a_targets_slot_is_lateness_to_the_api_but_not_the_schedulers_own():
    """A limited delivery that waited 5 s for its slot (its own limits): the API's lateness
    (``started_at - due_at``) counts the wait, the lateness metric (``own_lateness_ms``) not."""
    from msgspec import structs

    from scheduler.runner.telemetry import own_lateness_ms

    waited = structs.replace(started(Trigger.SCHEDULE, OCCURRENCE, 5_035), waited_ms=5_000)
    assert waited.lateness_ms == pytest.approx(5_035)
    assert own_lateness_ms(waited) == pytest.approx(35)
