"""Alert rules beside the features that landed with them: a skipped row (issue 33's record of
occurrences that did not run) is no outcome, so it neither breaks a run of failures nor
recovers an incident."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.core.domain import Execution, ExecutionStatus, JobState, SkipReason, Trigger
from scheduler.planning.alerts import AlertJob, AlertRule, AlertState, decide

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
HOOK = {"type": "http", "url": "https://hooks.example.com/x"}


def _execution(seq: int, status: ExecutionStatus) -> Execution:
    at = T0 + timedelta(minutes=seq)
    skipped = status == ExecutionStatus.SKIPPED
    return Execution(
        id=f"00000000-0000-0000-0000-{seq:012d}",
        job_id="job",
        seq=seq,
        scheduled_at=at,
        started_at=at,
        finished_at=at,
        attempt=0 if skipped else 1,
        trigger=Trigger.SCHEDULE,
        status=status,
        skip_reason=SkipReason.OVERLAP if skipped else None,
        skipped_count=3 if skipped else None,
    )


def _job() -> AlertJob:
    rules = (AlertRule.of(0, {"on": "failures_in_a_row", "threshold": 2, "target": HOOK}),)
    return AlertJob("job", "alice", "nightly", rules, JobState.ACTIVE, None)


def test_a_skipped_row_between_two_failures_keeps_them_in_a_row():
    runs = [
        _execution(1, ExecutionStatus.FAILED),
        _execution(2, ExecutionStatus.SKIPPED),
        _execution(3, ExecutionStatus.FAILED),
    ]
    state, events = decide(_job(), AlertState(), runs, T0 + timedelta(hours=1))
    assert [(event.rule.on, event.event) for event in events] == [("failures_in_a_row", "fired")]
    assert state.failures_in_row == 2 and state.seen_seq == 3


def test_a_skipped_row_after_the_last_run_only_moves_the_watermark():
    state, events = decide(
        _job(), AlertState(failures_in_row=1), [_execution(4, ExecutionStatus.SKIPPED)], T0 + timedelta(hours=1)
    )
    assert events == [] and state.failures_in_row == 1 and state.seen_seq == 4


def test_missing_run_counts_the_schedules_runs_only():
    """A run that ended past ``missing_run``'s threshold from when it was due is a missing run only
    when the schedule made it (or retried it): a chained run of a paused job, a run now or a
    backfill of the past is not (the audit's case: a chained run that succeeded fired it)."""
    from dataclasses import replace

    from scheduler.planning.alerts import holds

    rule = AlertRule.of(0, {"on": "missing_run", "threshold": 2, "target": HOOK})
    ran = replace(
        _execution(1, ExecutionStatus.SUCCEEDED), finished_at=T0 + timedelta(minutes=1, seconds=4)
    )  # 4 s after it was due
    assert holds(rule, ran, 0) and holds(rule, replace(ran, trigger=Trigger.RETRY), 0)
    for trigger in (Trigger.CHAIN, Trigger.MANUAL, Trigger.BACKFILL):
        assert not holds(rule, replace(ran, trigger=trigger), 0), trigger
