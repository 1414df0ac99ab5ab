"""The store's alerts: the jobs with rules, a job's alert state held while its rules decide, and
the alert deliveries (queued, leased, recorded, listed). ``Store`` has them as a base class;
they use its pool. Claims and completions never touch these tables."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from scheduler.core.alerts import AlertDecision, AlertDelivery, AlertJobRow, HeldAlertState
from scheduler.core.domain import Execution, JobState
from scheduler.sql import QUERIES
from scheduler.store.rows import extend_held, retry_on_dead_connection

# Executions a sweep reads of one job at a time (the rest at its next sweep).
EXECUTIONS_PER_SWEEP = 500


def _job_row(row: dict[str, Any]) -> AlertJobRow:
    return AlertJobRow(
        id=str(row.get("job_id") or row["id"]),
        owner=row["owner"],
        name=row["name"],
        alerts=tuple(row["alerts"] or ()),
        state=JobState(row["state"]),
        next_run_at=row["next_run_at"],
        tag_rules=tuple(row.get("tag_rules") or ()),
    )


def _delivery(row: dict[str, Any]) -> AlertDelivery:
    return AlertDelivery(
        id=str(row["id"]),
        owner=row["owner"],
        job_id=str(row["job_id"]),
        job_name=row["job_name"],
        rule_on=row["rule_on"],
        threshold=row["threshold"],
        event=row["event"],
        incident_id=str(row["incident_id"]),
        execution_id=str(row["execution_id"]) if row["execution_id"] else None,
        target=row["target"],
        vars=row["vars"],
        created_at=row["created_at"],
        status=row["status"],
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"],
        delivered_at=row["delivered_at"],
        last_error=row["last_error"],
        http_status=row["http_status"],
        rule_name=row.get("rule_name"),
    )


class AlertRecords:
    """The alert tables, on ``self.pool`` (a psycopg pool)."""

    pool: Any

    @retry_on_dead_connection
    def alert_jobs(self, limit: int = 500) -> list[AlertJobRow]:
        """The jobs with alert rules (their own, or a rule set of one of their tags), those
        checked longest ago first."""
        with self.pool.connection() as conn:
            return [_job_row(row) for row in conn.execute(QUERIES["alert_jobs"], {"limit": limit}).fetchall()]

    @retry_on_dead_connection
    def alert_work(self) -> bool:
        """Whether a sweep has anything to do: a job with rules, or an alert still to send."""
        with self.pool.connection() as conn:
            return bool(conn.execute(QUERIES["alert_work"]).fetchone()["found"])

    @retry_on_dead_connection
    def sweep_alerts(self, job_id: str, decide: Callable[[HeldAlertState, Sequence[Execution]], AlertDecision]) -> int:
        """Hold the job's alert state (skipped when another sweep holds it), read its executions
        since, have ``decide`` plan the new state and the alerts while the row is held, and write
        both. Answers how many alerts were queued."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(QUERIES["ensure_alert_state"], {"job_id": job_id})
            row = conn.execute(QUERIES["lock_alert_state"], {"job_id": job_id}).fetchone()
            if row is None:
                return 0
            held = HeldAlertState(
                job=_job_row(row),
                seen_started_at=row["seen_started_at"],
                seen_seq=row["seen_seq"],
                failures_in_row=row["failures_in_row"],
                incident_id=str(row["incident_id"]) if row["incident_id"] else None,
                incident_opened_at=row["incident_opened_at"],
                fired=tuple(row["fired"]),
                now=row["db_now"],
            )
            rows = conn.execute(
                QUERIES["executions_after"],
                {
                    "job_id": job_id,
                    "started_at": held.seen_started_at or row["db_now"],
                    "seq": held.seen_seq or 0,
                    "limit": EXECUTIONS_PER_SWEEP,
                },
            ).fetchall()
            decision = decide(held, [Execution.from_row(r) for r in rows])
            conn.execute(QUERIES["save_alert_state"], {"job_id": job_id, **decision.state})
            for alert in decision.alerts:
                conn.execute(
                    QUERIES["insert_alert_delivery"],
                    {
                        **alert,
                        "id": str(uuid.uuid4()),
                        "owner": held.job.owner,
                        "job_id": job_id,
                        "job_name": held.job.name,
                        "target": Jsonb(alert["target"]),
                        "vars": Jsonb(alert["vars"]),
                    },
                )
            return len(decision.alerts)

    @retry_on_dead_connection
    def claim_alert_deliveries(self, limit: int, lease_seconds: float) -> list[AlertDelivery]:
        """Pending alerts due for an attempt, leased for their target's timeout and
        ``lease_seconds`` more (an attempt counted on each)."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                QUERIES["claim_alert_deliveries"], {"limit": limit, "lease_seconds": lease_seconds}
            ).fetchall()
        return [_delivery(row) for row in rows]

    @retry_on_dead_connection
    def extend_alert_leases(self, leases: Sequence[tuple[str, int, float]]) -> set[str]:
        """Keep the leases of alerts being sent, each ``(id, attempt, seconds)`` that much more
        from now, in one statement: the ids kept (an attempt taken over, or recorded, is not)."""
        return extend_held(self.pool, QUERIES["extend_alert_leases"], ("id", "attempt", "seconds"), leases, "id")

    @retry_on_dead_connection
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
        """An attempt's outcome: ``delivered``, ``failed`` (given up) or ``pending`` (again in
        ``retry_in`` seconds); only while ``attempt`` is the alert's last (None: any), so that an
        attempt whose lease another runner took over writes nothing. Whether it was written."""
        params = {
            "id": delivery_id,
            "status": status,
            "error": error,
            "http_status": http_status,
            "retry_in": retry_in,
            "attempt": attempt,
        }
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["record_alert_delivery"], params).rowcount == 1

    @retry_on_dead_connection
    def purge_alerts(self, retention_days: int) -> int:
        """Delete up to a thousand alerts past the retention (delivered or given up): how many."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["purge_alerts"], {"retention_days": retention_days}).rowcount

    @retry_on_dead_connection
    def list_alerts(
        self,
        owner: str,
        *,
        job_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[AlertDelivery]:
        """A page of the owner's alert deliveries, newest first (``before``: the keyset cursor)."""
        params = {
            "owner": owner,
            "job_id": job_id,
            "status": status,
            "limit": limit,
            "before_created_at": before[0] if before else None,
            "before_id": before[1] if before else None,
        }
        with self.pool.connection() as conn:
            return [_delivery(row) for row in conn.execute(QUERIES["list_alerts"], params).fetchall()]
