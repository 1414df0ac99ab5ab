"""The service layer: the operations on jobs that need a plan, each a call of the store with
its plan from ``scheduler.planning.lifecycle``.

The API and the executor call these; they depend on the store's ports
(``scheduler.ports``), never on the concrete store, and the store never imports the planning.
Each reads what it plans from, plans (``scheduler.planning.lifecycle``) with no row held, and
writes only if the job is still what was read; reads and writes that need no plan (get, list,
delete, request a run) are the store's own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduler.core.domain import (
    SCHEDULE_FIELDS,
    SPEC_FIELDS,
    Completion,
    Job,
    JobState,
    Outcome,
    Plan,
    StartedExecution,
)
from scheduler.core.errors import EditConflict, VersionMismatch
from scheduler.planning import alerts, lifecycle
from scheduler.ports import AlertStore, CompletionStore, JobStore

# Reads and writes of an edit, before it gives up on a job that keeps changing under it (each
# attempt reads the job, plans, and writes only if the job is still what was read).
EDIT_ATTEMPTS = 5
# The same for recording an outcome whose job changed since the execution started.
COMPLETION_ATTEMPTS = 10

# An edit of a job as it was read: its new spec, and its new schedule columns (None: unchanged).
Edit = tuple[Mapping[str, Any], Plan | None]


def create_job(store: JobStore, owner: str, spec: Mapping[str, Any], *, job_id: str | None = None) -> Job:
    """Insert a job at its first occurrence after the database's now. Raises ``NameTaken``."""
    now = store.now()
    plan = lifecycle.plan_first(Job.from_row({**spec, "created_at": now}), now)
    return store.insert_job(owner, spec, plan, created_at=now, job_id=job_id)


def update_job(
    store: JobStore,
    owner: str,
    job_id: str,
    build: Callable[[Job], Mapping[str, Any]],
    expected_version: int | None = None,
) -> Job:
    """Replace the job's writable fields by ``build(current)``.

    ``build`` takes the job as read (no row is held), so it may merge with the current values
    (PATCH, a ``"***"`` secret kept). When a schedule field changed, the occurrences start afresh
    from now; otherwise the occurrence in hand is kept.
    """

    def edit(current: Job) -> Edit:
        spec = {k: v for k, v in build(current).items() if k in SPEC_FIELDS}
        new = current.with_spec(spec)
        if all(getattr(current, k) == getattr(new, k) for k in SCHEDULE_FIELDS):
            return spec, None
        state = JobState.PAUSED if current.state == JobState.PAUSED else JobState.ACTIVE
        return spec, lifecycle.plan_first(new, store.now(), state)

    return _write_edit(store, owner, job_id, edit, expected_version)


def pause_job(store: JobStore, owner: str, job_id: str) -> Job:
    """Stop firing the job's schedule (a manual run still runs)."""
    return _write_edit(store, owner, job_id, lambda current: (current.spec(), lifecycle.plan_pause(current)))


def resume_job(store: JobStore, owner: str, job_id: str) -> Job:
    """Fire the schedule again, applying ``missed_runs`` to what was missed."""
    return _write_edit(
        store, owner, job_id, lambda current: (current.spec(), lifecycle.plan_resume(current, store.now()))
    )


def _write_edit(
    store: JobStore,
    owner: str,
    job_id: str,
    edit: Callable[[Job], Edit],
    expected_version: int | None = None,
) -> Job:
    """Read the job, plan the edit, write it if the job is still what was read; again when it
    changed meanwhile. ``VersionMismatch`` when the caller's version is not the job's,
    ``EditConflict`` when it kept changing."""
    for _ in range(EDIT_ATTEMPTS):
        current = store.get_job(owner, job_id)
        if expected_version is not None and current.version != expected_version:
            raise VersionMismatch(current.version)
        spec, plan = edit(current)
        written = store.update_job(
            owner, job_id, spec, plan, version=current.version, planned_from=Plan.of(current) if plan else None
        )
        if written is not None:
            return written
    raise EditConflict(job_id)


def plan_completion(
    job: Job, outcome: Outcome, now: datetime, rng: random.Random | None, ran_scheduled_at: datetime | None
) -> Plan:
    """The job's columns after an attempt (``lifecycle.plan_completion``), marked ``delete``
    when the attempt completes a job whose ``after_completion`` is ``delete``: the store then
    deletes it with its executions in the transaction that records the completion."""
    plan = lifecycle.plan_completion(job, outcome, now, rng, ran_scheduled_at)
    if plan.state == JobState.COMPLETED and job.after_completion == "delete":
        return Plan(plan.state, plan.scheduled_at, plan.attempt, plan.next_run_at, delete=True)
    return plan


def complete_executions(
    store: CompletionStore, completions: Sequence[Completion], rng: random.Random | None = None
) -> list[bool]:
    """Record how started executions ended and move their jobs on (retry, next occurrence or
    completed), releasing the leases; answers, in order, whether each was recorded (False:
    fenced, the token no longer holds the job).

    Those carrying their started row and the seconds since (``Completion.started`` and
    ``elapsed_seconds``) are planned from that row and written in one statement, valid only if
    the row is still that version; the rest, and any whose job changed meanwhile, are planned
    from the job as it is now (``complete_leased``), one by one.
    """
    recorded = [False] * len(completions)
    fast = [i for i, done in enumerate(completions) if done.started is not None and done.elapsed_seconds is not None]
    if fast:
        planned = []
        for i in fast:
            done = completions[i]
            started: StartedExecution = done.started  # type: ignore[assignment]
            now = started.started_at + timedelta(seconds=max(done.elapsed_seconds or 0.0, 0.0))
            planned.append((done, plan_completion(started.job, done.outcome, now, rng, started.scheduled_at)))
        written = store.write_completions(planned)
        for i in fast:
            recorded[i] = str(completions[i].job_id) in written
    for i, done in enumerate(completions):
        if not recorded[i]:
            recorded[i] = _complete_from_the_job_as_it_is(store, done, rng)
    return recorded


def _complete_from_the_job_as_it_is(store: CompletionStore, done: Completion, rng: random.Random | None) -> bool:
    """Plan from the job as it is now (its lease still ours), write for that version; read again
    when an edit came between. False when fenced (or, after ``COMPLETION_ATTEMPTS``, when the
    job keeps changing: the lease then runs out and the execution is marked lost)."""
    for _ in range(COMPLETION_ATTEMPTS):
        leased = store.leased_job(done)
        if leased is None:
            return False
        plan = plan_completion(leased.job, done.outcome, leased.now, rng, leased.ran_scheduled_at)
        if store.complete_leased(done, plan, leased):
            return True
    return False


def complete_execution(
    store: CompletionStore,
    job_id: str,
    lock_token: str,
    execution_id: str,
    outcome: Outcome,
    *,
    started: StartedExecution | None = None,
    elapsed_seconds: float | None = None,
    rng: random.Random | None = None,
) -> bool:
    """``complete_executions`` for one execution."""
    completion = Completion(job_id, lock_token, execution_id, outcome, started=started, elapsed_seconds=elapsed_seconds)
    return complete_executions(store, [completion], rng)[0]


def sweep_alerts(store: AlertStore, limit: int = 500) -> int:
    """Read the executions of the jobs with alert rules since their last sweep and queue the
    alerts their rules decide (``planning.alerts``), each job's alert state held meanwhile (a
    job another runner is sweeping is skipped). Answers how many alerts were queued."""
    queued = 0
    for job in store.alert_jobs(limit):
        queued += store.sweep_alerts(job.id, alerts.decision)
    return queued
