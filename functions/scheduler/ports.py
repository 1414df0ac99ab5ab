"""The ports: what each part of the scheduler needs of the storage, as small ``Protocol``s.

``scheduler.store.postgres.Store`` (Postgres) provides all of them; the API, the service layer,
the fan-out and the executor are written against these, so none of them imports the concrete
store and a test may hand any object that has the methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from scheduler.core.domain import (
    Change,
    ChangeEntry,
    Claim,
    Completion,
    Execution,
    ExecutionStatus,
    Job,
    JobState,
    LeasedJob,
    PartitionMaintenance,
    Plan,
    StartedExecution,
)


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
    ) -> Job:
        """Insert a job with its first plan, made at ``created_at`` (``NameTaken`` for a name
        taken), and its change-log entry in the same transaction."""
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
        change: Change | None = None,
    ) -> Job | None:
        """Write the spec (and the plan) if the job is still ``version`` (and the run state
        ``planned_from``), with the change-log entry; None when it changed meanwhile."""
        ...

    def delete_job(self, owner: str, job_id: str, *, change: Change | None = None) -> None:
        """Delete the job and its executions, keep its change log with ``change`` (``NotFound``)."""
        ...

    def request_run(self, owner: str, job_id: str, *, change: Change | None = None) -> Job:
        """Ask for a run now, outside the schedule, with its change-log entry (``NotFound``)."""
        ...

    def list_changes(
        self, owner: str, job_id: str, *, limit: int = 50, before_seq: int | None = None
    ) -> list[ChangeEntry]:
        """A page of a job's change log, newest first (kept after a delete; ``NotFound``)."""
        ...

    def chain_links(self, owner: str) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The owner's jobs that chain to others: id -> (name, the names or ids they run next)."""
        ...

    def resolve_jobs(self, owner: str, refs: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The owner's jobs named by ``refs`` (names or ids): ref -> (id, name)."""
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


class CompletionStore(Protocol):
    """What recording outcomes needs (``service.complete_executions``)."""

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


class FanoutStore(Protocol):
    """What the fan-out loop needs: claim (a lease, or a lease and a start for the in-process
    pipeline), give back, look at the backlog, keep the executions' day partitions."""

    def claim_due(self, limit: int, lease_seconds: float) -> list[Claim]: ...

    def claim_and_start(self, limit: int, lease_margin_seconds: float = 30) -> list[Claim]: ...

    def release(self, job_id: str, lock_token: str) -> bool: ...

    def due_backlog(self) -> tuple[int, float]: ...

    def live_leases(self) -> int: ...

    def next_due_in(self) -> float | None: ...

    def maintain_partitions(self, retention_days: int, days_ahead: int = 3) -> PartitionMaintenance: ...
