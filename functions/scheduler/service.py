"""The service layer: the operations on jobs that need a plan, each a call of the store with
its plan from ``scheduler.planning.lifecycle``.

The API and the executor call these; they depend on the store's ports
(``scheduler.ports``), never on the concrete store, and the store never imports the planning.
Each reads what it plans from, plans (``scheduler.planning.lifecycle``) with no row held, and
writes only if the job is still what was read; reads and writes that need no plan (get, list,
delete, request a run) are the store's own.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduler.core.changes import find_cycle, spec_diff
from scheduler.core.domain import (
    CHAIN_FIELDS,
    SCHEDULE_FIELDS,
    SPEC_FIELDS,
    ChainRun,
    Change,
    ChangeAction,
    Completion,
    Job,
    JobState,
    LeaseKind,
    Outcome,
    Plan,
    StartedExecution,
)
from scheduler.core.errors import ChainError, EditConflict, VersionMismatch
from scheduler.planning import lifecycle
from scheduler.ports import CompletionStore, JobStore

# Reads and writes of an edit, before it gives up on a job that keeps changing under it (each
# attempt reads the job, plans, and writes only if the job is still what was read).
EDIT_ATTEMPTS = 5
# The same for recording an outcome whose job changed since the execution started.
COMPLETION_ATTEMPTS = 10

# An edit of a job as it was read: its new spec, and its new schedule columns (None: unchanged).
Edit = tuple[Mapping[str, Any], Plan | None]


def change(
    action: ChangeAction, by: str | None, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> Change | None:
    """The change-log hook: the entry a change records (written by the store in the change's
    transaction), the diff of the job's writable fields with secrets masked; None without a
    caller to name (a write of the system's own)."""
    if by is None:
        return None
    return Change(action, by, spec_diff(before, after))


def check_chains(store: JobStore, owner: str, job_id: str | None, spec: Mapping[str, Any]) -> None:
    """Refuse (``ChainError``, a 400 naming the field) a chain naming no job of the owner, or one
    that would close a cycle through this job (the cycle named, by job names)."""
    refs = {field: tuple(spec.get(field) or ()) for field in CHAIN_FIELDS}
    wanted = tuple(dict.fromkeys(ref for field_refs in refs.values() for ref in field_refs))
    if not wanted:
        return
    found = store.resolve_jobs(owner, wanted)
    for field, field_refs in refs.items():
        for i, ref in enumerate(field_refs):
            if ref not in found and not (job_id is not None and ref == job_id) and ref != spec.get("name"):
                raise ChainError(f"names no job of yours: {ref!r}", f"{field}[{i}]")
    me = job_id or "(new)"
    links = store.chain_links(owner)
    names = {job: name for job, (name, _) in links.items()}
    names.update({found_id: name for found_id, name in found.values()})
    names[me] = str(spec.get("name"))
    by_ref = {ref: found_id for ref, (found_id, _) in found.items()}
    for job, (name, _) in links.items():
        by_ref.setdefault(job, job)
        by_ref.setdefault(name, job)
    by_ref[names[me]] = me
    if job_id is not None:
        by_ref[job_id] = me
    graph = {job: tuple(by_ref[r] for r in targets if r in by_ref) for job, (_, targets) in links.items() if job != me}
    graph[me] = tuple(by_ref[r] for r in wanted if r in by_ref)
    cycle = find_cycle(me, graph)
    if cycle is not None:
        field = next(field for field, field_refs in refs.items() if field_refs)
        raise ChainError("would make a cycle: " + " -> ".join(names.get(job, job) for job in cycle), field)


def create_job(
    store: JobStore, owner: str, spec: Mapping[str, Any], *, job_id: str | None = None, by: str | None = None
) -> Job:
    """Insert a job at its first occurrence after the database's now (its change-log entry
    made by ``by``). Raises ``NameTaken``, ``ChainError``.

    The id is chosen here when not given: a ``spread`` draws its offsets from it."""
    check_chains(store, owner, job_id, spec)
    now = store.now()
    job_id = job_id or str(uuid.uuid4())
    plan = lifecycle.plan_first(Job.from_row({**spec, "id": job_id, "created_at": now}), now)
    entry = change(ChangeAction.CREATE, by, None, spec)
    return store.insert_job(owner, spec, plan, created_at=now, job_id=job_id, change=entry)


def update_job(
    store: JobStore,
    owner: str,
    job_id: str,
    build: Callable[[Job], Mapping[str, Any]],
    expected_version: int | None = None,
    *,
    by: str | None = None,
) -> Job:
    """Replace the job's writable fields by ``build(current)`` (a change-log entry by ``by``).

    ``build`` takes the job as read (no row is held), so it may merge with the current values
    (PATCH, a ``"***"`` secret kept). When a schedule field changed, the occurrences start afresh
    from now; otherwise the occurrence in hand is kept.
    """

    def edit(current: Job) -> Edit:
        spec = {k: v for k, v in build(current).items() if k in SPEC_FIELDS}
        check_chains(store, owner, job_id, spec)
        new = current.with_spec(spec)
        if all(getattr(current, k) == getattr(new, k) for k in SCHEDULE_FIELDS):
            return spec, None
        state = JobState.PAUSED if current.state == JobState.PAUSED else JobState.ACTIVE
        return spec, lifecycle.plan_first(new, store.now(), state)

    return _write_edit(store, owner, job_id, edit, expected_version, ChangeAction.UPDATE, by)


def pause_job(store: JobStore, owner: str, job_id: str, *, by: str | None = None) -> Job:
    """Stop firing the job's schedule (a manual run still runs)."""
    return _write_edit(
        store,
        owner,
        job_id,
        lambda current: (current.spec(), lifecycle.plan_pause(current)),
        None,
        ChangeAction.PAUSE,
        by,
    )


def resume_job(store: JobStore, owner: str, job_id: str, *, by: str | None = None) -> Job:
    """Fire the schedule again, applying ``missed_runs`` to what was missed."""
    return _write_edit(
        store,
        owner,
        job_id,
        lambda current: (current.spec(), lifecycle.plan_resume(current, store.now())),
        None,
        ChangeAction.RESUME,
        by,
    )


def delete_job(store: JobStore, owner: str, job_id: str, *, by: str | None = None) -> None:
    """Delete the job and its executions; its change log stays for the retention period."""
    store.delete_job(owner, job_id, change=change(ChangeAction.DELETE, by, None, None))


def request_run(store: JobStore, owner: str, job_id: str, *, by: str | None = None) -> Job:
    """Ask for a run now, outside the schedule (recorded in the change log)."""
    return store.request_run(owner, job_id, change=change(ChangeAction.RUN, by, None, None))


def _write_edit(
    store: JobStore,
    owner: str,
    job_id: str,
    edit: Callable[[Job], Edit],
    expected_version: int | None = None,
    action: ChangeAction = ChangeAction.UPDATE,
    by: str | None = None,
) -> Job:
    """Read the job, plan the edit, write it (with its change-log entry: ``action`` by ``by``,
    the diff from the job as read) if the job is still what was read; again when it changed
    meanwhile. ``VersionMismatch`` when the caller's version is not the job's, ``EditConflict``
    when it kept changing."""
    for _ in range(EDIT_ATTEMPTS):
        current = store.get_job(owner, job_id)
        if expected_version is not None and current.version != expected_version:
            raise VersionMismatch(current.version)
        spec, plan = edit(current)
        before = {**current.spec(), "state": str(current.state)}
        after = {**spec, "state": str(plan.state if plan else current.state)}
        written = store.update_job(
            owner,
            job_id,
            spec,
            plan,
            version=current.version,
            planned_from=Plan.of(current) if plan else None,
            change=change(action, by, before, after),
        )
        if written is not None:
            return written
    raise EditConflict(job_id)


def plan_completion(
    job: Job,
    outcome: Outcome,
    now: datetime,
    rng: random.Random | None,
    ran_scheduled_at: datetime | None,
    execution_id: str | None = None,
) -> Plan:
    """The job's columns after an attempt (``lifecycle.plan_completion``), marked ``delete``
    when the attempt completes a job whose ``after_completion`` is ``delete``: the store then
    deletes it with its executions in the transaction that records the completion. A final
    outcome (no retry to come) of a job with chains carries the runs it asks for (``chain``),
    written in the same transaction; ``execution_id`` is the cause they name."""
    plan = lifecycle.plan_completion(job, outcome, now, rng, ran_scheduled_at)
    if plan.state == JobState.COMPLETED and job.after_completion == "delete":
        plan = Plan(plan.state, plan.scheduled_at, plan.attempt, plan.next_run_at, delete=True)
    chained = job.chained(outcome)  # () for a job without chains: nothing more to do
    if chained and not _retries(job, plan):
        plan = dataclasses.replace(plan, chain=ChainRun(str(job.owner), chained, cause_of(job, outcome, execution_id)))
    return plan


def _retries(job: Job, plan: Plan) -> bool:
    """Whether ``plan`` is a retry of the occurrence in hand (the outcome is not final yet)."""
    return (
        job.lease_kind != LeaseKind.MANUAL
        and plan.state != JobState.COMPLETED
        and plan.scheduled_at == job.scheduled_at
        and plan.attempt == job.attempt
        and plan.next_run_at != job.next_run_at
    )


def cause_of(job: Job, outcome: Outcome, execution_id: str | None) -> dict[str, Any]:
    """The outcome a chained run knows of the execution that caused it (``{{cause.*}}``)."""
    return {
        "execution_id": execution_id,
        "job_id": job.id,
        "job_name": job.name,
        "status": str(outcome.status),
        "http_status": outcome.http_status,
        "response_excerpt": outcome.response_excerpt,
        "error": outcome.error,
    }


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
            planned.append(
                (done, plan_completion(started.job, done.outcome, now, rng, started.scheduled_at, done.execution_id))
            )
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
        plan = plan_completion(leased.job, done.outcome, leased.now, rng, leased.ran_scheduled_at, done.execution_id)
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
