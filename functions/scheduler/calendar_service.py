"""The calendar operations: create and replace an owner's calendars (a replacement replans the
jobs that name them), and read the calendars a job or a batch of jobs names, compiled, for the
planning. ``service`` plans jobs with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler.core.domain import CalendarRecord, Change, ChangeAction, Job, JobState, Plan
from scheduler.core.errors import NotFound, ScheduleError
from scheduler.core.records import SkipTrim
from scheduler.core.timeutil import format_time
from scheduler.planning import lifecycle, skips
from scheduler.planning.lifecycle import MAX_CALENDARS_PER_JOB, Calendar
from scheduler.ports import CalendarJobStore, CalendarStore, CompletionStore, JobStore

# How many times a replan reads the job again when it changed meanwhile.
REPLAN_ATTEMPTS = 5


def named_calendars(store: JobStore, owner: str, names: Sequence[str]) -> list[Calendar]:
    """The owner's calendars of these names, compiled, in order; a name that is not one of them
    is a ``ScheduleError`` on ``exclude_calendars`` (a 400)."""
    if len(names) > MAX_CALENDARS_PER_JOB:
        raise ScheduleError(f"names at most {MAX_CALENDARS_PER_JOB} calendars", field="exclude_calendars")
    found = {record.name: record for record in store.calendars_of((owner, name) for name in names)} if names else {}
    for i, name in enumerate(names):
        if name not in found:
            raise ScheduleError(f"no calendar named {name!r} (create it first)", field=f"exclude_calendars.{i}")
    return [lifecycle.compile_calendar(found[name]) for name in names]


def job_calendars(store: JobStore | CompletionStore, job: Job) -> list[Calendar]:
    """The calendars a stored job names (those that still exist); none read for a job naming none."""
    if not job.exclude_calendars or job.owner is None:
        return []
    records = {record.name: record for record in store.calendars_of((job.owner, n) for n in job.exclude_calendars)}
    return [lifecycle.compile_calendar(records[n]) for n in job.exclude_calendars if n in records]


def skips_to_trim(store: JobStore, current: Job, now: datetime | None) -> tuple[SkipTrim, ...]:
    """When an edit replans ``current`` from ``now`` (its occurrences or its exclusions changed:
    its calendars, ``on_excluded``; or it had none in hand), or ends it there (a new ``end_at``
    before the occurrence in hand), what is left of the calendar-skipped rows it recorded in
    advance: the new plan records its own from ``now`` (``skips.trimmed_at_replan``, counted with
    the job as it was, and its calendars as they are). A job without calendars, or an edit with
    no ``now`` (its plan keeps what was recorded), reads nothing."""
    if now is None or not current.exclude_calendars or current.id is None:
        return ()
    recorded = store.calendar_skips_ahead(str(current.id), now)
    if not recorded:
        return ()
    schedule = lifecycle.schedule_of(current, job_calendars(store, current))
    return skips.trimmed_at_replan(schedule, recorded, now, start_at=current.start_at, end_at=current.end_at)


def replanned_from(current: Job, new: Job, now: datetime, since: datetime | None) -> datetime | None:
    """From when an edit's plan (``since``: it keeps the occurrence in hand) no longer holds the
    calendar-skipped rows ``current`` recorded in advance (None: it holds them all): ``now`` when
    its occurrences or exclusions changed; when its new ``end_at`` ends it before the occurrence
    in hand, that end (``now`` if it passed): the rows past it record occurrences that will not
    come."""
    if since is None:
        return now
    ends = new.end_at
    if ends is not None and current.scheduled_at is not None and ends < current.scheduled_at:
        return max(now, ends)
    return None


def _checked_definition(name: str, definition: Mapping[str, Any]) -> tuple[str, dict[str, Any], Calendar]:
    """(zone, the definition to store, the calendar compiled) of a calendar, compiled once to
    refuse a bad one (400)."""
    compiled = lifecycle.check_calendar(name, definition)
    kept = {key: definition[key] for key in ("dates", "ranges", "yearly", "ics") if definition.get(key) is not None}
    return definition.get("timezone") or "UTC", kept, compiled


# What a job that would complete at once is told (its creation, and the preview of its fields).
NEVER_BETWEEN_NOW_AND_END = "never fires between now and end_at"


def calendars_leave_no_run(has_end_at: bool) -> str:
    """The message of a schedule its calendars leave with no run (before its end_at, else in the
    search horizon)."""
    within = "before its end_at" if has_end_at else "in the coming 50 years"
    return f"leave no run of the schedule {within} (the job would complete at once, for good)"


def refuse_a_schedule_left_without_runs(job: Job, plan: Plan, now: datetime, calendars: Sequence[Calendar]) -> None:
    """A recurring job that would run without its calendars but that they leave with no run in
    the search horizon (50 years: a job would otherwise complete at once, for good) is refused:
    ``ScheduleError`` on ``exclude_calendars``."""
    if plan.state != JobState.COMPLETED or job.run_at is not None or not calendars:
        return
    if lifecycle.plan_first(job, now, calendars=()).state == JobState.COMPLETED:
        return  # it ends without them too (its end_at)
    raise ScheduleError(calendars_leave_no_run(job.end_at is not None), field="exclude_calendars")


def create_calendar(
    store: CalendarStore, owner: str, name: str, definition: Mapping[str, Any], *, by: str | None = None
) -> CalendarRecord:
    """A new calendar of the owner (``CalendarNameTaken``; ``ScheduleError`` naming the field),
    its change-log entry made by ``by``."""
    timezone, kept, _ = _checked_definition(name, definition)
    return store.insert_calendar(owner, name, timezone, kept, by=by)


def replace_calendar(
    store: CalendarJobStore,
    owner: str,
    name: str,
    definition: Mapping[str, Any],
    expected_version: int | None = None,
    *,
    by: str | None = None,
) -> CalendarRecord:
    """Replace a calendar (only at ``expected_version`` when given: If-Match; its change-log
    entry made by ``by``), then replan the jobs that name it (their occurrence in hand, when it is
    still to come and no attempt is under way: one already due runs as planned). A job whose
    occurrence moves gets a ``replan`` entry in its own change log, made by ``by`` too.

    Every job naming it is read once, with the calendars they name, for both the check and the
    replan; a job edited in between is read again when its write finds it changed."""
    timezone, kept, compiled = _checked_definition(name, definition)
    jobs = store.jobs_naming_calendar(owner, name)
    named = calendars_of_batch(store, jobs)
    candidate = {**named, (owner, name): compiled}  # the calendars as they would be
    _refuse_if_jobs_would_stop(jobs, candidate, store.now(), next(iter(kept), "dates"))
    record = store.replace_calendar(owner, name, timezone, kept, expected_version, by=by)
    named[(owner, name)] = lifecycle.compile_calendar(record)
    for job in jobs:
        _replan(store, job, _named_by(job, named), record, by)
    return record


def _named_by(job: Job, named: Mapping[tuple[str | None, str], Calendar]) -> list[Calendar]:
    """The calendars of ``named`` that ``job`` names, in its order (one gone since is left out)."""
    return [named[(job.owner, n)] for n in job.exclude_calendars if (job.owner, n) in named]


def _refuse_if_jobs_would_stop(
    jobs: Sequence[Job], named: Mapping[tuple[str | None, str], Calendar], now: datetime, field: str
) -> None:
    """Refuse (``ScheduleError`` on ``field``) a calendar that would leave a job naming it, active
    or paused, with no run in the coming 50 years (``named``: the calendars as they would be):
    replanned, the job would complete, for good, without a word (a paused one too: its resume
    would find it completed)."""
    stopped = []
    for job in jobs:
        if job.state == JobState.COMPLETED or job.run_at is not None:
            continue
        calendars = _named_by(job, named)
        try:
            refuse_a_schedule_left_without_runs(
                job, lifecycle.plan_first(job, now, calendars=calendars), now, calendars
            )
        except ScheduleError:
            stopped.append(str(job.name))
    if stopped:
        raise ScheduleError(
            f"would leave no run in the coming 50 years to the jobs {', '.join(sorted(stopped)[:10])}"
            + (f" and {len(stopped) - 10} more" if len(stopped) > 10 else "")
            + " (they would complete at once, for good)",
            field=field,
        )


def replan_change(calendar: CalendarRecord, by: str | None, was: Plan, plan: Plan) -> Change | None:
    """The ``replan`` entry of a job's change log for a replan by ``calendar`` (replaced by
    ``by``; None without a caller to name): the calendar's version and the schedule columns that
    moved, each as ``{"from", "to"}`` like an edit's diff."""
    if by is None:
        return None
    diff: dict[str, Any] = {
        f"calendars.{calendar.name}.version": {"from": calendar.version - 1, "to": calendar.version}
    }
    if plan.state != was.state:
        diff["state"] = {"from": str(was.state), "to": str(plan.state)}
    for field in ("scheduled_at", "next_run_at"):
        before, after = getattr(was, field), getattr(plan, field)
        if before != after:
            diff[field] = {"from": format_time(before), "to": format_time(after)}
    return Change(ChangeAction.REPLAN, by, diff)


