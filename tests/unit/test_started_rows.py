"""A started row read into its job and execution (``read_started``), which builds the job by
position for speed: held here to the same job built by keyword, so that a field added to or
moved in ``Job`` cannot shift a value into its neighbour."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from scheduler.core.domain import Job, JobState, LeaseKind, Trigger
from scheduler.store.rows import json_value
from scheduler.store.started import LOCK_TOKEN_COLUMN, STARTED_COLUMNS, read_started

BASE = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _row() -> dict[str, object]:
    """One value per column of a started row, no two alike (a swap of two shows)."""
    return {
        "id": "11111111-1111-4111-8111-111111111111",
        "owner": "owner-a",
        "name": "name-b",
        "schedule": "0 9 * * 1-5",
        "run_at": BASE + timedelta(minutes=1),
        "timezone": "Europe/London",
        "start_at": BASE + timedelta(minutes=2),
        "end_at": BASE + timedelta(minutes=3),
        "created_at": BASE + timedelta(minutes=4),
        "target": '{"type": "http", "url": "https://example.com/t"}',  # read as text
        "retry": '{"max_attempts": 7}',
        "missed_runs": "run_all",
        "state": "paused",
        "version": 41,
        "scheduled_at": BASE + timedelta(minutes=5),
        "attempt": 42,
        "next_run_at": BASE + timedelta(minutes=6),
        "lease_kind": "manual",
        "after_completion": "delete",
        "schedules": ["@every 90s", "0 12 * * *"],
        "spread": {"window_seconds": 60, "mode": "stable"},
        "limits": {"concurrency": 2},
        "execution_id": "22222222-2222-4222-8222-222222222222",
        "execution_scheduled_at": BASE + timedelta(minutes=7),
        "execution_attempt": 43,
        "execution_trigger": "backfill",
        "execution_started_at": BASE + timedelta(minutes=8),
        "exclude_calendars": ["holidays"],
        "on_excluded": "shift",
        "overrides": {"body": "x"},
        "chains": [["next-ok"], ["next-failed"], ["next-any"]],
        "cause": {"execution_id": "33333333-3333-4333-8333-333333333333"},
        "waited_ms": 1234,
    }


def test_read_started_builds_the_job_that_the_keyword_form_builds():
    values = _row()
    assert tuple(values) == STARTED_COLUMNS
    row = (*values.values(), "44444444-4444-4444-8444-444444444444", None)
    assert len(row) == LOCK_TOKEN_COLUMN + 2

    started = read_started(row)

    assert started.job == Job(
        id=values["id"],
        owner=values["owner"],
        name=values["name"],
        schedule=values["schedule"],
        run_at=values["run_at"],
        timezone=values["timezone"],
        start_at=values["start_at"],
        end_at=values["end_at"],
        created_at=values["created_at"],
        target={"type": "http", "url": "https://example.com/t"},
        retry={"max_attempts": 7},
        missed_runs=values["missed_runs"],
        state=JobState.PAUSED,
        version=41,
        scheduled_at=values["scheduled_at"],
        attempt=42,
        next_run_at=values["next_run_at"],
        lease_kind=LeaseKind.MANUAL,
        after_completion="delete",
        schedules=("@every 90s", "0 12 * * *"),
        spread=values["spread"],
        exclude_calendars=("holidays",),
        on_excluded="shift",
        limits=values["limits"],
        on_success=("next-ok",),
        on_failure=("next-failed",),
        on_complete=("next-any",),
    )
    assert started.execution_id == values["execution_id"]
    assert started.scheduled_at == values["execution_scheduled_at"]
    assert started.attempt == 43
    assert started.trigger is Trigger.BACKFILL
    assert started.started_at == values["execution_started_at"]
    assert started.overrides == values["overrides"]
    assert started.cause == values["cause"]
    assert started.waited_ms == 1234
    assert read_started((*row[: LOCK_TOKEN_COLUMN - 1], None, *row[LOCK_TOKEN_COLUMN:])).waited_ms == 0  # NULL: none


def test_a_json_text_reads_as_json_loads_reads_it():
    """``json_value`` (a started row's target and retry, read as text): orjson where it reads
    the same, json.loads for integers beyond 64 bits and what orjson refuses."""
    for text in (
        '{"big": 123456789012345678901234567890, "small": -7, "ratio": 0.1}',
        '{"lone": "\\ud800", "inf": 1e400}',
        '["h\u00e9llo \u2603", null, true]',
    ):
        for form in (text, text.encode()):
            assert json_value(form) == json.loads(text)
    assert json_value('{"big": 123456789012345678901234567890}')["big"] == 123456789012345678901234567890
    assert json_value('{"inf": 1e400}')["inf"] == float("inf")
