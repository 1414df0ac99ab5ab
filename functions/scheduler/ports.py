"""The ports: what each part of the scheduler needs of the storage, as small ``Protocol``s.

``scheduler.store.Store`` (Postgres) provides all of them; the API, the service layer, the
fan-out and the executor are written against these, so none of them imports the concrete store
and a test may hand any object that has the methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from scheduler.core.domain import Claim, Completion, Execution, Job, PartitionMaintenance, StartedExecution

Planner = Callable[[Job, datetime], Mapping[str, Any]]
Change = Callable[[dict[str, Any], datetime], Mapping[str, Any]]
# A completion's plan: the job's columns after the attempt; ``"delete": True`` in it (the
# service's decision, ``after_completion``) asks the store to delete the completed job.
CompletionPlanner = Callable[[Job, datetime, "datetime | None"], Mapping[str, Any]]


class JobStore(Protocol):
    """What the API (and ``scheduler.service``) needs: the jobs and executions of an owner, and
    the database clock."""

    def insert_job(
        self, owner: str, spec: Mapping[str, Any], plan_first: Planner, *, job_id: str | None = None
    ) -> dict[str, Any]: ...

    def get_job(self, owner: str, job_id: str) -> dict[str, Any]: ...

    def list_jobs(
        self,
        owner: str,
        *,
        state: str | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        limit: int = 50,
        after_name: str | None = None,
    ) -> list[dict[str, Any]]: ...

    def modify_job(
        self, owner: str, job_id: str, change: Change, expected_version: int | None = None
    ) -> dict[str, Any]: ...

    def delete_job(self, owner: str, job_id: str) -> None: ...

    def request_run(self, owner: str, job_id: str) -> dict[str, Any]: ...

    def list_executions(
        self,
        owner: str,
        job_id: str,
        *,
        status: str | None = None,
        limit: int = 50,
        before_seq: int | None = None,
        before_started_at: datetime | None = None,
    ) -> list[Execution]: ...

    def now(self) -> datetime: ...

    def list_owner_executions(
        self,
        owner: str,
        *,
        status: str | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[Execution]: ...


class CompletionStore(Protocol):
    """What recording outcomes needs (``service.complete_executions``)."""

    def write_completions(self, planned: Sequence[tuple[Completion, Mapping[str, Any]]]) -> set[str]: ...

    def complete_locked(self, done: Completion, plan: CompletionPlanner) -> bool: ...


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
