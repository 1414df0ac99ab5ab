"""The service layer: the operations on jobs that need a plan, each a call of the store with
its plan from ``scheduler.planning.lifecycle``.

The API and the executor call these; they depend on the store's ports
(``scheduler.ports``), never on the concrete store, and the store never imports the planning.
Reads and writes that need no plan (get, list, delete, request a run) are the store's own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduler.core.domain import SCHEDULE_FIELDS, SPEC_FIELDS, Completion, Job, Outcome, StartedExecution
from scheduler.planning import lifecycle
from scheduler.ports import CompletionStore, JobStore


def create_job(store: JobStore, owner: str, spec: Mapping[str, Any], *, job_id: str | None = None) -> dict[str, Any]:
    """Insert a job at its first occurrence. Raises ``NameTaken``."""
    return store.insert_job(owner, spec, lifecycle.plan_first, job_id=job_id)


def update_job(
    store: JobStore,
    owner: str,
    job_id: str,
    build: Callable[[dict[str, Any]], Mapping[str, Any]],
    expected_version: int | None = None,
) -> dict[str, Any]:
    """Replace the job's writable fields by ``build(current_row)``.

    ``build`` runs while the row is held, so it may merge with the current values (PATCH, a
    ``"***"`` secret kept). When a schedule field changed, the occurrences start afresh from
    now; otherwise the occurrence in hand is kept.
    """

    def change(row: dict[str, Any], now: datetime) -> dict[str, Any]:
        spec = {k: v for k, v in build(row).items() if k in SPEC_FIELDS}
        new = {**row, **spec}
        if any(row.get(k) != new.get(k) for k in SCHEDULE_FIELDS):
            state = row["state"] if row["state"] == "paused" else "active"
            return {**spec, **lifecycle.plan_first(Job.from_row(new), now, state)}
        return spec

    return store.modify_job(owner, job_id, change, expected_version)


def pause_job(store: JobStore, owner: str, job_id: str) -> dict[str, Any]:
    """Stop firing the job's schedule (a manual run still runs)."""
    return store.modify_job(owner, job_id, lambda row, now: lifecycle.plan_pause(Job.from_row(row)))


def resume_job(store: JobStore, owner: str, job_id: str) -> dict[str, Any]:
    """Fire the schedule again, applying ``missed_runs`` to what was missed."""
    return store.modify_job(owner, job_id, lambda row, now: lifecycle.plan_resume(Job.from_row(row), now))


def plan_completion(
    job: Job, outcome: Outcome, now: datetime, rng: random.Random | None, ran_scheduled_at: datetime | None
) -> Mapping[str, Any]:
    """The job's columns after an attempt (``lifecycle.plan_completion``), marked ``"delete":
    True`` when the attempt completes a job whose ``after_completion`` is ``delete``: the store
    then deletes it with its executions in the transaction that records the completion."""
    plan = lifecycle.plan_completion(job, outcome, now, rng, ran_scheduled_at)
    if plan["state"] == "completed" and job.after_completion == "delete":
        return {**plan, "delete": True}
    return plan


def complete_executions(
    store: CompletionStore, completions: Sequence[Completion], rng: random.Random | None = None
) -> list[bool]:
    """Record how started executions ended and move their jobs on (retry, next occurrence or
    completed), releasing the leases; answers, in order, whether each was recorded (False:
    fenced, the token no longer holds the job).

    Those carrying their started row and the seconds since (``Completion.started`` and
    ``elapsed_seconds``) are planned from that row and written in one statement, valid only if
    the row is still that version; the rest, and any whose job changed meanwhile, take the
    locking path one by one (the row read and held, then planned).
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
            recorded[i] = store.complete_locked(
                done, lambda job, now, ran, outcome=done.outcome: plan_completion(job, outcome, now, rng, ran)
            )
    return recorded


def complete_execution(
    store: CompletionStore,
    job_id: str,
    lock_token: str,
    execution_id: str,
    outcome: Outcome,
    *,
    http_status: int | None = None,
    response_excerpt: str | None = None,
    started: StartedExecution | None = None,
    elapsed_seconds: float | None = None,
    rng: random.Random | None = None,
) -> bool:
    """``complete_executions`` for one execution."""
    completion = Completion(
        job_id,
        lock_token,
        execution_id,
        outcome,
        http_status=http_status,
        response_excerpt=response_excerpt,
        started=started,
        elapsed_seconds=elapsed_seconds,
    )
    return complete_executions(store, [completion], rng)[0]