def _replan(store: JobStore, job: Job, calendars: Sequence[Calendar], calendar: CalendarRecord, by: str | None) -> None:
    """A job's occurrence in hand computed again with its calendars as they are now (when still to
    come and no attempt is under way), written if the job is still what was read, with its
    ``replan`` entry (``replan_change``); read again when it changed since."""
    current: Job | None = job
    for attempt in range(REPLAN_ATTEMPTS):
        if current is None:
            return
        now = store.now()
        if current.state == JobState.COMPLETED or current.attempt > 0:
            return
        if current.scheduled_at is not None and current.scheduled_at <= now:
            return
        # The calendar exclusions before the occurrence in hand are on record: those from it on are new.
        plan = lifecycle.plan_first(current, now, current.state, calendars, recorded_until=current.scheduled_at)
        was = Plan.of(current)
        if plan == was:
            return
        written = store.update_job(
            str(current.owner),
            str(current.id),
            current.spec(),
            plan,
            version=current.version,
            planned_from=was,
            change=replan_change(calendar, by, was, plan),
        )
        if written is not None or attempt == REPLAN_ATTEMPTS - 1:
            return
        try:
            current = store.get_job(str(current.owner), str(current.id))
        except NotFound:
            return
        calendars = job_calendars(store, current)


def calendars_of_batch(
    store: JobStore | CompletionStore, jobs: Sequence[Job]
) -> dict[tuple[str | None, str], Calendar]:
    """The calendars the jobs of a batch name, in one read (none when no job names one: the
    hot path of jobs without calendars reads nothing more)."""
    wanted = {(job.owner, name) for job in jobs if job.owner is not None for name in job.exclude_calendars}
    if not wanted:
        return {}
    return {(record.owner, record.name): lifecycle.compile_calendar(record) for record in store.calendars_of(wanted)}
