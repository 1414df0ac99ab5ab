"""The columns of the CLI's tables: each list's default set, the others ``--columns`` may name,
and how each cell reads (a paused job's next run is ``paused``; an execution's lateness is its
start against when it was due, its backoff apart).

``--columns name,state,next_run`` names them by key: the header in lower case, spaces as ``_``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.cli.aws_flags import target_summary
from scheduler.cli.common import UsageError
from scheduler.local.logs import printable
from scheduler.transport.api_models import execution_timing

ERROR_WIDTH = 60
TARGET_WIDTH = 48


@dataclass(frozen=True)
class Column:
    """One column: its ``--columns`` key, its header, its cell, and the width a streamed table
    (``executions --follow``) gives it."""

    key: str
    header: str
    value: Callable[[dict[str, Any]], Any]
    width: int = 0


def cell(value: Any) -> str:
    """A table cell: ``-`` for nothing, whitespace folded to single spaces, other control
    characters shown escaped (``\\x1b``): a terminal never acts on what a target answered."""
    if value is None or value == "":
        return "-"
    return " ".join(printable(str(value)).split())


def truncate(text: Any, width: int = ERROR_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters (``...`` marks a cut)."""
    value = cell(text)
    return value if len(value) <= width else value[: width - 3] + "..."


def duration(ms: float | None) -> str | None:
    """A duration in a few characters: ``12ms``, ``8.5s``, ``3.2m``, ``1.5h`` (None as is)."""
    if ms is None:
        return None
    size = abs(ms)
    if size < 1000:
        return f"{round(ms)}ms"
    if size < 120_000:
        return f"{ms / 1000:.1f}s"
    if size < 7_200_000:
        return f"{ms / 60_000:.1f}m"
    return f"{ms / 3_600_000:.1f}h"


def _ms(delta: Any) -> float | None:
    return None if delta is None else delta.total_seconds() * 1000


def next_run(job: dict[str, Any]) -> str | None:
    """The next run of a job: ``paused`` when paused (its ``next_run_at`` is where it resumes, not
    a run), nothing when completed."""
    if job.get("state") == "paused":
        return "paused"
    if job.get("state") == "completed":
        return None
    return job.get("next_run_at")


def _target(job: dict[str, Any]) -> str | None:
    target = job.get("target")
    return truncate(target_summary(target, TARGET_WIDTH), TARGET_WIDTH) if isinstance(target, dict) else None


def _stats(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda job: (job.get("stats") or {}).get(key)


JOB_COLUMN_SET: dict[str, Column] = {
    c.key: c
    for c in (
        Column("id", "ID", lambda j: j.get("id")),
        Column("name", "NAME", lambda j: j.get("name")),
        Column("state", "STATE", lambda j: j.get("state")),
        Column(
            "schedule",
            "SCHEDULE",
            lambda j: j.get("schedule") or " | ".join(j.get("schedules") or []) or j.get("run_at"),
        ),
        Column("target", "TARGET", _target),
        Column("next_run", "NEXT RUN", next_run),
        Column("last_status", "LAST STATUS", _stats("last_status")),
        Column("timezone", "TIMEZONE", lambda j: j.get("timezone")),
        Column("tags", "TAGS", lambda j: ",".join(j.get("tags") or [])),
        Column("last_run", "LAST RUN", lambda j: j.get("last_run_at")),
        Column("runs", "RUNS", _stats("run_count")),
        Column("failures", "FAILURES", _stats("failure_count")),
        Column("version", "VERSION", lambda j: j.get("version")),
        Column("owner", "OWNER", lambda j: j.get("owner")),
        Column("description", "DESCRIPTION", lambda j: truncate(j.get("description"), 40)),
    )
}
JOB_DEFAULT = ("id", "name", "state", "schedule", "target", "next_run", "last_status")


def _late(execution: dict[str, Any]) -> str | None:
    return duration(_ms(execution_timing(execution)[0]))


def _backoff(execution: dict[str, Any]) -> str | None:
    backoff = _ms(execution_timing(execution)[1])
    return duration(backoff) if backoff else None


def _skipped(execution: dict[str, Any]) -> str | None:
    """A skipped row's account (issue 33): how many occurrences, and why."""
    if execution.get("status") != "skipped":
        return None
    count = execution.get("skipped_count") or 1
    return f"{count} occurrence{'s' if count != 1 else ''} skipped: {execution.get('skip_reason')}"


EXECUTION_COLUMN_SET: dict[str, Column] = {
    c.key: c
    for c in (
        Column("job", "JOB", lambda e: e.get("job_name") or e.get("job_id"), 20),
        Column("id", "ID", lambda e: e.get("id"), 36),
        Column("scheduled_at", "SCHEDULED AT", lambda e: e.get("scheduled_at"), 20),
        Column("started", "STARTED", lambda e: e.get("started_at"), 24),
        Column("late", "LATE", _late, 7),
        Column("backoff", "BACKOFF", _backoff, 7),
        Column("attempt", "ATTEMPT", lambda e: e.get("attempt"), 7),
        Column("trigger", "TRIGGER", lambda e: e.get("trigger"), 8),
        Column("status", "STATUS", lambda e: e.get("status"), 9),
        Column("http", "HTTP", lambda e: e.get("http_status"), 4),
        Column("duration_ms", "DURATION MS", lambda e: e.get("duration_ms"), 11),
        Column("error", "ERROR", lambda e: e.get("error") or _skipped(e)),
        Column("due_at", "DUE AT", lambda e: e.get("due_at"), 24),
        Column("finished", "FINISHED", lambda e: e.get("finished_at"), 24),
        Column("job_id", "JOB ID", lambda e: e.get("job_id"), 36),
        Column("response", "RESPONSE", lambda e: truncate(e.get("response_excerpt"), 40), 40),
        Column("caused_by", "CAUSED BY", lambda e: e.get("caused_by"), 36),
        Column("shifted_from", "SHIFTED FROM", lambda e: e.get("shifted_from"), 20),
    )
}
EXECUTION_DEFAULT = (
    "id",
    "scheduled_at",
    "started",
    "late",
    "backoff",
    "attempt",
    "trigger",
    "status",
    "http",
    "duration_ms",
    "error",
)


def choose(spec: str | None, available: dict[str, Column], default: Sequence[str]) -> list[Column]:
    """The columns ``--columns`` names (comma-separated keys), else the default set."""
    if spec is None:
        return [available[key] for key in default]
    keys = [key.strip().lower().replace("-", "_").replace(" ", "_") for key in spec.split(",") if key.strip()]
    unknown = [key for key in keys if key not in available]
    if unknown or not keys:
        raise UsageError(
            f"--columns: unknown column {', '.join(unknown) or '(none given)'}; the columns are {', '.join(available)}"
        )
    return [available[key] for key in keys]


def execution_columns(spec: str | None, *, job_column: bool) -> list[Column]:
    """The columns of an executions table (the job's first when rows come from several jobs)."""
    default = (("job",) if job_column else ()) + EXECUTION_DEFAULT
    return choose(spec, EXECUTION_COLUMN_SET, default)
