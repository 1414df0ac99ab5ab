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

from msgspec import structs

from scheduler.calendar_service import (  # noqa: F401 (the calendar operations, re-exported)
    NEVER_BETWEEN_NOW_AND_END,
    calendars_of_batch,
    create_calendar,
    job_calendars,
    named_calendars,
    refuse_a_schedule_left_without_runs,
    replace_calendar,
    replanned_from,
    skips_to_trim,
)
from scheduler.chain_service import chain_check, chains_of_a_dropped_retry, check_chains  # noqa: F401 (re-exported)
from scheduler.core.changes import SCHEDULER_ACTOR, cause_of, spec_diff
from scheduler.core.domain import (
    OCCURRENCE_FIELDS,
    SCHEDULE_FIELDS,
    SPEC_FIELDS,
    ChainRun,
    Change,
    ChangeAction,
    Completion,
    Job,
    JobState,
    Outcome,
    Pause,
    Plan,
    RunOverrides,
    Skip,
    StartedExecution,
    Trigger,
)
from scheduler.core.errors import EditConflict, NotFound, ScheduleError, VersionMismatch
from scheduler.core.records import SkipTrim
from scheduler.planning import alerts, backfills, lifecycle, retries
from scheduler.planning.lifecycle import Calendar
from scheduler.ports import AlertStore, CompletionStore, JobStore, PauseStore

# Reads and writes of an edit, before it gives up on a job that keeps changing under it (each
# attempt reads the job, plans, and writes only if the job is still what was read); of an outcome.
EDIT_ATTEMPTS, COMPLETION_ATTEMPTS = 5, 10

# An edit of a job as it was read: its new spec, its new schedule columns (None: unchanged), and
# what it leaves of the skipped rows recorded in advance (a replan from now: ``skips_to_trim``).
Edit = tuple[Mapping[str, Any], Plan | None, Sequence[SkipTrim]]
# Told of the skipped occurrences a write recorded (the runner counts them in a metric).
SkipHook = Callable[[Sequence[Skip]], None]


# -- jobs ------------------------------------------------------------------------------------------


