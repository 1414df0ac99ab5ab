"""The fan-out's reads and writes of leases besides the claim itself: a claim given back, the live
leases (in all, and the owners past their share of them), the claims deferred for their owner's
share, the due backlog, the time to the next due job, and a reclaimed manual run's losses.
``Store`` has ``LeaseLooks`` as a base class; it uses its pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.core.domain import Claim, DueBacklog, StartedExecution
from scheduler.sql import QUERIES
from scheduler.store.rows import retry_on_dead_connection


class LeaseLooks:
    """The fan-out's looks at the leases, on ``self.pool`` (a psycopg pool)."""

    pool: Any

    @retry_on_dead_connection
    def release(self, job_id: str, lock_token: str) -> bool:
        """Give back a claim that could not be dispatched, so the job is due again at once."""
        with self.pool.connection() as conn:
            return (
                conn.execute(QUERIES["release_lease"], {"job_id": job_id, "lock_token": lock_token}).fetchone()
                is not None
            )

    @retry_on_dead_connection
    def lost_runs(self, started: StartedExecution) -> int:
        """How often the job's manual or chained run of ``scheduled_at`` (its request's time) was
        lost with its runner (its executions marked lost). It writes too: ``started``, the
        execution started for it again, gets its attempt numbered after them (2 after one loss)."""
        params = {
            "job_id": str(started.job.id),
            "scheduled_at": started.scheduled_at,
            "trigger": str(started.trigger),
            "execution_id": started.execution_id,
            "started_at": started.started_at,
        }
        with self.pool.connection() as conn:
            return int(conn.execute(QUERIES["lost_runs"], params).fetchone()["lost"])

    @retry_on_dead_connection
    def jobs_still_stored(self, job_ids: Sequence[str]) -> set[str]:
        """Which of ``job_ids`` are still stored (an outcome refused for a job deleted during
        its delivery is not a lease taken over)."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["jobs_still_stored"], {"ids": list(job_ids)}).fetchall()
        return {row["id"] for row in rows}

    @retry_on_dead_connection
    def due_backlog(self) -> DueBacklog:
        """The due jobs not under way, the oldest's age and how many a claim can take now (one
        read of the due index, as the claim's)."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["due_backlog"]).fetchone()
        return DueBacklog(int(row["due"]), float(row["oldest_due_age_seconds"]), int(row["claimable"]))

    @retry_on_dead_connection
    def live_leases(self) -> int:
        """Jobs under an unexpired lease: executors at work or on their way (the fan-out's bound)."""
        with self.pool.connection() as conn:
            return int(conn.execute(QUERIES["count_live_leases"]).fetchone()["leases"])

    @retry_on_dead_connection
    def next_due_in(self) -> float | None:
        """Seconds until a job may next be claimed (negative when one is due), None when none."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["next_due_in"]).fetchone()["seconds"]

    @retry_on_dead_connection
    def owners_over_lease_share(self, share: int) -> dict[str, int]:
        """The owners whose jobs hold more than ``share`` of the live leases, each with how many
        more (read only when a claim could take an owner past its share)."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["owners_over_lease_share"], {"share": share}).fetchall()
        return {row["owner"]: int(row["excess"]) for row in rows}

    @retry_on_dead_connection
    def defer_claims(self, claims: Sequence[Claim], seconds: float) -> int:
        """Give claims back for ``seconds`` (their owner holds its share of the leases): neither
        leased nor claimable meanwhile, then claimed again as any due job. How many were."""
        if not claims:
            return 0
        params = {
            "job_id": [claim.job_id for claim in claims],
            "lock_token": [claim.lock_token for claim in claims],
            "seconds": seconds,
        }
        with self.pool.connection() as conn:
            return len(conn.execute(QUERIES["defer_claims"], params).fetchall())
