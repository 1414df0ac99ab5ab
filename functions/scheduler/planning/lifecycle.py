"""What happens to a job's schedule columns on each event: creation, edit, pause, resume and the
end of an attempt. Pure functions of the job (``domain.Job``) and the database's ``now``; the
service layer (``scheduler.service``) hands them to the store, which applies their answers inside
the transaction that holds the row.

Every answer is a ``domain.Plan``: the columns ``state``, ``scheduled_at``, ``attempt`` and
``next_run_at``.

The steps of a plan: the job's schedule (:func:`schedule_of`: one expression, the union of its
``schedules``, or its ``run_at``) gives the occurrences; the ``start_at``/``end_at`` window and the
``missed_runs`` policy choose one (``schedules.first_run``/``plan_next``); the spread step
(:func:`_at`) fixes its fire time, ``next_run_at``, while ``scheduled_at`` keeps the occurrence.
A filter of the occurrences (a calendar's) belongs between the schedule and the policy, as a
``Schedule`` wrapping the job's.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from msgspec.structs import replace

from scheduler.core.domain import (
    CalendarRecord,
    ExecutionStatus,
    Job,
    JobState,
    LeaseKind,
    Outcome,
    Plan,
    Shift,
    Skip,
    SkipReason,
    Trigger,
)
from scheduler.planning.retries import (  # noqa: F401 (re-exported)
    MAX_RETRY_AFTER_SECONDS,
    backoff_seconds,
    retries_since,
    retry_backfill,
    retry_delay,
)
from scheduler.planning.skips import excluded_between, skipped, skipped_at_completion
from scheduler.schedules import (
    IntervalSchedule,
    Schedule,
    Spread,
    UnionSchedule,
    anchored,
    anchored_union,
    fire_time,
    first_run,
    interval_anchor,
    next_occurrence,
    one_off,
    parse_schedule,
    parse_union,
    plan_next,
)
from scheduler.schedules.base import ScheduleError, just_before
from scheduler.schedules.calendars import (
    MAX_CALENDARS_PER_JOB,
    Calendar,
    CalendarSchedule,
    build_calendar,
    with_calendars,
)
from scheduler.schedules.planning_time import planning_time_limit
from scheduler.schedules.shifts import shifted_from

__all__ = ["MAX_CALENDARS_PER_JOB", "Calendar", "check_calendar", "compile_calendar"]

# How long the runner may plan one job's next run against its calendars before it pauses the job
# (``plan_completion``): the recorder plans a batch of completions one after the other.
RUNNER_PLANNING_SECONDS = 5.0
# How many missed occurrences `run_all` catches up at most.
RUN_ALL_CAP = 10

_TINY = timedelta(microseconds=1)


Calendars = Sequence[Calendar]

# Compiled calendars by (owner, name, version, updated_at): a calendar changes version at every
# write, so a runner compiles each version once.
_COMPILED: dict[tuple[str, str, int, datetime], Calendar] = {}
_COMPILED_MAX = 1024


def check_calendar(name: str, definition: Mapping[str, Any]) -> Calendar:
    """A calendar's definition compiled, to refuse a bad one (``ScheduleError`` naming the field)."""
    return build_calendar(name, definition)


def compile_calendar(record: CalendarRecord) -> Calendar:
    """The calendar of a stored record, compiled once per version."""
    key = (record.owner, record.name, record.version, record.updated_at)
    found = _COMPILED.get(key)
    if found is None:
        found = build_calendar(record.name, {**record.definition, "timezone": record.timezone})
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = found
    return found


def schedule_of(job: Job, calendars: Calendars = ()) -> Schedule:
    """The job's schedule (its ``schedule``, the union of its ``schedules``, or its ``run_at``);
    rate()/@every count from start_at, else from creation. ``calendars``: those of the job's
    ``exclude_calendars`` (the caller reads them; a job naming none reads none), applied to the
    occurrences as its ``on_excluded`` says, before any spread."""
    if job.run_at is not None:
        return one_off(job.run_at)
    if job.created_at is None or (job.schedule is None and not job.schedules):
        raise ValueError("a job with a schedule carries it and its creation time")
    if job.schedule is not None:
        schedule = _parse_schedule(job.schedule, job.timezone or "UTC")
        if _counts_from_anchor(schedule):
            schedule = _anchored(schedule, interval_anchor(job.start_at, job.created_at))
    else:
        assert job.schedules is not None
        schedule = _parse_union(job.schedules, job.timezone or "UTC")
        if _counts_from_anchor(schedule):
            schedule = _anchored_union(schedule, interval_anchor(job.start_at, job.created_at))
    if not job.exclude_calendars or not calendars:
        return schedule
    # The base's occurrences up to the job's creation (or before its start_at) are not the job's:
    # one of them inside a span is not moved to the span's end (a run no schedule would make).
    since = job.created_at if job.start_at is None else max(job.created_at, just_before(job.start_at))
    return with_calendars(schedule, calendars, job.on_excluded, since=since)