def change(
    action: ChangeAction, by: str | None, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> Change | None:
    """The change-log hook: the entry a change records (written by the store in the change's
    transaction), the diff of the job's writable fields with secrets masked; None without a
    caller to name (a write of the system's own)."""
    if by is None:
        return None
    return Change(action, by, spec_diff(before, after))


def create_job(
    store: JobStore, owner: str, spec: Mapping[str, Any], *, job_id: str | None = None, by: str | None = None
) -> Job:
    """Insert a job at its first occurrence after the database's now (its change-log entry
    made by ``by``). Raises ``NameTaken``, ``ChainError``.

    The id is chosen here when not given: a ``spread`` draws its offsets from it."""
    chains = chain_check(owner, job_id, spec)
    calendars = named_calendars(store, owner, list(spec.get("exclude_calendars") or ()))
    now = store.now()
    job_id = job_id or str(uuid.uuid4())
    job = Job.from_row({**spec, "id": job_id, "created_at": now})
    plan = lifecycle.plan_first(job, now, calendars=calendars)
    refuse_a_window_without_runs(job, plan, now, calendars)
    refuse_a_schedule_left_without_runs(job, plan, now, calendars)
    entry = change(ChangeAction.CREATE, by, None, spec)
    return store.insert_job(owner, spec, plan, created_at=now, job_id=job_id, change=entry, chains=chains)


def refuse_a_window_without_runs(job: Job, plan: Plan, now: datetime, calendars: Sequence[Calendar]) -> None:
    """A new recurring job without ``start_at`` whose ``end_at`` is still to come but before its
    first occurrence: ``ScheduleError`` on its schedule's field (it would complete at once). An
    ``end_at`` already past is a job completed, as documented; an edit keeps its window. ``plan``:
    its first plan with its ``calendars`` (planned again without them only when they may be
    what completed it)."""
    if plan.state != JobState.COMPLETED or job.run_at is not None or job.start_at is not None:
        return
    if job.end_at is None or job.end_at <= now:
        return
    if not calendars or lifecycle.plan_first(job, now, calendars=()).state == JobState.COMPLETED:
        raise ScheduleError(NEVER_BETWEEN_NOW_AND_END, field="schedules" if job.schedules else "schedule")


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
    from now; otherwise the occurrence in hand is kept. A completed one-off whose time has passed
    stays completed unless its ``run_at`` changes: its occurrence ran (or was skipped) at that
    time, and another field's edit (its zone, its window, its calendars) does not bring it back.
    """

    def edit(current: Job) -> Edit:
        spec = {k: v for k, v in build(current).items() if k in SPEC_FIELDS}
        new = current.with_spec(spec)
        if all(getattr(current, k) == getattr(new, k) for k in SCHEDULE_FIELDS):
            return spec, None, ()
        now = store.now()
        if _one_off_done(current, new, now):
            return spec, None, ()
        state = JobState.PAUSED if current.state == JobState.PAUSED else JobState.ACTIVE
        calendars = named_calendars(store, owner, list(new.exclude_calendars))
        # The same occurrences and exclusions: those excluded before the one in hand are on record.
        kept = (*OCCURRENCE_FIELDS, "exclude_calendars", "on_excluded")
        same = all(getattr(current, k) == getattr(new, k) for k in kept)
        since = current.scheduled_at if same else None
        plan = lifecycle.plan_first(new, now, state, calendars=calendars, recorded_until=since)
        refuse_a_schedule_left_without_runs(new, plan, now, calendars)
        plan = chains_of_a_dropped_retry(store, current, plan)
        return spec, plan, skips_to_trim(store, current, replanned_from(current, new, now, since))

    return _write_edit(store, owner, job_id, edit, expected_version, action=ChangeAction.UPDATE, by=by, chained=True)


def _one_off_done(current: Job, new: Job, now: datetime) -> bool:
    """Whether an edit leaves a completed one-off completed: its ``run_at`` unchanged and past."""
    return (
        current.state == JobState.COMPLETED
        and new.run_at is not None
        and new.run_at == current.run_at
        and new.run_at <= now
    )


def pause_job(
    store: JobStore,
    owner: str,
    job_id: str,
    pause: Pause | None = None,
    *,
    by: str | None = None,
    as_read: Job | None = None,
    expected_version: int | None = None,
) -> Job:
    """Stop firing the job's schedule (a manual run still runs), with the pause's record (its
    note, its end ``until``, who paused it): the runner resumes it at ``until``. A completed job
    stays as it is. Recorded in the change log (by ``by``). ``as_read``: the job as the caller
    just read it, planned from without reading it again (the write still checks its version).
    ``expected_version`` (If-Match): ``VersionMismatch`` when the job is at another."""

    def edit(current: Job) -> Edit:
        return current.spec(), lifecycle.plan_pause(current), ()

    def record(current: Job) -> tuple[bool, Pause | None]:
        if current.state == JobState.COMPLETED:
            return False, Pause.of(current)
        return True, dataclasses.replace(pause or Pause(), at=current.paused_at)

    return _write_edit(
        store, owner, job_id, edit, expected_version, pause_of=record, action=ChangeAction.PAUSE, by=by, as_read=as_read
    )


def resume_job(
    store: JobStore,
    owner: str,
    job_id: str,
    on_skips: SkipHook | None = None,
    *,
    by: str | None = None,
    as_read: Job | None = None,
    expected_version: int | None = None,
) -> Job:
    """Fire the schedule again, applying ``missed_runs`` to what was missed (the occurrences it
    does not run on record as skipped, ``paused``, and passed to ``on_skips``); the pause's
    record is cleared. Recorded in the change log (by ``by``). ``as_read`` and
    ``expected_version`` as ``pause_job``'s."""
    return _write_edit(
        store,
        owner,
        job_id,
        lambda current: (
            current.spec(),
            lifecycle.plan_resume(current, store.now(), calendars=job_calendars(store, current)),
            (),
        ),
        expected_version,
        pause_of=lambda current: (False, None),
        on_skips=on_skips,
        action=ChangeAction.RESUME,
        by=by,
        as_read=as_read,
    )


# The most occurrences one backfill request takes, and the least time between two of its deliveries.
MAX_BACKFILL = 10_000
BACKFILL_INTERVAL_SECONDS = 1.0


def backfill_job(
    store: JobStore, owner: str, job_id: str, start: datetime, end: datetime, *, dry_run: bool, by: str | None = None
) -> list[datetime]:
    """The job's occurrences from ``start`` to ``end`` (``ScheduleError`` naming ``end`` past
    ``MAX_BACKFILL``, or in the future: the schedule runs what is to come); unless ``dry_run``,
    recorded for the runner to deliver one at a time, each as itself (its own scheduled time and
    key), through the job's lease, at most one every ``BACKFILL_INTERVAL_SECONDS``, and in the
    change log (by ``by``: the range and the count). ``NotFound`` for another owner's job."""
    job = store.get_job(owner, job_id)
    if end > store.now():
        raise ScheduleError("must not be in the future: a backfill delivers past occurrences", field="end")
    found = backfills.backfill_occurrences(job, start, end, MAX_BACKFILL, job_calendars(store, job))
    if not dry_run and found:
        entry = change(ChangeAction.BACKFILL, by, None, {"backfill": {"start": start, "end": end, "count": len(found)}})
        if store.insert_backfill(owner, job_id, found, BACKFILL_INTERVAL_SECONDS, entry) is None:
            raise NotFound(job_id)
    return found


def resume_expired_pauses(store: PauseStore, limit: int = 100, on_skips: SkipHook | None = None) -> list[Job]:
    """Resume the jobs whose pause has reached its ``until`` (the runner calls it as it claims:
    no API call is needed), each under its missed-run policy as ``resume_job``. A job resumed or
    deleted meanwhile is left out."""
    resumed = []
    for owner, job_id in store.expired_pauses(limit):
        try:
            job = resume_job(store, owner, job_id, on_skips, by=SCHEDULER_ACTOR)
        except (NotFound, EditConflict):
            continue
        resumed.append(job)
    return resumed


def delete_job(
    store: JobStore, owner: str, job_id: str, *, by: str | None = None, expected_version: int | None = None
) -> None:
    """Delete the job and its executions; its change log stays for the retention period.
    ``expected_version`` (If-Match): ``VersionMismatch``, nothing deleted, when it is at another."""
    store.delete_job(
        owner, job_id, change=change(ChangeAction.DELETE, by, None, None), expected_version=expected_version
    )


def request_run(
    store: JobStore, owner: str, job_id: str, overrides: RunOverrides | None = None, *, by: str | None = None
) -> Job:
    """Ask for a run now, outside the schedule, with ``overrides`` for it (recorded in the
    change log, the overrides as shown: secrets masked)."""
    entry = change(ChangeAction.RUN, by, None, None)
    if entry is not None and overrides is not None:
        entry = Change(ChangeAction.RUN, entry.by, {"overrides": {"from": None, "to": dict(overrides.shown)}})
    return store.request_run(owner, job_id, overrides, change=entry)


def _write_edit(
    store: JobStore,
    owner: str,
    job_id: str,
    edit: Callable[[Job], Edit],
    expected_version: int | None = None,
    pause_of: Callable[[Job], tuple[bool, Pause | None]] | None = None,
    on_skips: SkipHook | None = None,
    action: ChangeAction = ChangeAction.UPDATE,
    by: str | None = None,
    chained: bool = False,
    as_read: Job | None = None,
) -> Job:
    """Read the job, plan the edit, write it (with its change-log entry: ``action`` by ``by``,
    the diff from the job as read) if the job is still what was read; again when it changed
    meanwhile. An update that changes nothing writes nothing (the job answered as read). ``pause_of`` (a pause or a resume): whether the edit is a pause, and the pause's
    record to write (without it, the record as read is kept). ``VersionMismatch`` when the
    caller's version is not the job's, ``EditConflict`` when it kept changing. ``chained`` (an
    update): the spec's chains are checked in the write's transaction (``chain_check``).
    ``as_read``: the job as the caller just read it, the first attempt's (the next ones read it)."""
    for attempt in range(EDIT_ATTEMPTS):
        current = as_read if attempt == 0 and as_read is not None else store.get_job(owner, job_id)
        if expected_version is not None and current.version != expected_version:
            raise VersionMismatch(current.version)
        spec, plan, trims = edit(current)
        pausing, pause = pause_of(current) if pause_of else (False, Pause.of(current))
        before = {**current.spec(), "state": str(current.state)}
        after = {**spec, "state": str(plan.state if plan else current.state)}
        if _changes_nothing(action, current, plan, spec_diff(before, after), pause):
            return current  # no write, no new version, no entry
        written = store.update_job(
            owner,
            job_id,
            spec,
            plan,
            version=current.version,
            planned_from=Plan.of(current) if plan else None,
            pause=pause,
            pausing=pausing,
            change=change(action, by, before, after),
            chains=chain_check(owner, job_id, spec) if chained else None,
            trims=trims,
        )
        if written is not None:
            if on_skips is not None and plan is not None and plan.skips:
                on_skips(plan.skips)
            return written
    raise EditConflict(job_id)


def _changes_nothing(action: ChangeAction, current: Job, plan: Plan | None, diff: Any, pause: Pause | None) -> bool:
    """Whether an edit leaves the job as it is: a PUT or PATCH of what it has, a resume of a job
    that is not paused, a pause of a completed job or again with the same record."""
    if action == ChangeAction.UPDATE:
        return plan is None and not diff
    if action == ChangeAction.RESUME:
        return current.state != JobState.PAUSED
    return current.state == JobState.COMPLETED or (current.state == JobState.PAUSED and pause == Pause.of(current))


def plan_completion(
    job: Job,
    outcome: Outcome,
    now: datetime,
    rng: random.Random | None,
    ran_scheduled_at: datetime | None,
    calendars: Sequence[Calendar] = (),
    ran_started_at: datetime | None = None,
    execution_id: str | None = None,
    ran_as: tuple[Trigger, int] | None = None,
    common: lifecycle.CommonPlans | None = None,
) -> Plan:
    """The job's columns after an attempt (``lifecycle.plan_completion``), marked ``delete``
    when the attempt completes a job whose ``after_completion`` is ``delete``: the store then
    deletes it with its executions in the transaction that records the completion. A final
    outcome (no retry to come) of a job with chains carries the runs it asks for (``chain``),
    written in the same transaction; ``execution_id`` is the cause they name. ``ran_as``: the
    execution's trigger and attempt (a failed backfill delivery is retried). ``common``: the
    batch's memo of the plans that are not a job's own (``lifecycle.plan_completion``)."""
    plan = lifecycle.plan_completion(
        job, outcome, now, rng, ran_scheduled_at, calendars, ran_started_at, ran_as, common
    )
    if plan.state == JobState.COMPLETED and job.after_completion == "delete":
        plan = Plan(plan.state, plan.scheduled_at, plan.attempt, plan.next_run_at, delete=True, skips=plan.skips)
    chained = job.chained(outcome)  # () for a job without chains: nothing more to do
    if chained and not retries.retries_in_hand(job, plan):
        plan = structs.replace(plan, chain=ChainRun(str(job.owner), chained, cause_of(job, outcome, execution_id)))
    return plan


def complete_executions(
    store: CompletionStore,
    completions: Sequence[Completion],
    rng: random.Random | None = None,
    on_skips: SkipHook | None = None,
) -> list[bool]:
    """Record how started executions ended and move their jobs on (retry, next occurrence or
    completed), releasing the leases; answers, in order, whether each was recorded (False:
    fenced, the token no longer holds the job).

    Those carrying their started row and the seconds since (``Completion.started`` and
    ``elapsed_seconds``) are planned from that row and written in one statement, valid only if
    the row is still that version; the rest, and any whose job changed meanwhile, are planned
    from the job as it is now (``complete_leased``), one by one. ``on_skips`` is told of the
    skipped occurrences recorded with them (called only when there are some).
    """
    recorded = [False] * len(completions)
    fast = [i for i, done in enumerate(completions) if done.started is not None and done.elapsed_seconds is not None]
    if fast:
        planned = []
        common: lifecycle.CommonPlans = {}  # the batch's jobs of one schedule and occurrence share a plan
        calendars = calendars_of_batch(store, [completions[i].started.job for i in fast])  # type: ignore[union-attr]
        for i in fast:
            done = completions[i]
            started: StartedExecution = done.started  # type: ignore[assignment]
            now = started.started_at + timedelta(seconds=max(done.elapsed_seconds or 0.0, 0.0))
            job = started.job
            named = (
                [calendars[(job.owner, n)] for n in job.exclude_calendars if (job.owner, n) in calendars]
                if job.exclude_calendars
                else ()
            )
            plan = plan_completion(
                job,
                done.outcome,
                now,
                rng,
                started.scheduled_at,
                named,
                started.started_at,
                done.execution_id,
                (started.trigger, started.attempt),
                common,
            )
            planned.append((done, plan))
        written = store.write_completions(planned)
        for i in fast:
            recorded[i] = str(completions[i].job_id) in written
        if on_skips is not None:
            _tell_skips(on_skips, [plan for done, plan in planned if str(done.job_id) in written])
    for i, done in enumerate(completions):
        if not recorded[i]:
            recorded[i] = _complete_from_the_job_as_it_is(store, done, rng, on_skips)
    return recorded


def _tell_skips(on_skips: SkipHook, plans: Sequence[Plan]) -> None:
    skips = [skip for plan in plans for skip in plan.skips]
    if skips:
        on_skips(skips)


def _complete_from_the_job_as_it_is(
    store: CompletionStore, done: Completion, rng: random.Random | None, on_skips: SkipHook | None = None
) -> bool:
    """Plan from the job as it is now (its lease still ours), write for that version; read again
    when an edit came between. False when fenced (or, after ``COMPLETION_ATTEMPTS``, when the
    job keeps changing: the lease then runs out and the execution is marked lost)."""
    for _ in range(COMPLETION_ATTEMPTS):
        leased = store.leased_job(done)
        if leased is None:
            return False
        calendars = job_calendars(store, leased.job)
        plan = plan_completion(
            leased.job,
            done.outcome,
            leased.now,
            rng,
            leased.ran_scheduled_at,
            calendars,
            leased.ran_started_at,
            done.execution_id,
            (leased.ran_trigger, leased.ran_attempt) if leased.ran_trigger else None,
        )
        if store.complete_leased(done, plan, leased):
            if on_skips is not None:
                _tell_skips(on_skips, [plan])
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
