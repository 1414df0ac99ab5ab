"""The store's per-target limits: a slot taken before a limited delivery and given back after
(``target_slots``, counted under the key's row lock in ``target_limits``), the lease of a
delivery that waits for one kept, and the wait recorded on its execution. ``Store`` has them as a
base class; only jobs with limits call them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from scheduler.core.limits import SlotHandBack, TargetLimit
from scheduler.sql import QUERIES
from scheduler.store.rows import extend_held, retry_on_dead_connection


class TargetSlots:
    """Slots of limited targets, on ``self.pool`` (a psycopg pool)."""

    pool: Any

    @retry_on_dead_connection
    def take_target_slot(self, limit: TargetLimit, job_id: str, lease_seconds: float) -> str | None:
        """A slot of ``limit.key`` of its owner (its token) if the key is under its limits, else
        None. Held until released, or for ``lease_seconds`` (a runner that died frees it then)."""
        params = {
            "key": limit.slot_key,
            "max_in_flight": limit.max_in_flight,
            "per_second": limit.per_second,
            "token": str(uuid.uuid4()),
            "job_id": job_id,
            "lease_seconds": lease_seconds,
        }
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(QUERIES["lock_target_limit"], params)
            row = conn.execute(QUERIES["take_target_slot"], params).fetchone()
        return None if row is None else str(row["token"])

    @retry_on_dead_connection
    def running_version(self, job_id: str, lock_token: str, execution_id: str) -> int | None:
        """The version of a job whose execution ``execution_id`` runs under ``lock_token`` (a
        delivery that waited for its slot reads it before it calls the target); None when the
        lease was lost or the job deleted."""
        params = {"job_id": job_id, "lock_token": lock_token, "execution_id": execution_id}
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["running_version"], params).fetchone()
        return None if row is None else int(row["version"])

    @retry_on_dead_connection
    def release_target_slot(self, token: str) -> None:
        """Give a slot back."""
        with self.pool.connection() as conn:
            conn.execute(QUERIES["release_target_slot"], {"token": token})

    @retry_on_dead_connection
    def extend_target_slots(self, slots: Sequence[tuple[str, float]]) -> set[str]:
        """Keep held slots, each ``(token, seconds)`` that much more from now, in one statement:
        the tokens kept (a slot released, or deleted once expired, is not)."""
        return extend_held(self.pool, QUERIES["extend_target_slots"], ("token", "seconds"), slots, "token")

    @retry_on_dead_connection
    def extend_leases(self, leases: Sequence[tuple[str, str, float]]) -> set[str]:
        """Keep started jobs' leases while they wait for their slots, each ``(job_id,
        lock_token, seconds)`` that much more, in one statement: the ids of the jobs whose lease
        was kept (the others were taken over)."""
        names = ("job_id", "lock_token", "seconds")
        return extend_held(self.pool, QUERIES["extend_leases"], names, leases, "job_id")

    @retry_on_dead_connection
    def hand_back_for_slot(self, hand_back: SlotHandBack, min_pause_seconds: float, max_pause_seconds: float) -> bool:
        """Undo a limited delivery's start and give its job back to the fan-outs after a pause:
        half of the wait so far (since its first hand-back), within the bounds, with a quarter of
        jitter either way. False when the lease was taken over meanwhile (nothing written)."""
        params = {
            "job_id": hand_back.job_id,
            "lock_token": hand_back.lock_token,
            "execution_id": hand_back.execution_id,
            "started_at": hand_back.started_at,
            "waited_seconds": max(hand_back.waited_seconds, 0.0),
            "waited_for": hand_back.waited_for,
            "min_pause_seconds": min_pause_seconds,
            "max_pause_seconds": max_pause_seconds,
        }
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["hand_back_for_slot"], params).fetchone() is not None

    @retry_on_dead_connection
    def record_wait(
        self, job_id: str, lock_token: str, started_at: datetime, execution_id: str, waited_ms: int, waited_for: str
    ) -> datetime | None:
        """How long a started execution waited for its target's slot, and why; its start (and
        the job's ``last_run_at``) moved to now, the database's, which it answers. None when the
        lease was lost (nothing written)."""
        params = {
            "job_id": job_id,
            "lock_token": lock_token,
            "started_at": started_at,
            "execution_id": execution_id,
            "waited_ms": waited_ms,
            "waited_for": waited_for,
        }
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["record_wait"], params).fetchone()
        return None if row is None else row["started_at"]