# Schedules are immutable: a runner completing the same jobs again and again parses each
# expression once. Parsed without an anchor, then anchored (an interval only, cheaply): keyed by
# the job's anchor, jobs on one cron expression created at different seconds each had a parse of
# their own, and 10,000 of them overflowed the memo (about 35 us a completion instead of 6).
_parse_schedule = functools.lru_cache(maxsize=4096)(parse_schedule)
_parse_union = functools.lru_cache(maxsize=1024)(parse_union)
# Anchored per (schedule, anchor): jobs sharing a start_at share one object. A union with
# intervals too, so that its own search memo (UnionSchedule._memo) carries over from one run to
# the next.
_anchored = functools.lru_cache(maxsize=4096)(anchored)
_anchored_union = functools.lru_cache(maxsize=1024)(anchored_union)


@functools.lru_cache(maxsize=4096)
def _spread(job_id: str | None, window_seconds: int, mode: str) -> Spread:
    return Spread(window_seconds, mode, job_id or "")


def spread_of(job: Job) -> Spread | None:
    """The job's spread (seeded by its id), or None."""
    spread = job.spread
    if not spread:
        return None
    return _spread(job.id, spread["window_seconds"], spread.get("mode") or "stable")


def missed_before(job: Job, now: datetime) -> datetime:
    """The ``now`` the missed-run policy compares occurrences with: an occurrence is missed when
    its fire time passed, so with a spread, when it is older than ``now`` less its offset (the
    stable one; the whole window for random offsets, so that none is dropped early)."""
    if job.spread is None:
        return now
    spread = spread_of(job)
    if spread is None:
        return now
    slack = spread.offset(now) if spread.mode == "stable" else timedelta(seconds=spread.window_seconds)
    return now - slack


def _at(occurrence: datetime | None, state: JobState, job: Job) -> Plan:
    """The plan of ``occurrence``: held as ``scheduled_at`` (the run's name and key), due at its
    fire time (later by the job's spread, if any); completed when there is none."""
    if occurrence is None:
        return Plan(JobState.COMPLETED, None, 0, None)
    if job.spread is None:
        return Plan(state, occurrence, 0, occurrence)
    spread = spread_of(job)
    return Plan(state, occurrence, 0, fire_time(occurrence, spread))


def plan_first(
    job: Job,
    now: datetime,
    state: JobState = JobState.ACTIVE,
    calendars: Calendars = (),
    *,
    recorded_until: datetime | None = None,
) -> Plan:
    """A new job, or one whose schedule was edited: its first occurrence after ``now``. A
    one-off whose time is outside its start_at/end_at window never runs: it completes at once,
    its occurrence on record as skipped (``window``). The occurrences its calendars leave out
    before the one planned are on record as skipped (``calendar``), from ``now`` or, when later,
    from ``recorded_until`` (the occurrence a replanned job had in hand: those before it were
    on record when it was planned). A one-off whose time has passed is due at ``now``: its
    lateness counts from when it could first run, not from its past time."""
    schedule = schedule_of(job, calendars)
    occurrence = first_run(schedule, now, start_at=job.start_at, end_at=job.end_at)
    plan = _due_by(now, _at(occurrence, state, job))
    if occurrence is None and job.run_at is not None:
        return replace(plan, skips=(Skip(SkipReason.WINDOW, 1, job.run_at),))
    if isinstance(schedule, CalendarSchedule):
        after = now if recorded_until is None else max(now, recorded_until - _TINY)
        before = occurrence if occurrence is not None else job.end_at and job.end_at + _TINY
        if before is not None:
            return _excluding(plan, schedule, job, after, before)
    return plan


def _excluding(plan: Plan, schedule: Schedule, job: Job, after: datetime, before: datetime) -> Plan:
    """``plan`` with the occurrences the calendars left out between ``after`` and ``before``
    among its skips (``calendar``; a job without calendars never comes here)."""
    excluded = excluded_between(schedule, after, before, start_at=job.start_at, end_at=job.end_at)
    return replace(plan, skips=plan.skips + excluded) if excluded else plan


