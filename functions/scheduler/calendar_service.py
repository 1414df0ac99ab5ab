"""The calendar operations: create and replace an owner's calendars (a replacement replans the
jobs that name them), and read the calendars a job or a batch of jobs names, compiled, for the
planning. ``service`` plans jobs with them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.core.domain import CalendarRecord, Job, JobState, Plan
from scheduler.core.errors import NotFound, ScheduleError
from scheduler.planning import lifecycle
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


def _checked_definition(name: str, definition: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(zone, the definition to store) of a calendar, compiled once to refuse a bad one (400)."""
    lifecycle.check_calendar(name, definition)
    kept = {key: definition[key] for key in ("dates", "ranges", "yearly", "ics") if definition.get(key) is not None}
    return definition.get("timezone") or "UTC", kept


def create_calendar(
    store: CalendarStore, owner: str, name: str, definition: Mapping[str, Any], *, by: str | None = None
) -> CalendarRecord:
    """A new calendar of the owner (``CalendarNameTaken``; ``ScheduleError`` naming the field),
    its change-log entry made by ``by``."""
    timezone, kept = _checked_definition(name, definition)
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
    still to come and no attempt is under way: one already due runs as planned)."""
    timezone, kept = _checked_definition(name, definition)
    record = store.replace_calendar(owner, name, timezone, kept, expected_version, by=by)
    for job_id, _ in store.jobs_using_calendar(owner, name):
        _replan(store, owner, job_id)
    return record


def _replan(store: JobStore, owner: str, job_id: str) -> None:
    """A job's occurrence in hand computed again with its calendars as they are now (when still to
    come and no attempt is under way), written if the job is still what was read."""
    for _ in range(REPLAN_ATTEMPTS):
        try:
            current = store.get_job(owner, job_id)
        except NotFound:
            return
        now = store.now()
        if current.state == JobState.COMPLETED or current.attempt > 0:
            return
        if current.scheduled_at is not None and current.scheduled_at <= now:
            return
        calendars = job_calendars(store, current)
        # The calendar exclusions before the occurrence in hand are on record: those from it on are new.
        plan = lifecycle.plan_first(current, now, current.state, calendars, recorded_until=current.scheduled_at)
        if plan == Plan.of(current):
            return
        written = store.update_job(
            owner, job_id, current.spec(), plan, version=current.version, planned_from=Plan.of(current)
        )
        if written is not None:
            return


def calendars_of_batch(store: CompletionStore, jobs: Sequence[Job]) -> dict[tuple[str | None, str], Calendar]:
    """The calendars the jobs of a batch name, in one read (none when no job names one: the
    hot path of jobs without calendars reads nothing more)."""
    wanted = {(job.owner, name) for job in jobs if job.owner is not None for name in job.exclude_calendars}
    if not wanted:
        return {}
    return {(record.owner, record.name): lifecycle.compile_calendar(record) for record in store.calendars_of(wanted)}
