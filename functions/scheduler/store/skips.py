"""The store's part of pauses and skipped occurrences (migration 0015): the pause's record of an
edit's parameters, the skipped rows (and the other rare writes) of a completion, and the pauses
whose end has come.
``Store`` has ``RunRecords`` as a base class; it uses its pool."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import psycopg

from scheduler.core.domain import Change, Completion, Pause, Plan, Shift, Skip
from scheduler.core.records import RecordedSkip, SkipTrim
from scheduler.sql import QUERIES
from scheduler.store.changes import write_change
from scheduler.store.rows import retry_on_dead_connection


def pause_params(pausing: bool, pause: Pause | None) -> dict[str, Any]:
    """``update_job``'s parameters of the pause's record ``pause`` (None: none), ``pausing``
    when the edit is a pause (its time is then the database's now, or the record's own)."""
    return {
        "pausing": pausing,
        "pause_note": pause.note if pause else None,
        "pause_until": pause.until if pause else None,
        "paused_by": pause.by if pause else None,
        "paused_at": pause.at if pause else None,
    }


def skips_param(skips: Iterable[Skip]) -> str:
    """A plan's skips as ``update_job``'s ``skips`` (a JSON array, empty for none)."""
    return json.dumps([skip.as_json() for skip in skips])


def record_skips(conn: psycopg.Connection, planned: Sequence[tuple[str, Plan]]) -> None:
    """In the transaction of their completions: the skipped rows of the plans written (job ids)."""
    rows = [[job_id, *skip.as_json()] for job_id, plan in planned for skip in plan.skips]
    if rows:
        conn.execute(QUERIES["record_skips"], {"skips": json.dumps(rows)})


def trim_skips(conn: psycopg.Connection, job_id: str, trims: Sequence[SkipTrim]) -> None:
    """In the transaction of the edit that replanned the job from now (written): what is left of
    its calendar-skipped rows recorded in advance (``SkipTrim``: the count kept, none deletes)."""
    if trims:
        rows = [[t.row.id, t.row.started_at.isoformat(), t.row.count, t.kept] for t in trims]
        conn.execute(QUERIES["trim_skips"], {"job_id": job_id, "trims": json.dumps(rows)})


def record_shifts(conn: psycopg.Connection, shifts: Sequence[tuple[Completion, Shift, datetime]]) -> None:
    """In the transaction of their completions: where a calendar moved each execution's occurrence
    from (0025), for the completions written, each with its execution's ``started_at``."""
    rows = [
        {
            "job_id": str(done.job_id),
            "execution_id": str(done.execution_id),
            "started_at": started_at.isoformat(),
            "shifted_from": shift.shifted_from.isoformat(),
            "excluded_by": shift.excluded_by,
        }
        for done, shift, started_at in shifts
    ]
    if rows:
        conn.execute(QUERIES["record_shifts"], {"shifts": json.dumps(rows)})


def record_backfill_retries(conn: psycopg.Connection, planned: Sequence[tuple[str, Plan]]) -> None:
    """In the transaction of their completions: the retries of failed backfill deliveries (0019)."""
    rows = [[job_id, *plan.backfill_retry.as_json()] for job_id, plan in planned if plan.backfill_retry]
    if rows:
        conn.execute(QUERIES["record_backfill_retries"], {"retries": json.dumps(rows)})


def record_parked(conn: psycopg.Connection, planned: Sequence[tuple[str, Plan]]) -> None:
    """In the transaction of their completions: the pause's record of the jobs the runner paused
    (their next run took too long to plan): why, by the scheduler, since now."""
    parked = [(job_id, plan.parked) for job_id, plan in planned if plan.parked]
    if parked:
        params = {"job_id": [job_id for job_id, _ in parked], "note": [note for _, note in parked]}
        conn.execute(QUERIES["record_parked"], params)


def record_plan_extras(conn: psycopg.Connection, planned: Sequence[tuple[str, Plan]]) -> None:
    """In the transaction of their completions: what the completion statement alone does not
    write for the jobs written (``planned``: each job's id and plan): skipped rows, backfill
    retries, and the pauses of jobs the runner paused."""
    record_skips(conn, planned)
    record_backfill_retries(conn, planned)
    record_parked(conn, planned)


class RunRecords:
    """Backfills, and the runner's look for pauses that ended and backfills to hand over, on
    ``self.pool`` (a psycopg pool)."""

    pool: Any

    @retry_on_dead_connection
    def insert_backfill(
        self,
        owner: str,
        job_id: str,
        occurrences: Sequence[datetime],
        interval_seconds: float,
        change: Change | None = None,
    ) -> str | None:
        """Record a backfill of the job's ``occurrences`` (delivered by ``pump_backfills``, one
        every ``interval_seconds`` at most), with ``change``'s entry in the job's change log;
        its id, None when the job is not the owner's."""
        params = {
            "id": str(uuid.uuid4()),
            "job_id": job_id,
            "owner": owner,
            "occurrences": list(occurrences),
            "interval_seconds": interval_seconds,
        }
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(QUERIES["insert_backfill"], params).fetchone()
            if row is not None:
                write_change(conn, owner, job_id, row["version"], change)
        return None if row is None else str(row["id"])

    @retry_on_dead_connection
    def calendar_skips_ahead(self, job_id: str, now: datetime) -> list[RecordedSkip]:
        """The job's calendar-skipped rows whose first occurrence is after ``now`` (recorded in
        advance), and the latest whose first is not (it may count some after ``now``)."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["calendar_skips_ahead"], {"job_id": job_id, "now": now}).fetchall()
        return [RecordedSkip(str(r["id"]), r["started_at"], r["scheduled_at"], r["skipped_count"]) for r in rows]

    @retry_on_dead_connection
    def pump_backfills(self, limit: int = 100) -> int:
        """Hand the next occurrence of each backfill due to its job, as a manual request carrying
        it (when the job has none pending): how many were handed over."""
        with self.pool.connection() as conn:
            return len(conn.execute(QUERIES["pump_backfills"], {"limit": limit}).fetchall())

    @retry_on_dead_connection
    def mark_lost_while_not_due(self, limit: int = 100) -> list[tuple[str, str]]:
        """Mark lost the executions of jobs with nothing due (paused, or edited during the run to a
        later time) whose lease expired while they ran, their leases cleared: ``(job_id,
        execution_id)`` of each marked (the claim does not see such a job)."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["lost_while_not_due"], {"limit": limit}).fetchall()
        return [(row["job_id"], row["execution_id"]) for row in rows]

    @retry_on_dead_connection
    def expired_pauses(self, limit: int = 100) -> list[tuple[str, str]]:
        """``(owner, job_id)`` of paused jobs whose ``pause_until`` has come, oldest first."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["expired_pauses"], {"limit": limit}).fetchall()
        return [(row["owner"], row["id"]) for row in rows]