def _excluded_until(job: Job, occurrence: datetime | None, now: datetime) -> datetime:
    """Where a resume's or a completion's calendar skips end: at the occurrence planned; with none
    left, the calendars leave out the rest of the window: on record past its ``end_at`` (those
    after ``now`` too), else past ``now``."""
    if occurrence is not None:
        return occurrence
    return (now if job.end_at is None else max(now, job.end_at)) + _TINY


def plan_pause(job: Job) -> Plan:
    """Pausing keeps the occurrence in hand (shown as next_run_at) but nothing is due."""
    if job.state != JobState.ACTIVE:
        return Plan.of(job)
    return replace(Plan.of(job), state=JobState.PAUSED)


def missed_choice(job: Job, schedule: Schedule, pending: datetime, now: datetime) -> datetime | None:
    """The occurrence the job's ``missed_runs`` policy runs at ``now``, from ``pending`` (the
    occurrence in hand, missed) on: a resume's choice, and a late start's (``planning.attempts``)."""
    horizon = missed_before(job, now)
    return plan_next(
        schedule,
        just_before(pending),
        horizon,
        job.missed_runs,
        start_at=job.start_at,
        end_at=job.end_at,
        cap=RUN_ALL_CAP,
    )


def plan_resume(job: Job, now: datetime, calendars: Calendars = ()) -> Plan:
    """Resuming applies the ``missed_runs`` policy to the occurrences missed while paused. An
    attempt whose time passed during the pause (a catch-up, a retry) is due at the resume: its
    execution's lateness (``due_at``) counts from then, not from the pause. The occurrences the
    policy does not run (those from the one in hand to the one planned) are on record as one
    skip (``paused``)."""
    if job.state != JobState.PAUSED:
        return Plan.of(job)
    pending = job.scheduled_at
    if pending is None:
        return plan_first(job, now, calendars=calendars)
    if job.attempt > 0 or pending >= now:
        return _due_by(now, replace(Plan.of(job), state=JobState.ACTIVE))
    schedule = schedule_of(job, calendars)
    occurrence = missed_choice(job, schedule, pending, now)
    bound = now + _TINY if occurrence is None else occurrence
    skips = skipped(schedule, SkipReason.PAUSED, pending - _TINY, bound, start_at=job.start_at, end_at=job.end_at)
    plan = replace(_at(occurrence, JobState.ACTIVE, job), skips=skips)
    if isinstance(schedule, CalendarSchedule):
        plan = _excluding(plan, schedule, job, pending - _TINY, _excluded_until(job, occurrence, now))
    return _due_by(now, plan)


# How far before the end of the run that held it an occurrence stays due (``_held``): half of
# the lateness past which a first attempt counts as missed (``planning.attempts``).
HELD_DUE_BOUND = timedelta(seconds=60)


def _held(job: Job, now: datetime, plan: Plan, ran_started_at: datetime | None) -> Plan:
    """``plan`` keeping an active job's occurrence in hand after another run of the job (manual,
    chained, backfill, or one an edit replaced): due when that run ended if its time passed
    meanwhile. Held back by the job's own run (one at a time), it is not missed. One already due
    when that run began (``ran_started_at``) stays due from then: ahead of a run now asked for
    while that run went on, so that requests made one after another never hold it back. (From
    no earlier than ``HELD_DUE_BOUND`` before now, so that a long run does not make it look missed
    to the runner that starts it: only a request made in a run's first part can then go first.)"""
    if job.state != JobState.ACTIVE:
        return plan
    due = plan.next_run_at
    if due is not None and ran_started_at is not None and due <= ran_started_at:
        return replace(plan, next_run_at=max(ran_started_at, now - HELD_DUE_BOUND))
    return _due_by(now, plan)


def _due_by(now: datetime, plan: Plan) -> Plan:
    """``plan`` with a next attempt in the past moved to ``now`` (the occurrence stays as it was)."""
    if plan.next_run_at is not None and plan.next_run_at < now:
        return replace(plan, next_run_at=now)
    return plan


# A batch's memo of common plans (``plan_completion``'s ``common``): by the fields that make a
# job's next occurrence, its plan, or what stands for "plan it alone" (_ALONE) or "ask again with
# the job's creation time" (_BY_ANCHOR, an interval counting from it).
CommonPlans = dict[tuple[Any, ...], Any]
_ALONE = object()
_BY_ANCHOR = object()


