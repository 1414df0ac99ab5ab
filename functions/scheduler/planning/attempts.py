"""Whether an attempt that a runner claimed is to be made at all: the rule the executors apply
before delivering (local mode's and the deployed ones alike)."""

from __future__ import annotations

from scheduler.core.domain import ExecutionStatus, Outcome, StartedExecution, Trigger


def given_up(started: StartedExecution) -> Outcome | None:
    """The failure of an attempt that is not to be made: every attempt allowed was made, the
    last lost with its runner (a target that kills the executor, say), or a retry starts past
    its ``max_age_seconds`` after the occurrence (its runners were down meanwhile): given up
    rather than delivered. None for every other delivery (a first attempt at once)."""
    if started.attempt <= 1 or started.trigger == Trigger.MANUAL:
        return None
    retry = started.job.retry_policy
    if started.attempt > retry.max_attempts:
        return Outcome(
            ExecutionStatus.FAILED,
            False,
            error=f"gave up: the {retry.max_attempts} attempt(s) allowed were made and the last was lost with its runner",
        )
    max_age = retry.max_age_seconds
    late = (started.started_at - started.scheduled_at).total_seconds()
    if started.trigger == Trigger.RETRY and max_age and late > max_age:
        return Outcome(
            ExecutionStatus.FAILED,
            False,
            error=f"gave up: attempt {started.attempt} would start {late:.0f}s after its occurrence, "
            f"past the retry's max_age_seconds ({max_age:g})",
        )
    return None
