"""The ports: what each part of the scheduler needs of the storage, as small ``Protocol``s.

``scheduler.store.postgres.Store`` (Postgres) provides all of them; the API, the service layer,
the fan-out and the executor are written against these, so none of them imports the concrete
store and a test may hand any object that has the methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from scheduler.core.alerts import AlertDecision, AlertDelivery, AlertJobRow, AlertRuleRecord, HeldAlertState
from scheduler.core.domain import (
    CalendarRecord,
    Change,
    ChangedKind,
    ChangeEntry,
    Claim,
    Completion,
    DueBacklog,
    Execution,
    ExecutionStatus,
    Job,
    JobState,
    LeasedJob,
    PartitionMaintenance,
    Pause,
    Plan,
    RunOverrides,
    StartedExecution,
)
from scheduler.core.limits import SlotHandBack, TargetLimit
from scheduler.core.records import RecordedSkip, SkipTrim


class ChainLookup(Protocol):
    """The reads of a chain check (``chain_service.check_chains``), in the write's transaction."""

    def chain_links(self, owner: str) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The owner's jobs that chain to others: id -> (name, the names or ids they run next)."""
        ...

    def resolve_jobs(self, owner: str, refs: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The owner's jobs named by ``refs`` (names or ids): ref -> (id, name)."""
        ...


# A write's chain check: run by the store in the write's transaction, the owner's chains held
# (``ChainError`` refuses the write).
ChainCheck = Callable[[ChainLookup], None]


class JobStore(Protocol):
    """What the API (and ``scheduler.service``) needs: the jobs and executions of an owner, and
    the database clock."""

    def insert_job(
        self,
        owner: str,
        spec: Mapping[str, Any],
        plan: Plan,
        *,
        created_at: datetime,
        job_id: str | None = None,
        change: Change | None = None,
        chains: ChainCheck | None = None,
    ) -> Job:
        """Insert a job with its first plan, made at ``created_at`` (``NameTaken`` for a name
        taken), and its change-log entry in the same transaction; ``chains`` checked in it, the
        owner's chains held."""
        ...

    def get_job(self, owner: str, job_id: str) -> Job:
        """One job of the owner (``NotFound``)."""
        ...

    def list_jobs(
        self,
        owner: str,
        *,
        state: JobState | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        limit: int = 50,
        after_name: str | None = None,
    ) -> list[Job]:
        """A page of the owner's jobs in name order, after ``after_name``."""
        ...

    def update_job(
        self,
        owner: str,
        job_id: str,
        spec: Mapping[str, Any],
        plan: Plan | None,
        *,
        version: int,
        planned_from: Plan | None = None,
        pause: Pause | None = None,
        pausing: bool = False,
        change: Change | None = None,
        chains: ChainCheck | None = None,
        trims: Sequence[SkipTrim] = (),
    ) -> Job | None:
        """Write the spec, the pause's record (``pause``; ``pausing`` for a pause) and the plan
        with its skipped occurrences, if the job is still ``version`` (and the run state
        ``planned_from``), with the change-log entry, ``chains`` checked and the skipped rows
        recorded in advance trimmed (``trims``) in the same transaction (the owner's chains
        held); None when it changed meanwhile."""
        ...

    def calendar_skips_ahead(self, job_id: str, now: datetime) -> list[RecordedSkip]:
        """The job's calendar-skipped rows whose first occurrence is after ``now``, and the latest
        whose first is not (what an edit replanning it from ``now`` may trim)."""
        ...

    def delete_job(
        self, owner: str, job_id: str, *, change: Change | None = None, expected_version: int | None = None
    ) -> None:
        """Delete the job and its executions, keep its change log with ``change`` (``NotFound``;
        ``VersionMismatch``, nothing deleted, when ``expected_version`` is not the job's)."""
        ...

    def insert_backfill(
        self,
        owner: str,
        job_id: str,
        occurrences: Sequence[datetime],
        interval_seconds: float,
        change: Change | None = None,
    ) -> str | None:
        """Record a backfill of the job's occurrences (with ``change``'s entry in its change
        log); its id (None: not the owner's job)."""
        ...

    def request_run(
        self, owner: str, job_id: str, overrides: RunOverrides | None = None, *, change: Change | None = None
    ) -> Job:
        """Ask for a run now, outside the schedule, with ``overrides`` for it and its change-log
        entry (``NotFound``)."""
        ...

    def list_changes(
        self, owner: str, job_id: str, *, limit: int = 50, before_seq: int | None = None
    ) -> list[ChangeEntry]:
        """A page of a job's change log, newest first (kept after a delete; ``NotFound``)."""
        ...

    def list_executions(
        self,
        owner: str,
        job_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        before_seq: int | None = None,
        before_started_at: datetime | None = None,
    ) -> list[Execution]:
        """A page of a job's executions, newest first (``NotFound`` for another owner's job)."""
        ...

    def now(self) -> datetime:
        """The database clock."""
        ...

    def calendars_of(self, wanted: Iterable[tuple[str, str]]) -> list[CalendarRecord]:
        """The calendars named by ``(owner, name)`` pairs, those that exist (a job's planning)."""
        ...

    def find_owner_execution(self, owner: str, execution_id: str) -> Execution | None:
        """One of the owner's executions by id, with its job's name; None when not the owner's."""
        ...

    def list_owner_executions(
        self,
        owner: str,
        *,
        status: ExecutionStatus | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[Execution]:
        """A page of the owner's executions across their jobs, newest first."""
        ...

    def list_alerts(
        self,
        owner: str,
        *,
        job_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[AlertDelivery]:
        """A page of the owner's alert deliveries, newest first."""
        ...


class AlertStore(Protocol):
    """What the alert sweep needs (``scheduler.runner.alerts``): the jobs with rules, a job's
    alert state held while its rules decide, and the alert deliveries to send and record."""

    def alert_work(self) -> bool:
        """Whether a sweep has anything to do: a job with rules, or an alert still to send."""
        ...

    def alert_jobs(self, limit: int = 500) -> list[AlertJobRow]:
        """The jobs with alert rules, those checked longest ago first."""
        ...

    def sweep_alerts(self, job_id: str, decide: Callable[[HeldAlertState, Sequence[Execution]], AlertDecision]) -> int:
        """Decide on the job's executions since its last sweep, its state held; the alerts queued."""
        ...

    def claim_alert_deliveries(self, limit: int, lease_seconds: float) -> list[AlertDelivery]:
        """Pending alerts due for an attempt, leased for their target's timeout and ``lease_seconds``."""
        ...

    def extend_alert_leases(self, leases: Sequence[tuple[str, int, float]]) -> set[str]:
        """Keep alerts being sent, each ``(id, attempt, seconds)`` more from now: the ids kept."""
        ...

    def purge_alerts(self, retention_days: int) -> int:
        """Delete alerts past the retention (delivered or given up): how many."""
        ...

    def record_alert_delivery(
        self,
        delivery_id: str,
        status: str,
        *,
        error: str | None,
        http_status: int | None,
        retry_in: float = 0.0,
        attempt: int | None = None,
    ) -> bool:
        """An attempt's outcome (``delivered``, ``failed``, or ``pending`` again in ``retry_in`` s),
        written only while it is the alert's ``attempt`` (its lease); whether it was written."""
        ...


class CalendarStore(Protocol):
    """An owner's calendars (the API, ``scheduler.service``), and those a batch of jobs name."""

    def insert_calendar(
        self, owner: str, name: str, timezone: str, definition: Mapping[str, Any], *, by: str | None = None
    ) -> CalendarRecord:
        """A new calendar (``CalendarNameTaken`` for a name taken); its change-log entry made by
        ``by`` (none without)."""
        ...

    def get_calendar(self, owner: str, name: str) -> CalendarRecord:
        """One calendar of the owner (``CalendarNotFound``)."""
        ...

    def list_calendars(self, owner: str, *, limit: int = 50, after_name: str | None = None) -> list[CalendarRecord]:
        """A page of the owner's calendars in name order."""
        ...

    def replace_calendar(
        self,
        owner: str,
        name: str,
        timezone: str,
        definition: Mapping[str, Any],
        expected_version: int | None = None,
        *,
        by: str | None = None,
    ) -> CalendarRecord:
        """Replace a calendar's zone and definition (``CalendarNotFound``; ``VersionMismatch``
        when ``expected_version`` is given and it is at another); its change-log entry made by
        ``by``."""
        ...

    def delete_calendar(
        self, owner: str, name: str, *, by: str | None = None, expected_version: int | None = None
    ) -> None:
        """Delete a calendar no job names (``CalendarNotFound``, ``CalendarInUse``;
        ``VersionMismatch`` when ``expected_version`` is not its version); its change-log entry
        made by ``by``."""
        ...

    def list_resource_changes(
        self, owner: str, kind: ChangedKind, name: str, *, limit: int = 50, before_seq: int | None = None
    ) -> list[ChangeEntry]:
        """A page of a calendar's or a rule set's change log, newest first (kept after a delete)."""
        ...

    def jobs_naming_calendar(self, owner: str, name: str) -> list[Job]:
        """Every job of the owner's that names the calendar."""
        ...

    def calendars_of(self, wanted: Iterable[tuple[str, str]]) -> list[CalendarRecord]:
        """The calendars named by ``(owner, name)`` pairs, those that exist."""
        ...


class AlertRuleStore(Protocol):
    """An owner's alert rule sets by tag (the API)."""

    def put_alert_rule(
        self,
        owner: str,
        name: str,
        tag: str,
        alerts: Sequence[Mapping[str, Any]],
        expected_version: int | None = None,
        *,
        by: str | None = None,
        create_only: bool = False,
    ) -> tuple[AlertRuleRecord, bool]:
        """Create or replace a rule set: the record, and whether it was created. With
        ``expected_version``, only replace that version (``VersionMismatch`` otherwise, its
        ``current`` None when there is no set to replace); with ``create_only``, only create it
        (``AlertRuleExists`` otherwise). Its change-log entry made by ``by``."""
        ...

    def get_alert_rule(self, owner: str, name: str) -> AlertRuleRecord:
        """One rule set of the owner (``AlertRuleNotFound``)."""
        ...

    def list_alert_rules(self, owner: str, *, limit: int = 50, after_name: str | None = None) -> list[AlertRuleRecord]:
        """A page of the owner's rule sets in name order."""
        ...

    def delete_alert_rule(
        self, owner: str, name: str, *, by: str | None = None, expected_version: int | None = None
    ) -> None:
        """Delete a rule set (``AlertRuleNotFound``; ``VersionMismatch``, nothing deleted, when
        ``expected_version`` is not its version); its change-log entry made by ``by``."""
        ...

    def list_resource_changes(
        self, owner: str, kind: ChangedKind, name: str, *, limit: int = 50, before_seq: int | None = None
    ) -> list[ChangeEntry]:
        """A page of a calendar's or a rule set's change log, newest first (kept after a delete)."""
        ...


class CalendarJobStore(CalendarStore, JobStore, Protocol):
    """Both: a calendar's replacement replans the jobs that name it."""


class CompletionStore(Protocol):
    """What recording outcomes needs (``service.complete_executions``)."""

    def calendars_of(self, wanted: Iterable[tuple[str, str]]) -> list[CalendarRecord]:
        """The calendars named by ``(owner, name)`` pairs (read only for jobs that name one)."""
        ...

    def write_completions(self, planned: Sequence[tuple[Completion, Plan]]) -> set[str]:
        """Record outcomes planned from their started rows; the ids of the jobs written (the
        others were fenced, or changed since they started)."""
        ...

    def leased_job(self, done: Completion) -> LeasedJob | None:
        """The job of a finished execution as it is now, while its lease stands (else None)."""
        ...

    def complete_leased(self, done: Completion, plan: Plan, leased: LeasedJob) -> bool:
        """Record an outcome planned from ``leased``, if the job is still that version and the
        lease stands."""
        ...


class ExecutionStore(CompletionStore, Protocol):
    """What the executor needs: start a claim (or claim and start in one go), record outcomes."""

    def start_execution(
        self, job_id: str, lock_token: str, lease_margin_seconds: float = 30
    ) -> StartedExecution | None: ...

    def start_executions(
        self, claims: Sequence[tuple[str, str]], lease_margin_seconds: float = 30
    ) -> list[StartedExecution]: ...

    def claim_and_start(self, limit: int, lease_margin_seconds: float = 30) -> list[Claim]: ...

    def lost_runs(self, started: StartedExecution) -> int:
        """How often a manual or chained run (of its request's time) was lost with its runner;
        ``started``, started for it again, numbered after them."""
        ...

    def jobs_still_stored(self, job_ids: Sequence[str]) -> set[str]:
        """Which of these jobs still exist (the others were deleted)."""
        ...

    def take_target_slot(self, limit: TargetLimit, job_id: str, lease_seconds: float) -> str | None:
        """A slot of the limit's key (its token) when the key is under its limits, else None."""
        ...

    def release_target_slot(self, token: str) -> None:
        """Give a slot back."""
        ...

    def extend_leases(self, leases: Sequence[tuple[str, str, float]]) -> set[str]:
        """Keep started jobs' leases, each ``(job_id, lock_token, seconds)`` that much more: the
        ids of the jobs whose lease was kept (the others were taken over)."""
        ...

    def extend_target_slots(self, slots: Sequence[tuple[str, float]]) -> set[str]:
        """Keep held slots, each ``(token, seconds)`` that much more from now: the tokens kept."""
        ...

    def record_wait(
        self, job_id: str, lock_token: str, started_at: datetime, execution_id: str, waited_ms: int, waited_for: str
    ) -> datetime | None:
        """How long a started execution waited for its target's slot, and why; its start moved
        to now, which it answers (None when the lease was lost: nothing written)."""
        ...

    def running_version(self, job_id: str, lock_token: str, execution_id: str) -> int | None:
        """The version of a job whose execution ``execution_id`` runs under ``lock_token``; None
        when the lease was lost or the job deleted."""
        ...

    def hand_back_for_slot(self, hand_back: SlotHandBack, min_pause_seconds: float, max_pause_seconds: float) -> bool:
        """Undo a limited delivery's start and give its job back to the fan-outs after a pause
        (half the wait so far, within the bounds): False when the lease was taken over."""
        ...


class FanoutStore(Protocol):
    """What the fan-out loop needs: claim (a lease, or a lease and a start for the in-process
    pipeline), give back, look at the backlog, keep the executions' day partitions."""

    def claim_due(self, limit: int, lease_seconds: float) -> list[Claim]: ...

    def claim_and_start(self, limit: int, lease_margin_seconds: float = 30) -> list[Claim]: ...

    def release(self, job_id: str, lock_token: str) -> bool: ...

    def due_backlog(self) -> DueBacklog: ...

    def live_leases(self) -> int: ...

    def next_due_in(self) -> float | None: ...

    def maintain_partitions(self, retention_days: int, days_ahead: int = 3) -> PartitionMaintenance: ...


class PauseStore(JobStore, Protocol):
    """What the runner's resume of ended pauses (``service.resume_expired_pauses``) and its
    hand-over of backfills (``pump_backfills``) need."""

    def pump_backfills(self, limit: int = 100) -> int:
        """Hand each due backfill's next occurrence to its job; how many were handed over."""
        ...

    def mark_lost_while_not_due(self, limit: int = 100) -> list[tuple[str, str]]:
        """Mark lost the executions of jobs with nothing due (paused, or edited during the run to a
        later time) whose lease expired while they ran: ``(job_id, execution_id)`` of each marked."""
        ...

    def expired_pauses(self, limit: int = 100) -> list[tuple[str, str]]:
        """``(owner, job_id)`` of paused jobs whose ``pause_until`` has come, oldest first."""
        ...