def _common_plan(
    job: Job, outcome: Outcome, now: datetime, ran_occurrence: datetime | None, common: CommonPlans
) -> Plan | None:
    """``plan_completion``'s answer when nothing about it is the job's own: an attempt at the
    occurrence in hand that succeeded (or failed for good at once), of a job with no spread and
    no calendars, whose next occurrence is still to come (nothing was missed, so ``now`` and the
    ``missed_runs`` policy change nothing). Made once for the jobs of a batch that share their
    schedule and occurrence, and answered from ``common`` for the others; None otherwise."""
    if (
        job.lease_kind != LeaseKind.SCHEDULE
        or job.spread is not None
        or job.exclude_calendars
        or job.scheduled_at is None
        or ran_occurrence != job.scheduled_at
        or (outcome.retryable and outcome.status != ExecutionStatus.SUCCEEDED)
    ):
        return None
    key: tuple[Any, ...] = (
        job.schedule,
        job.schedules,
        job.run_at,
        job.timezone,
        job.start_at,
        job.end_at,
        job.state,
        job.scheduled_at,
    )
    plan = common.get(key)
    if plan is None:
        plan = common[key] = _nothing_missed(job, anchored=False)
    if plan is _BY_ANCHOR:
        key = (key, job.created_at)
        plan = common.get(key)
        if plan is None:
            plan = common[key] = _nothing_missed(job, anchored=True)
    if plan is _ALONE or (plan.next_run_at is not None and plan.next_run_at <= now):
        return None  # an occurrence was missed: the policy decides, with the job's own now
    return plan


def _nothing_missed(job: Job, anchored: bool) -> Any:
    """The plan of the next occurrence after the one in hand, assuming none was missed (the
    caller checks): the next occurrence, or completion for a one-off that has run; _ALONE when
    the schedule ended (its skips are the job's own), _BY_ANCHOR when the schedule counts from
    the job's creation and ``anchored`` is False."""
    schedule = schedule_of(job)
    if not anchored and job.start_at is None and _counts_from_anchor(schedule):
        return _BY_ANCHOR
    occurrence = next_occurrence(schedule, job.scheduled_at, start_at=job.start_at, end_at=job.end_at)  # type: ignore[arg-type]
    if occurrence is None:
        return Plan(JobState.COMPLETED, None, 0, None) if schedule.one_off else _ALONE
    return _at(occurrence, job.state if job.state != JobState.COMPLETED else JobState.ACTIVE, job)


def _counts_from_anchor(schedule: Schedule) -> bool:
    """Whether the schedule's occurrences count from its job's anchor (an interval, alone or in a
    union), which is its creation time when it has no start_at."""
    if isinstance(schedule, IntervalSchedule):
        return True
    return isinstance(schedule, UnionSchedule) and any(isinstance(m, IntervalSchedule) for m in schedule.members)


def plan_completion(
    job: Job,
    outcome: Outcome,
    now: datetime,
    rng: random.Random | None = None,
    ran_occurrence: datetime | None = None,
    calendars: Calendars = (),
    ran_started_at: datetime | None = None,
    ran_as: tuple[Trigger, int] | None = None,
    common: CommonPlans | None = None,
) -> Plan:
    """The job's columns after an attempt: a durable retry, the next occurrence, or completion.

    A manual run leaves the occurrence in hand alone (the store clears its request), and so does
    an attempt at an occurrence that an edit replaced meanwhile (``ran_occurrence`` differs from
    the job's ``scheduled_at``). Retries stop at
    ``max_attempts``, on a permanent failure, or when the next attempt would start later than
    ``max_age_seconds`` after the occurrence's scheduled time. The occurrences the next one
    planned leaves behind are on record as skips (``skipped_at_completion``: ``missed`` or
    ``overlap``, by the attempt's start ``ran_started_at``). A failed backfill delivery
    (``ran_as``: the execution's trigger and attempt) is retried under the same policy
    (``Plan.backfill_retry``; ``max_age_seconds`` counts from its first attempt). An occurrence
    that a calendar moved (``on_excluded: shift``) is on record with where from (``Plan.shift``).

    ``common``: a batch's memo (an empty dict to begin with), where the plans that are not the
    job's own (:func:`_common_plan`) are made once for the batch's jobs of one schedule and
    occurrence; the answer is the same.

    A job whose calendars take more than ``RUNNER_PLANNING_SECONDS`` to plan against (many
    excluded spans, one after the other) is paused instead (``Plan.parked``, its pause's note):
    one job's planning never holds up the runner's other completions for longer than that.
    """
    if common is not None and (shared := _common_plan(job, outcome, now, ran_occurrence, common)) is not None:
        return shared
    try:
        if not calendars:  # (no calendar, no time limit to set: nothing of it is long to plan)
            return _planned_completion(job, outcome, now, rng, ran_occurrence, calendars, ran_started_at, ran_as)
        with planning_time_limit(RUNNER_PLANNING_SECONDS):
            plan = _planned_completion(job, outcome, now, rng, ran_occurrence, calendars, ran_started_at, ran_as)
            shift = shift_of_run(job, ran_occurrence, calendars, ran_as)
    except ScheduleError as exc:  # the one job paused, not the batch of completions failed
        return Plan(JobState.PAUSED, None, 0, None, parked=f"paused by the scheduler: {exc.message}; then resume it")
    return plan if shift is None else replace(plan, shift=shift)


