"""Printing: tables, one job field by field, JSON and YAML (``-o``), and the API's errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from scheduler.cli.aws_flags import target_summary
from scheduler.cli.columns import (
    EXECUTION_COLUMN_SET,
    EXECUTION_DEFAULT,
    JOB_COLUMN_SET,
    JOB_DEFAULT,
    Column,
    cell,
    duration,
    execution_columns,
    next_run,
    truncate,
)
from scheduler.cli.common import EXIT_API_ERROR, EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_SERVER, UsageError
from scheduler.cli.reading import yaml_text
from scheduler.cli.streaming import Rows, TableLines
from scheduler.local.logs import printable
from scheduler.transport.api_models import execution_timing

JOB_COLUMNS = tuple(JOB_COLUMN_SET[key].header for key in JOB_DEFAULT)
EXECUTION_COLUMNS = tuple(EXECUTION_COLUMN_SET[key].header for key in EXECUTION_DEFAULT)


def print_json(value: Any) -> None:
    """``value`` as indented JSON."""
    print(json.dumps(value, indent=2, ensure_ascii=False))


def require_yaml() -> None:
    """A usage error when PyYAML, which ``-o yaml`` needs, is missing."""
    try:
        import yaml  # noqa: F401 (only to say what is missing)
    except ImportError:
        raise UsageError("-o yaml needs PyYAML (pip install pyyaml, or the 'local' extra)") from None


def print_yaml(value: Any) -> None:
    """``value`` as block YAML (keys in the API's order)."""
    require_yaml()
    print(yaml_text(value).rstrip())


def print_data(output: str, value: Any) -> bool:
    """Print ``value`` as JSON or YAML when ``output`` asks for it; False for ``table``."""
    if output == "json":
        print_json(value)
        return True
    if output == "yaml":
        print_yaml(value)
        return True
    return False


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain text table: left-aligned columns two spaces apart, ``-`` for empty cells (a
    streamed table's one page, all rows known)."""
    return TableLines(headers).page(rows).removesuffix("\n")


def job_row(job: dict[str, Any], columns: Sequence[Column] | None = None) -> list[Any]:
    """A job's cells (the default columns: id, name, state, schedule or run_at, the target in a
    few words, the next run (``paused`` for a paused job), the last status)."""
    return [column.value(job) for column in columns or [JOB_COLUMN_SET[key] for key in JOB_DEFAULT]]


def lateness_ms(execution: dict[str, Any]) -> int | None:
    """How long after it was due an execution started, in ms (None before it starts, or when
    unknown: see ``scheduler.transport.api_models.execution_timing``)."""
    late = execution_timing(execution)[0]
    return None if late is None else round(late.total_seconds() * 1000)


def execution_row(
    execution: dict[str, Any], *, wide: bool = False, columns: Sequence[Column] | None = None
) -> list[Any]:
    """An execution's cells, its error cut to one short line (whole with ``wide``)."""
    columns = columns or [EXECUTION_COLUMN_SET[key] for key in EXECUTION_DEFAULT]
    error = column_value(execution, "error")
    return [
        (cell(error) if wide else truncate(error)) if column.key == "error" else column.value(execution)
        for column in columns
    ]


def column_value(execution: dict[str, Any], key: str) -> Any:
    """The value of one of the executions' columns (the error's: a skipped row's account too)."""
    return EXECUTION_COLUMN_SET[key].value(execution)


def format_jobs(jobs: list[dict[str, Any]], columns: Sequence[Column] | None = None) -> str:
    """The table of jobs."""
    if not jobs:
        return "no jobs"
    columns = columns or [JOB_COLUMN_SET[key] for key in JOB_DEFAULT]
    return format_table([c.header for c in columns], (job_row(j, columns) for j in jobs))


def format_executions(
    executions: list[dict[str, Any]],
    *,
    wide: bool = False,
    job_column: bool = False,
    columns: Sequence[Column] | None = None,
) -> str:
    """The table of executions (with the JOB column when they come from several jobs)."""
    if not executions:
        return "no executions"
    columns = columns or execution_columns(None, job_column=job_column)
    return format_table([c.header for c in columns], (execution_row(e, wide=wide, columns=columns) for e in executions))


def _diff_text(diff: dict[str, Any]) -> str:
    """A change's diff on one line: ``field: old -> new`` (a secret: ``field: changed (secret)``)."""
    parts = []
    for field, change in sorted(diff.items()):
        if change.get("secret"):
            parts.append(f"{field}: changed (secret)")
        else:
            was, now = (json.dumps(change.get(k), ensure_ascii=False) for k in ("from", "to"))
            parts.append(f"{field}: {was} -> {now}")
    return "; ".join(parts) or "-"


def change_row(change: dict[str, Any]) -> tuple[Any, ...]:
    """A change's cells: when, the action, the version it made, by whom, the fields it changed."""
    return (
        change.get("at") or "-",
        change.get("action") or "-",
        str(change.get("version")),
        change.get("by") or "-",
        _diff_text(change.get("diff") or {}),
    )


CHANGE_ROWS = Rows(("AT", "ACTION", "VERSION", "BY", "CHANGES"), change_row)


def format_changes(changes: list[dict[str, Any]]) -> str:
    """The table of a change log, a job's, a calendar's or a rule set's (newest first)."""
    if not changes:
        return "no changes"
    return format_table(CHANGE_ROWS.headers, (change_row(c) for c in changes))


def _target_lines(target: dict[str, Any]) -> list[tuple[str, Any]]:
    kind = target.get("type") or "http"
    if kind == "amqp":
        where = f"amqp exchange={target.get('exchange') or '(default)'} routing_key={target.get('routing_key') or ''}"
    elif kind == "http":
        where = f"{target.get('method') or 'POST'} {target.get('url') or '-'}"
    else:  # an AWS target: the resource's name here, its whole ARN or URL below
        where = target_summary(target)
    rows: list[tuple[str, Any]] = [("target", where)]
    skip = {"type", "method", "exchange", "routing_key"} | ({"url"} if kind == "http" else set())
    for key, value in target.items():
        if key in skip or value in (None, "", {}, []):
            continue
        rows.append((f"  {key}", json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value))
    return rows


def _pause_lines(pause: Any) -> list[tuple[str, Any]]:
    """A paused job's pause (issue 33): its note, its end, who paused it and when."""
    if not isinstance(pause, dict):
        return []
    until = pause.get("until") or "until resumed"
    return [("pause note", pause.get("note")), ("paused", f"at {pause.get('at')} by {pause.get('by')}, {until}")]


def format_job_details(job: dict[str, Any]) -> str:
    """One job, field by field (``jobs get``): every field of the answer; secrets as the API
    masks them."""
    stats = job.get("stats") or {}
    retry = job.get("retry") or {}
    expressions = job.get("schedules") or ([job["schedule"]] if job.get("schedule") else [])
    when = (
        f"{' | '.join(expressions)} ({job.get('timezone') or 'UTC'})" if expressions else f"once at {job.get('run_at')}"
    )
    spread = job.get("spread") or {}
    rows: list[tuple[str, Any]] = [
        ("id", job.get("id")),
        ("name", job.get("name")),
        ("description", job.get("description")),
        ("owner", job.get("owner")),
        ("state", f"{job.get('state')} (version {job.get('version')})"),
        ("schedule", when),
        ("spread", f"{spread.get('window_seconds')} s, {spread.get('mode') or 'stable'}" if spread else None),
        ("start at", job.get("start_at")),
        ("end at", job.get("end_at")),
        ("missed runs", job.get("missed_runs")),
        ("after completion", job.get("after_completion")),
        (
            "next run",
            next_run(job)
            if job.get("state") != "paused"
            else f"paused (next attempt: {job.get('next_run_at')}; a resume applies missed_runs)"
            if job.get("next_run_at")
            else "paused (a resume plans the next run)",
        ),
        *_pause_lines(job.get("pause")),
        ("last run", job.get("last_run_at")),
        ("last status", stats.get("last_status")),
        ("last error", stats.get("last_error")),
        ("runs", f"{stats.get('run_count', 0)} ({stats.get('failure_count', 0)} failed)"),
        *_target_lines(job.get("target") or {}),
        ("retry", ", ".join(f"{k}={v}" for k, v in retry.items() if v is not None) or None),
        ("tags", ", ".join(job.get("tags") or [])),
        ("created", job.get("created_at")),
        ("updated", job.get("updated_at")),
    ]
    known = {
        "id",
        "name",
        "description",
        "owner",
        "state",
        "version",
        "schedule",
        "schedules",
        "spread",
        "run_at",
        "timezone",
        "start_at",
        "end_at",
        "missed_runs",
        "after_completion",
        "next_run_at",
        "last_run_at",
        "stats",
        "target",
        "retry",
        "tags",
        "created_at",
        "updated_at",
        "pause",
    }
    rows += [(key.replace("_", " "), _as_json(value)) for key, value in job.items() if key not in known]
    width = max(len(k) for k, _ in rows) + 1
    return "\n".join(f"{(k + ':').ljust(width)}  {cell(v)}" for k, v in rows)


def _as_json(value: Any) -> Any:
    """A field's value as a line shows it: an object or a list as JSON (``alerts``, ``limits``,
    chains; ``-`` when empty), not as Python writes it."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False) if value else None
    return value


# The fields an execution's first rows show (``executions get``), then those that follow them, in
# order, with their labels; any other field of an answer comes last, as JSON.
_EXECUTION_HEAD = frozenset(
    {
        "id",
        "job_id",
        "job_name",
        "status",
        "http_status",
        "trigger",
        "attempt",
        "scheduled_at",
        "shifted_from",
        "excluded_by",
        "due_at",
        "started_at",
        "finished_at",
        "duration_ms",
        "error",
        "waited_ms",
        "response_excerpt",
    }
)
_EXECUTION_TAIL = (
    ("waited_for", "waited for"),
    ("skip_reason", "skip reason"),
    ("skipped_count", "skipped count"),
    ("caused_by", "caused by"),
    ("caused_by_job_id", "caused by job"),
    ("overrides", "overrides"),
)


def format_execution_details(execution: dict[str, Any]) -> str:
    """One execution, field by field (``executions get``): every field of the answer (``-`` when
    null or absent), its response excerpt and error whole."""
    late, backoff = execution_timing(execution)
    job = execution.get("job_name")
    rows: list[tuple[str, Any]] = [
        ("id", execution.get("id")),
        ("job", f"{job} ({execution.get('job_id')})" if job else execution.get("job_id")),
        ("status", execution.get("status")),
        ("http status", execution.get("http_status")),
        ("trigger", f"{execution.get('trigger')} (attempt {execution.get('attempt')})"),
        ("scheduled at", execution.get("scheduled_at")),
        ("shifted from", execution.get("shifted_from")),
        ("excluded by", execution.get("excluded_by")),
        ("due at", execution.get("due_at")),
        ("started at", execution.get("started_at")),
        ("finished at", execution.get("finished_at")),
        ("late", duration(None if late is None else late.total_seconds() * 1000)),
        ("backoff", duration(backoff.total_seconds() * 1000) if backoff else None),
        ("duration", duration(execution.get("duration_ms"))),
        ("error", execution.get("error")),
        ("waited", duration(execution.get("waited_ms"))),
        *((label, _as_json(execution.get(key))) for key, label in _EXECUTION_TAIL),
    ]
    known = _EXECUTION_HEAD | {key for key, _ in _EXECUTION_TAIL}
    rows += [(key.replace("_", " "), _as_json(value)) for key, value in execution.items() if key not in known]
    width = max(len(k) for k, _ in rows + [("response excerpt", None)]) + 1
    lines = [f"{(k + ':').ljust(width)}  {cell(v)}" for k, v in rows]
    excerpt = execution.get("response_excerpt")
    if excerpt:
        lines.append("response excerpt:")
        lines.extend(f"  {printable(line)}" for line in str(excerpt).splitlines() or [""])
    else:
        lines.append(f"{'response excerpt:'.ljust(width)}  -")
    return "\n".join(lines)


def print_api_error(exc: Any, stream: Any = None) -> None:
    """``error: 400 invalid_request: <message>``, then one ``  field: message`` line per detail
    that the message does not already say (an error is printed once)."""
    stream = stream or sys.stderr
    print(printable(f"error: {exc.status} {exc.code}: {exc.message}"), file=stream)
    for detail in exc.details:
        field, message = detail.get("field"), str(detail.get("message"))
        # a message that already starts with its field ("ics: ...") is not prefixed again
        line = f"{field}: {message}" if field and not message.startswith((f"{field}:", f"{field} ")) else message
        if line != exc.message:
            print(printable(f"  {line}"), file=stream)


def exit_code_for_status(status: int) -> int:
    """The exit code of an API error status (see ``EXIT_CODES_HELP``)."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (409, 412):
        return EXIT_CONFLICT
    if status >= 500:
        return EXIT_SERVER
    return EXIT_API_ERROR
