"""The records of what happens to a job besides its runs: the occurrences skipped (and why), a
pause's record, a manual run's overrides, the runs a chain asks for, the change log's entries,
and a stored calendar. Frozen values, re-exported by ``scheduler.core.domain``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.core.enums import StoredEnum

if TYPE_CHECKING:
    from scheduler.core.domain import Job, Trigger


class SkipReason(StoredEnum):
    """Why an occurrence did not run (a skipped execution's ``skip_reason``)."""

    PAUSED = "paused"  # it fell while the job was paused, and the resume's policy does not run it
    OVERLAP = "overlap"  # it fell while the job's previous occurrence was still running (or retrying)
    WINDOW = "window"  # outside the job's start_at/end_at window
    CALENDAR = "calendar"  # excluded by one of the job's calendars
    MISSED = "missed"  # due while no runner ran it, and dropped by the missed_runs policy or its cap


@dataclass(frozen=True, slots=True)
class CalendarRecord:
    """A calendar as stored: its owner and name, its zone, its definition as given (``dates``,
    ``ranges``, ``yearly``, or ``ics``), and its version (one more at every change)."""

    owner: str
    name: str
    timezone: str
    definition: Mapping[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CalendarRecord:
        """The calendar of a store row."""
        return cls(
            owner=row["owner"],
            name=row["name"],
            timezone=row["timezone"],
            definition=row["definition"],
            version=row["version"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


@dataclass(frozen=True, slots=True)
class Skip:
    """Occurrences of a job that did not run, for one reason: ``count`` of them, the first at
    ``first``. Recorded as one execution with status ``skipped`` (coalesced: a long pause of a
    job firing every second is one row, not one a second)."""

    reason: SkipReason
    count: int
    first: datetime

    def as_json(self) -> list[Any]:
        """The skip as the store's statements read it (a JSON array: reason, count, first)."""
        return [str(self.reason), self.count, self.first.isoformat()]


@dataclass(frozen=True, slots=True)
class RecordedSkip:
    """A calendar-skipped row on record (its execution's ``id`` and ``started_at``, when it was
    recorded: its day's partition), its first occurrence and how many it counts. Recorded when
    a plan moved past them, possibly in advance: its occurrences may be still to come."""

    id: str
    started_at: datetime
    first: datetime
    count: int


@dataclass(frozen=True, slots=True)
class SkipTrim:
    """What an edit that replans a job from now keeps of a skipped row recorded in advance:
    ``kept`` of its occurrences, those that came to pass (0: none, the row is deleted)."""

    row: RecordedSkip
    kept: int


@dataclass(frozen=True, slots=True)
class Shift:
    """How a calendar moved the occurrence an execution ran (``on_excluded: shift``, 0025): the
    occurrence it was moved from and the calendar that excluded it."""

    shifted_from: datetime
    excluded_by: str


@dataclass(frozen=True, slots=True)
class BackfillRetry:
    """A failed backfill delivery's next attempt: the occurrence, the attempt it will be, when,
    and when the failed attempt started (``max_age_seconds``, a float or None, counts from the
    occurrence's first attempt: the store checks it)."""

    occurrence: datetime
    attempt: int
    at: datetime
    started_at: datetime
    max_age_seconds: float | None = None

    def as_json(self) -> list[Any]:
        """The retry as ``record_backfill_retries`` reads it, after its job's id."""
        times = (self.occurrence.isoformat(), self.attempt, self.at.isoformat(), self.started_at.isoformat())
        return [*times, self.max_age_seconds]


@dataclass(frozen=True, slots=True)
class Pause:
    """Why and until when a job is paused, by whom (a pause's note; ``until`` None: until resumed)."""

    note: str | None = None
    until: datetime | None = None
    by: str | None = None
    at: datetime | None = None  # when the job was paused (the store sets it at the pause)

    @classmethod
    def of(cls, job: Job) -> Pause | None:
        """The job's pause record (None when it has none)."""
        if job.paused_at is None and job.pause_note is None and job.pause_until is None:
            return None
        return cls(job.pause_note, job.pause_until, job.paused_by, job.paused_at)


@dataclass(frozen=True, slots=True)
class RunOverrides:
    """What a manual run changes of its delivery, for that run only: the body, headers merged
    over the target's, and ``vars`` for the body's ``{{vars.NAME}}`` placeholders.
    ``deliver`` is what the executor uses (credential-like header values as secret-box tokens),
    ``shown`` what the execution records (those values masked)."""

    deliver: Mapping[str, Any]
    shown: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ChainRun:
    """The runs a finished execution asks for: the jobs of ``owner`` named (by name or id) in
    ``jobs``, each to run once with ``cause``, the outcome of the execution that caused it
    (``execution_id``, ``job_id``, ``job_name``, ``status``, ``http_status``,
    ``response_excerpt``, ``error``): the ``{{cause.*}}`` placeholders of their bodies."""

    owner: str
    jobs: tuple[str, ...]
    cause: Mapping[str, Any]


class ChangeAction(StoredEnum):
    """What a change of a job did (an entry of its change log); a calendar's or a rule set's is
    one of ``create``, ``update``, ``delete``. ``replan`` is the system's own change of a job,
    made by a calendar's replacement (the caller who replaced it named as ``by``)."""

    CREATE = "create"
    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    RUN = "run"
    DELETE = "delete"
    # A calendar's replacement moved the job's occurrence in hand (0024).
    REPLAN = "replan"
    # Past occurrences queued for delivery (0027): the range and how many.
    BACKFILL = "backfill"


@dataclass(frozen=True, slots=True)
class Change:
    """A change to record with the write that makes it: who (``by``), what, and the diff of the
    job's fields (``{"field.path": {"from": old, "to": new}}``, secrets masked)."""

    action: ChangeAction
    by: str
    diff: Mapping[str, Any]


class ChangedKind(StoredEnum):
    """What, beside jobs, keeps a change log (0023): an owner's calendars and alert rule sets,
    each by its name."""

    CALENDAR = "calendar"
    ALERT_RULES = "alert_rules"


@dataclass(frozen=True, slots=True)
class ChangeEntry:
    """An entry of a change log, as recorded: the database's time, the version after it.
    ``subject``: the job's id, or the calendar's or rule set's name."""

    subject: str
    seq: int
    at: datetime
    by: str
    action: ChangeAction
    version: int
    diff: Mapping[str, Any]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ChangeEntry:
        """The entry of a ``job_changes`` or ``resource_changes`` row (its id or name as ``subject``)."""
        return cls(
            subject=str(row["subject"]),
            seq=row["seq"],
            at=row["at"],
            by=row["actor"],
            action=ChangeAction(row["action"]),
            version=row["version"],
            diff=row["diff"],
        )


@dataclass(frozen=True)
class DueBacklog:
    """The jobs due and not under way (no live lease: unleased, their lease expired, or their
    claim deferred for their owner's share of the leases), for the metrics and the helpers."""

    due: int = 0
    oldest_age_seconds: float = 0.0  # how long the one due longest has been due
    claimable: int = 0  # of them, those a claim can take now (not deferred): what helpers would claim


@dataclass(frozen=True)
class PartitionMaintenance:
    """What one retention pass over the executions' day partitions did."""

    created: int = 0
    dropped: int = 0
    default_moved: int = 0  # rows moved from the DEFAULT partition into their day's new partition
    default_purged: int = 0  # rows of the DEFAULT partition past the retention, deleted
    skipped: int = 0  # steps left to the next pass (a lock was not free at once)
    changes_purged: int = 0  # change-log entries of jobs, calendars, rule sets deleted past the retention (0016, 0023)


@dataclass(frozen=True)
class LeasedJob:
    """A job read while an execution's lease on it stands (completion's second path): the job as
    it is now, the database's now, and the occurrence and start time of the execution."""

    job: Job
    now: datetime
    ran_scheduled_at: datetime | None
    ran_started_at: datetime
    ran_trigger: Trigger | None = None
    ran_attempt: int = 1
