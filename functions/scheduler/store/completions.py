"""The parameters of the completion statements: ``complete_job`` (values, for one outcome: the
cheaper statement to plan, for executors through RDS Proxy that cannot keep prepared statements)
and ``complete_jobs`` (a JSON array of them, for a batch or a group), each with the earliest and
latest ``started_at`` the planner prunes the executions' day partitions by."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler.core.domain import Completion, Plan
from scheduler.store.rows import orjson  # None without the `local` extra (the Lambda layer's case)

# complete_job's parameters, and the order of each outcome's values in complete_jobs' JSON.
COMPLETION_COLUMNS = (
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
    done: Completion, plan: Plan, version: int, ran_scheduled_at: datetime | None, started_at: datetime
) -> tuple[Any, ...]:
    """One outcome's parameters in ``COMPLETION_COLUMNS`` order; ``started_at`` is the
    execution's (its partition's key). The texts an execution keeps lose what Postgres cannot
    store (a NUL, a lone surrogate: each becomes U+FFFD), which would fail the completion."""
    outcome = done.outcome
    return (
        done.job_id,
        done.lock_token,
        done.execution_id,
        version,
        plan.state,
        plan.scheduled_at,
        plan.attempt,
        plan.next_run_at,
        ran_scheduled_at,
        outcome.status,
        _storable(outcome.error),
        outcome.http_status,
        _storable(outcome.response_excerpt),
        started_at,
    )


def _storable(text: str | None) -> str | None:
    if not text or (text.isascii() and "\x00" not in text):
        return text
    text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which neither UTF-8 nor Postgres can hold
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def completion_row(
    done: Completion, plan: Plan, version: int, ran_scheduled_at: datetime | None, started_at: datetime
) -> dict[str, Any]:
    """The parameters of ``complete_job`` for one outcome."""
    row = dict(zip(COMPLETION_COLUMNS, completion_values(done, plan, version, ran_scheduled_at, started_at)))
    row["earliest_started_at"] = row["latest_started_at"] = started_at
    return row


def completion_batch(planned: Sequence[tuple[Completion, Plan]]) -> dict[str, Any]:
    """The parameters of ``complete_jobs`` for outcomes planned from their started rows: their
    values (``COMPLETION_COLUMNS`` order) as one JSON array of arrays, and the bounds of their
    ``started_at``."""
    rows = []
    for done, plan in planned:
        started = done.started
        assert started is not None, "a batch is planned from its started rows"
        rows.append(completion_values(done, plan, started.job.version, started.scheduled_at, started.started_at))
    started_at = [row[-1] for row in rows]
    return {
        "outcomes": encode_outcomes(rows),
        # The days the planner is to plan the executions' update over (queries.sql, complete_outcomes).
        "earliest_started_at": min(started_at, default=None),
        "latest_started_at": max(started_at, default=None),
    }


def encode_outcomes(rows: Sequence[Sequence[Any]]) -> str:
    """Outcome rows as the JSON ``complete_jobs`` reads: instants in RFC 3339 with their offset
    and microseconds (naive ones, which the scheduler never makes, taken as UTC)."""
    if orjson is not None:
        return orjson.dumps(rows, option=orjson.OPT_NAIVE_UTC).decode()
    return json.dumps(rows, default=_instant, separators=(",", ":"))


def _instant(value: Any) -> str:
    if isinstance(value, datetime):
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} in an outcome")