def shift_of_run(
    job: Job, ran_occurrence: datetime | None, calendars: Calendars, ran_as: tuple[Trigger, int] | None
) -> Shift | None:
    """How a calendar moved the occurrence that ran (``on_excluded: shift``), for its execution's
    record; None when it was not moved, and for a manual or chained run (its time is its
    request's). Only a job with calendars pays for the look."""
    if not calendars or job.on_excluded != "shift" or ran_occurrence is None or job.run_at is not None:
        return None
    manual = ran_as[0] in (Trigger.MANUAL, Trigger.CHAIN) if ran_as else job.lease_kind == LeaseKind.MANUAL
    schedule = schedule_of(job, calendars)
    if manual or not isinstance(schedule, CalendarSchedule):
        return None
    found = shifted_from(schedule.base, schedule.calendars, ran_occurrence, schedule.since)
    return None if found is None else Shift(*found)


def _planned_completion(
    job: Job,
    outcome: Outcome,
    now: datetime,
    rng: random.Random | None,
    ran_occurrence: datetime | None,
    calendars: Calendars,
    ran_started_at: datetime | None,
    ran_as: tuple[Trigger, int] | None,
) -> Plan:
    """``plan_completion``'s plan of the job's columns, made for this job alone."""
    if job.lease_kind == LeaseKind.MANUAL:
        if ran_as is not None and ran_as[0] == Trigger.BACKFILL and ran_occurrence and ran_started_at:
            return _held(
                job,
                now,
                retry_backfill(job, outcome, now, rng, (ran_occurrence, ran_as[1], ran_started_at)),
                ran_started_at,
            )
        return _held(job, now, Plan.of(job), ran_started_at)  # the store clears the request that ran
    scheduled = job.scheduled_at
    if ran_occurrence is not None and scheduled != ran_occurrence:
        # The job was edited while this attempt ran: the occurrence in hand is the new plan's
        # first one, not the one that ran. Keep it.
        return _held(job, now, Plan.of(job), ran_started_at)
    attempt = int(job.attempt or 0)
    # The retry policy is read only when the attempt failed (a success needs none of it).
    if outcome.status != ExecutionStatus.SUCCEEDED and outcome.retryable:
        retry = job.retry_policy
        if attempt < retry.max_attempts:
            retry_at = now + retry_delay(retry, attempt, outcome, rng)
            max_age = retry.max_age_seconds
            if not max_age or retry_at <= retries_since(job, scheduled or now) + timedelta(seconds=max_age):
                return replace(Plan.of(job), next_run_at=retry_at)
    schedule = schedule_of(job, calendars)
    horizon = missed_before(job, now)  # an occurrence is missed once its fire time passed
    occurrence = plan_next(
        schedule, scheduled or now, horizon, job.missed_runs, start_at=job.start_at, end_at=job.end_at, cap=RUN_ALL_CAP
    )
    state = job.state if job.state != JobState.COMPLETED else JobState.ACTIVE
    plan = _at(occurrence, state, job)
    if scheduled is None or schedule.one_off:
        return plan
    if isinstance(schedule, CalendarSchedule):  # only a job with calendars pays for them
        plan = _excluding(plan, schedule, job, scheduled, _excluded_until(job, occurrence, horizon))
    if occurrence is not None and occurrence > horizon and job.missed_runs != "skip":
        return plan  # run_once and run_all plan a later occurrence only when none was missed
    skips = skipped_at_completion(
        schedule,
        scheduled,
        occurrence,
        horizon,
        attempt=attempt,
        started_at=ran_started_at,
        start_at=job.start_at,
        end_at=job.end_at,
    )
    # A missed occurrence run now (run_once, run_all's catch-ups) is due now, as a resume's is:
    # its execution's due_at, and so its lateness, does not count the time it was missed.
    return _due_by(now, replace(plan, skips=skips + plan.skips) if skips else plan)
