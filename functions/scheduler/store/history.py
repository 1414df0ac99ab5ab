"""The store's reads of execution history (a job's, an owner's across jobs) and the upkeep of
the executions' day partitions. ``Store`` has them as a base class; they use its pool and
``get_job``."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.core.domain import Execution, ExecutionStatus, Job, PartitionMaintenance
from scheduler.sql import QUERIES
from scheduler.store.rows import is_uuid, retry_on_dead_connection

# Deleted jobs whose change log one upkeep pass purges (the rest wait for the next pass).
CHANGES_PURGE_BATCH = 500


class ExecutionHistory:
    """Execution reads and partition upkeep, on ``self.pool`` (a psycopg pool)."""

    pool: Any

    def get_job(self, owner: str, job_id: str) -> Job:  # pragma: no cover - Store's
        raise NotImplementedError

    @retry_on_dead_connection
    def list_executions(
        self,
        owner: str,
        job_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        before_seq: int | None = None,
        before_started_at: datetime | None = None,
    ) -> list[Execution]:
        """A page of the job's executions, newest first. ``before_seq`` is the keyset cursor, the
        seq of the previous page's last row; ``before_started_at``, that row's ``started_at``
        when the cursor carries it, makes the cursor the primary key's own condition and narrows
        the days read. Raises ``NotFound``."""
        job = self.get_job(owner, job_id)
        params = {
            "job_id": job_id,
            "status": status,
            "before_seq": before_seq,
            "before_started_at": before_started_at if before_seq is not None else None,
            "limit": limit,
            "since": None,
            "until": None,
        }
        if status in RARE_STATUS_QUERIES:  # running or lost: read where they are named, not walked
            with self.pool.connection() as conn:
                query = QUERIES[RARE_STATUS_QUERIES[status][1]]
                rows = conn.execute(query, params, prepare=False).fetchall()
            return [Execution.from_row(row) for row in rows]
        # Never prepared (here and below): planned with its values, the page's conditions are the
        # index's and prune the partitions; a generic plan read every execution of the job.
        # As list_owner_executions: the recent days first (seq and started_at order a job's
        # executions alike, see queries.sql), before now or the cursor's instant, as many as the
        # job's rate so far says hold a page; the older ones only for a page left short. A
        # cursor's day also bounds the page above (its later days pruned). A job too rare for a
        # week to hold a page, a status filter (but running and lost, above), and a cursor without
        # an instant (issued before cursors carried one) read every day at once (up to the
        # cursor's, when known).
        now = datetime.now(UTC)
        if before_seq is None:
            newest = now
        elif before_started_at is not None:
            newest = before_started_at
            params["until"] = _days_before(newest, -1)  # the midnight after the cursor's day
        else:
            newest = None
        days = None if newest is None or status is not None else _days_for_a_page(job, now, limit)
        with self.pool.connection() as conn:
            if days is None or newest is None:
                rows = conn.execute(QUERIES["list_executions"], params, prepare=False).fetchall()
            else:
                recent = _days_before(newest, days)
                rows = conn.execute(QUERIES["list_executions"], {**params, "since": recent}, prepare=False).fetchall()
                if len(rows) < limit:
                    rows += conn.execute(
                        QUERIES["list_executions"],
                        {**params, "until": recent, "limit": limit - len(rows)},
                        prepare=False,
                    ).fetchall()
        return [Execution.from_row(row) for row in rows]

    @retry_on_dead_connection
    def get_execution(self, execution_id: str, started_at: datetime | None = None) -> Execution | None:
        """One execution by id (internal: no owner check); its ``started_at``, when known, makes
        the lookup read one day's partition."""
        with self.pool.connection() as conn:
            row = conn.execute(
                QUERIES["get_execution"], {"execution_id": execution_id, "started_at": started_at}
            ).fetchone()
        return None if row is None else Execution.from_row(row)

    @retry_on_dead_connection
    def find_owner_execution(self, owner: str, execution_id: str) -> Execution | None:
        """One of the owner's executions by its id, with its ``job_name``; None when the owner
        has none of that id (an id that is not a UUID included)."""
        if not is_uuid(execution_id):
            return None
        with self.pool.connection() as conn:
            row = conn.execute(
                QUERIES["find_owner_execution"], {"owner": owner, "execution_id": execution_id}, prepare=False
            ).fetchone()
        return None if row is None else Execution.from_row(row)

    @retry_on_dead_connection
    def maintain_partitions(self, retention_days: int, days_ahead: int = 3) -> PartitionMaintenance:
        """Retention by whole days: create the executions' partitions of today and the next
        ``days_ahead`` days (0 to 7: the function refuses more, migration 0011), drop those
        wholly older than ``retention_days`` (at least 1), purge the change logs of jobs,
        calendars and rule sets deleted longer ago than that, purge expired rows of the DEFAULT
        partition (``scheduler_maintain_partitions``, migration 0005: it holds the DDL rights the
        application's role lacks). A step that would wait on a lock is left to the next call
        (counted in ``skipped``)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                QUERIES["maintain_partitions"], {"retention_days": retention_days, "days_ahead": days_ahead}
            ).fetchone()
            # The change log of jobs deleted past the same retention (0016), a batch a pass.
            purge = {"retention_days": max(retention_days, 1), "limit": CHANGES_PURGE_BATCH}
            purged = conn.execute(QUERIES["purge_job_changes"], purge).rowcount
            # And those of calendars and rule sets deleted past it (0023).
            purged += conn.execute(QUERIES["purge_resource_changes"], purge).rowcount
        return PartitionMaintenance(**row, changes_purged=purged)

    @retry_on_dead_connection
    def list_owner_executions(
        self,
        owner: str,
        *,
        status: ExecutionStatus | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[Execution]:
        """A page of the owner's executions across all their jobs, newest first by ``started_at``
        (then id), each with its ``job_name``; ``before`` is the keyset cursor, the (started_at,
        id) of the previous page's last row. A ``job_id`` that is not a UUID matches nothing. A
        page of running or lost executions is read where they are named (RARE_STATUS_QUERIES)."""
        if job_id is not None and not is_uuid(job_id):
            return []
        before_started_at, before_id = before if before is not None else (None, None)
        params = {
            "owner": owner,
            "status": status,
            "job_id": job_id,
            "since": since,
            "until": None,
            "limit": limit,
            "before_started_at": before_started_at,
            "before_id": before_id,
        }
        # A page usually lies in the last days (before the cursor, or today): a first try bounded
        # below by midnight OWNER_RECENT_DAYS back, a constant the planner prunes every older day's
        # partition with (planning a query over a month of partitions costs more than reading the
        # page). Only a page it leaves short reads on below that instant. The local clock only
        # places the bound: the two tries cover every instant, so a skewed clock costs a second try.
        recent = _days_before(before_started_at or datetime.now(UTC), OWNER_RECENT_DAYS)
        with self.pool.connection() as conn:
            rare = _rare_status_page(conn, status, params) if status in RARE_STATUS_QUERIES else None
            if rare is not None:
                rows = rare
            elif since is not None and since >= recent:
                rows = conn.execute(QUERIES["list_owner_executions"], params, prepare=False).fetchall()
            else:
                rows = conn.execute(
                    QUERIES["list_owner_executions"], {**params, "since": recent}, prepare=False
                ).fetchall()
                if len(rows) < limit:
                    rows += conn.execute(
                        QUERIES["list_owner_executions"],
                        {**params, "until": recent, "limit": limit - len(rows)},
                        prepare=False,
                    ).fetchall()
        return [Execution.from_row(row) for row in rows]


# The statuses too rare for a walk of the executions in the page's order to find a page soon
# (it read every day kept, 0.25-0.38 s at a million executions), and no index may lead with the
# status (the completion writes it: it would end the completions' heap-only updates). Their pages
# come from where such executions are named, the listing's order and conditions kept: a running
# execution is its job's live run (job_runs), a lost one has its entry in lost_executions (0028).
# Each: the query across the owner's jobs (list_owner_executions), then one job's (list_executions).
RARE_STATUS_QUERIES = {
    ExecutionStatus.RUNNING: ("list_owner_running", "list_job_running"),
    ExecutionStatus.LOST: ("list_owner_lost", "list_job_lost"),
}

# list_owner_running reads every job of the owner (about 0.15-0.5 ms a thousand: no index can
# name the running ones, see RARE_STATUS_QUERIES), where the walk reads the owner's executions in
# the page's order until it has a page: the fewer of the two for an owner of few jobs, unless
# they seldom run. An owner of this many jobs or more pages status=running by the walk, as before
# (a count of its jobs up to this, from its index alone, tells which: 1-3 ms at the cap), so that
# no page reads more than this many jobs (5-10 ms) where the walk would have read a few rows.
RUNNING_JOBS_CAP = 20_000


def _rare_status_page(conn: Any, status: ExecutionStatus, params: dict[str, Any]) -> list[Any] | None:
    """The rows of a page of the owner's executions of a rare status (RARE_STATUS_QUERIES), read
    where such executions are named; None for the walk of the owner's executions instead (an owner
    of RUNNING_JOBS_CAP jobs or more, status=running across its jobs), which the caller takes."""
    if status == ExecutionStatus.RUNNING and params["job_id"] is None:
        counted = {"owner": params["owner"], "cap": RUNNING_JOBS_CAP}
        jobs = conn.execute(QUERIES["owner_jobs_up_to"], counted, prepare=False).fetchone()["jobs"]
        if jobs >= RUNNING_JOBS_CAP:
            return None
    return conn.execute(QUERIES[RARE_STATUS_QUERIES[status][0]], params, prepare=False).fetchall()


# Days of executions a history page's first try reads (see list_owner_executions): an owner's
# executions across jobs, the day before and today's; one job's, up to a week, from its rate.
OWNER_RECENT_DAYS = 1
JOB_RECENT_DAYS = 7


def _days_before(instant: datetime, days: int) -> datetime:
    """Midnight UTC ``days`` before ``instant``'s day (the executions' partitions are UTC days)."""
    day = instant.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=days)


def _days_for_a_page(job: Job, now: datetime, limit: int) -> int | None:
    """Days back likely to hold ``limit`` of the job's executions, at its rate so far (runs over
    its age, with a margin), at most JOB_RECENT_DAYS; None when that would not hold a page."""
    created_at = job.created_at or now
    age_days = max((now - created_at).total_seconds() / 86400, 1 / 24)
    per_day = job.run_count / age_days
    if per_day * JOB_RECENT_DAYS < 1.5 * limit:
        return None
    return max(1, min(JOB_RECENT_DAYS, math.ceil(1.5 * limit / per_day)))
