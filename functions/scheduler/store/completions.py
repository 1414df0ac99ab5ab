"""The parameters of the completion statements: ``complete_job`` (values, for one outcome: the
cheaper statement to plan, for executors through RDS Proxy that cannot keep prepared statements)
and ``complete_jobs`` (arrays of them, for a batch or a group), each with the earliest and latest
``started_at`` the planner prunes the executions' day partitions by."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler.domain import Completion

_COMPLETION_COLUMNS = (
    "job_id",
    "lock_token",
    "execution_id",
    "version",
    "state",
    "scheduled_at",
    "attempt",
    "next_run_at",
    "ran_scheduled_at",
    "status",
    "error",
    "http_status",
    "response_excerpt",
    "started_at",
)


def completion_values(
    done: Completion, plan: Mapping[str, Any], version: int, ran_scheduled_at: datetime | None, started_at: datetime
) -> tuple[Any, ...]:
    """One outcome's parameters in ``_COMPLETION_COLUMNS`` order; ``started_at`` is the
    execution's (its partition's key)."""
    outcome = done.outcome
    return (
        done.job_id,
        done.lock_token,
        done.execution_id,
        version,
        plan["state"],
        plan["scheduled_at"],
        plan["attempt"],
        plan["next_run_at"],
        ran_scheduled_at,
        outcome.status,
        outcome.error,
        done.http_status,
        done.response_excerpt,
        started_at,
    )


def completion_row(
    done: Completion, plan: Mapping[str, Any], version: int, ran_scheduled_at: datetime | None, started_at: datetime
) -> dict[str, Any]:
    """The parameters of ``complete_job`` for one outcome."""
    row = dict(zip(_COMPLETION_COLUMNS, completion_values(done, plan, version, ran_scheduled_at, started_at)))
    row["earliest_started_at"] = row["latest_started_at"] = started_at
    return row


def completion_arrays(planned: Sequence[tuple[Completion, Mapping[str, Any]]]) -> dict[str, list[Any]]:
    """The parameters of ``complete_jobs`` for outcomes planned from their started rows: each
    outcome's values as a tuple (no dict per row), turned column by column into arrays."""
    rows = [
        completion_values(done, plan, done.started.job.version, done.started.scheduled_at, done.started.started_at)  # type: ignore[union-attr]
        for done, plan in planned
    ]
    columns = list(zip(*rows)) or [()] * len(_COMPLETION_COLUMNS)  # no outcomes: empty arrays
    arrays = {key: list(column) for key, column in zip(_COMPLETION_COLUMNS, columns, strict=True)}
    started = arrays["started_at"]
    # The days the planner is to plan the executions' update over (queries.sql, complete_outcomes).
    arrays["earliest_started_at"] = min(started, default=None)
    arrays["latest_started_at"] = max(started, default=None)
    return arrays
