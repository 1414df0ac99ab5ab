"""Whether an attempt that a runner claimed is to be made at all: the rules the executors apply
before delivering (local mode's and the deployed ones alike)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from scheduler.core.domain import ExecutionStatus, Job, Outcome, StartedExecution, Trigger
from scheduler.planning.lifecycle import RUN_ALL_CAP, missed_before, missed_choice, schedule_of
from scheduler.planning.retries import retries_since
from scheduler.schedules import Schedule
from scheduler.schedules.calendars import Calendar

#: An occurrence first started more than this long after its fire time was missed (its runners
#: were down, or far behind): its job's ``missed_runs`` policy decides whether it is delivered,
#: as at a resume. Within it, a late start is lateness, and the occurrence is delivered. A minute
#: beyond the longest wait of a runner at minute precision (one claim a minute, a little over).
MISSED_AFTER_SECONDS = 120.0
_MISSED_AFTER = timedelta(seconds=MISSED_AFTER_SECONDS)


def not_to_make(started: StartedExecution, calendars: Callable[[], Sequence[Calendar]]) -> Outcome | None:
    """The outcome of a claimed attempt that is not to be made (:func:`given_up`, or
    :func:`missed`: ``calendars`` reads the job's, only then), or None: deliver it."""
    refused = given_up(started)
    if refused is None and maybe_missed(started):
        refused = missed(started, calendars())
    return refused


def given_up(started: StartedExecution) -> Outcome | None:
    """The failure of an attempt that is not to be made: every attempt allowed was made, the
    last lost with its runner (a target that kills the executor, say), or a retry starts past
    its ``max_age_seconds`` after the occurrence (its runners were down meanwhile): given up
    rather than delivered. A manual or chained run is one attempt, delivered again when lost with
    its runner (at-least-once): given up once lost ``max_attempts`` times (``lost_before``, read
    when its lease is reclaimed). None for every other delivery (a first attempt at once)."""
    retry = started.job.retry_policy
    if started.trigger in (Trigger.MANUAL, Trigger.CHAIN):
        if started.lost_before < retry.max_attempts:
            return None
        return Outcome(
            ExecutionStatus.FAILED,
            False,
            error=f"gave up: this {started.trigger} run was lost with its runner {started.lost_before} time(s), "
            f"the job's max_attempts ({retry.max_attempts})",
        )
    if started.attempt <= 1:
        return None
    if started.attempt > retry.max_attempts:
        return Outcome(
            ExecutionStatus.FAILED,
            False,
            error=f"gave up: the {retry.max_attempts} attempt(s) allowed were made and the last was lost with its runner",
        )
    max_age = retry.max_age_seconds
    if started.trigger != Trigger.RETRY or not max_age:
        return None
    since = retries_since(started.job, started.scheduled_at)
    late = (started.started_at - since).total_seconds()
    if late > max_age:
        counted_from = "its occurrence" if since == started.scheduled_at else "the job's creation"
        return Outcome(
            ExecutionStatus.FAILED,
            False,
            error=f"gave up: attempt {started.attempt} would start {late:.0f}s after {counted_from}, "
            f"past the retry's max_age_seconds ({max_age:g})",
        )
    return None


def maybe_missed(started: StartedExecution) -> bool:
    """Whether a started execution is the first attempt at a recurring job's occurrence begun
    more than ``MISSED_AFTER_SECONDS`` after its fire time (the job's ``next_run_at``), so that
    :func:`missed` is to be asked. A comparison for nearly every delivery. A one-off runs however
    late (``at()`` too: :func:`missed` tells it by its schedule); a job with ``limits`` is left
    out too: an occurrence that waited for its target's slot (handed back meanwhile) is late by
    that wait, not missed."""
    job = started.job
    due = job.next_run_at
    return (
        due is not None
        and started.started_at - due > _MISSED_AFTER
        and started.trigger is Trigger.SCHEDULE
        and started.attempt == 1
        and job.run_at is None
        and not job.limits
    )


def missed(started: StartedExecution, calendars: Sequence[Calendar] = ()) -> Outcome | None:
    """The skip of an occurrence that :func:`maybe_missed` found late when its job's
    ``missed_runs`` policy does not run it, as a resume would not: under ``skip`` never, under
    ``run_once`` when a later occurrence has passed too (that one runs instead), under
    ``run_all`` when it is not among the last ``RUN_ALL_CAP`` missed. None when it is to be
    delivered. ``calendars``: the job's (those it names that exist)."""
    job = started.job
    schedule = schedule_of(job, calendars)
    if not schedule.one_off and not _runs_missed(job, schedule, started.started_at):
        late = (started.started_at - (job.next_run_at or started.scheduled_at)).total_seconds()
        return Outcome(
            ExecutionStatus.SKIPPED,
            False,
            error=f"missed: a runner could start it only {late:,.0f}s after its fire time (were the runners down?); "
            f"missed_runs {job.missed_runs} {_INSTEAD.get(job.missed_runs, 'does not run it')}",
        )
    return None


# What each missed_runs policy does instead of running a missed occurrence (a skip's error).
_INSTEAD = {
    "skip": "drops it",
    "run_once": "runs the latest missed occurrence instead",
    "run_all": f"runs the last {RUN_ALL_CAP} missed only",
}


def _runs_missed(job: Job, schedule: Schedule, now: datetime) -> bool:
    """Whether the job's ``missed_runs`` policy, applied at ``now`` from the occurrence in hand
    on (``lifecycle.missed_choice``, as a resume asks it), runs that occurrence: ``skip`` never
    does; the others do unless they pick another missed occurrence to run instead."""
    pending = job.scheduled_at
    if pending is None:
        return True
    occurrence = missed_choice(job, schedule, pending, now)
    if job.missed_runs == "skip":
        return occurrence == pending
    return occurrence is None or occurrence == pending or occurrence > missed_before(job, now)
