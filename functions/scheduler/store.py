"""The data access of the scheduler: every read and write of jobs and executions, on Postgres.

Each method is one transaction; the SQL lives in ``sql/queries.sql``. Times come from the
database (``now()``), never from the caller's clock. Methods taking an ``owner`` only ever see
that owner's jobs: another principal's job is indistinguishable from an absent one.

The store does not plan: a write that needs a plan (the next occurrence, a retry) takes it
computed (``write_completions``) or takes the planning function, called while the row is held
(``insert_job``, ``modify_job``, ``complete_locked``). ``scheduler.service`` pairs each operation
with its plan from ``scheduler.lifecycle``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping, Sequence

import psycopg
from psycopg.types.json import Jsonb, JsonbLoader
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool

from scheduler.domain import SPEC_FIELDS, Claim, Completion, Execution, Job, PartitionMaintenance, StartedExecution
from scheduler.errors import NameTaken, NotFound, VersionMismatch  # noqa: F401 (re-exported)
from scheduler.ports import Change, CompletionPlanner, Planner
from scheduler.sql import QUERIES

try:  # the `local` extra: an order of magnitude faster than json.loads on a started row's target
    import orjson
except ImportError:  # pragma: no cover - without it, psycopg's default (json.loads)
    orjson = None  # type: ignore[assignment]

# The parameters of ``complete_job`` (values), and of ``complete_jobs`` (arrays of them).
_COMPLETION_COLUMNS = ("job_id", "lock_token", "execution_id", "version", "state", "scheduled_at", "attempt",
                       "next_run_at", "ran_scheduled_at", "status", "error", "http_status", "response_excerpt",
                       "started_at")


def _complete(conn: psycopg.Connection | psycopg.Cursor, rows: list[dict[str, Any]]) -> psycopg.Cursor:
    """Execute the completion of planned outcomes: plain values for one (the cheaper statement
    to plan, for executors through RDS Proxy that cannot keep prepared statements), arrays for
    a batch."""
    if len(rows) == 1:
        return conn.execute(QUERIES["complete_job"], rows[0])
    return conn.execute(QUERIES["complete_jobs"], {key: [row[key] for row in rows] for key in _COMPLETION_COLUMNS})


def _completion_row(done: Completion, plan: Mapping[str, Any], version: int, ran_scheduled_at: datetime | None,
                    started_at: datetime) -> dict[str, Any]:
    """One outcome's parameters; ``started_at`` is the execution's (its partition's key)."""
    return {"job_id": done.job_id, "lock_token": done.lock_token, "execution_id": done.execution_id,
            "version": version, "state": plan["state"], "scheduled_at": plan["scheduled_at"],
            "attempt": plan["attempt"], "next_run_at": plan["next_run_at"], "ran_scheduled_at": ran_scheduled_at,
            "status": done.outcome.status, "error": done.outcome.error, "http_status": done.http_status,
            "response_excerpt": done.response_excerpt, "started_at": started_at}


def _retry_on_dead_connection(method: Callable) -> Callable:
    """Run a method once more when its pooled connection turned out dead (the server restarted,
    or RDS Proxy closed an idle client): the pool drops the broken connection and the retry gets
    a fresh one. A dead connection fails at the method's first statement, before anything was
    written; in the rare case of a reply lost after a commit, the runner's writes are fenced by
    their lease tokens (a start answers "lease lost" on the retry and its lease is reclaimed
    later; a claim's first batch waits out its lease)."""
    @functools.wraps(method)
    def wrapper(self: "Store", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except psycopg.OperationalError:
            return method(self, *args, **kwargs)
    return wrapper


# 19 digits in a row may be an integer beyond 64 bits, which orjson turns into a float (lossy).
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def _json_loads(data: bytes) -> Any:
    """json.loads' answer, by orjson where that is the same: json.loads for integers beyond 64
    bits (orjson reads them as floats), and for what orjson refuses (lone surrogates, 1e400)."""
    if _LONG_DIGITS.search(data):
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class _JsonbLoader(JsonbLoader):
    _loads = staticmethod(_json_loads)


_UUID_OID, _JSONB_OID = 2950, 3802  # registered by oid: a lookup by type name costs more than the rest


def _uuids_as_text(conn: psycopg.Connection) -> psycopg.Cursor:
    """A cursor reading uuid columns as text: the runner's started rows carry four ids each,
    used only as text, and a uuid.UUID object per id is a measurable share of a batch's cost.
    Its jsonb columns (a started row's target and retry) are read with orjson when installed."""
    cursor = conn.cursor()
    cursor.adapters.register_loader(_UUID_OID, TextLoader)
    if orjson is not None:
        cursor.adapters.register_loader(_JSONB_OID, _JsonbLoader)
    return cursor


def _started(row: dict[str, Any]) -> StartedExecution:
    """A row of start_execution or claim_and_start: the job's columns and its execution's
    (``Job.from_row`` ignores the others)."""
    return StartedExecution(job=Job.from_row(row), execution_id=str(row["execution_id"]),
                            scheduled_at=row["execution_scheduled_at"], attempt=row["execution_attempt"],
                            trigger=row["execution_trigger"], started_at=row["execution_started_at"])


def _delete_completed(conn: psycopg.Connection, job_ids: Sequence[str]) -> None:
    """In the transaction of their completion: delete the jobs it completed whose
    ``after_completion`` is ``delete``, with their executions (the query fences it)."""
    if job_ids:
        conn.execute(QUERIES["delete_completed_jobs"], {"job_ids": [str(job_id) for job_id in job_ids]})


def _spec_params(spec: Mapping[str, Any]) -> dict[str, Any]:
    params = {k: spec.get(k) for k in SPEC_FIELDS}
    params["tags"] = list(spec.get("tags") or [])
    params["timezone"] = spec.get("timezone") or "UTC"
    params["missed_runs"] = spec.get("missed_runs") or "run_once"
    params["target"] = Jsonb(spec["target"])
    params["retry"] = Jsonb(spec.get("retry") or {})
    params["after_completion"] = spec.get("after_completion") or "keep"
    return params


class Store:
    """Postgres-backed store of jobs and executions (every port of ``scheduler.ports``)."""

    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    # -- jobs ----------------------------------------------------------------------------------

    @_retry_on_dead_connection
    def now(self) -> datetime:
        """The database clock."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["now"]).fetchone()["now"]

    @_retry_on_dead_connection
    def insert_job(self, owner: str, spec: Mapping[str, Any], plan_first: Planner, *, job_id: str | None = None
                   ) -> dict[str, Any]:
        """Insert a job with the schedule columns ``plan_first(draft, now)`` gives (the draft:
        the spec and its creation time). Raises ``NameTaken``."""
        with self.pool.connection() as conn:
            now = conn.execute(QUERIES["now"]).fetchone()["now"]
            draft = Job.from_row({**spec, "created_at": now})
            plan = dict(plan_first(draft, now))
            params = {**_spec_params(spec), **plan, "id": job_id or str(uuid.uuid4()), "owner": owner,
                      "created_at": now}
            params.pop("attempt")
            row = conn.execute(QUERIES["insert_job"], params).fetchone()
            if row is None:
                raise NameTaken(spec["name"])
            return row

    @_retry_on_dead_connection
    def get_job(self, owner: str, job_id: str) -> dict[str, Any]:
        """One job of this owner. Raises ``NotFound``."""
        if not _is_uuid(job_id):
            raise NotFound(job_id)
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["get_job"], {"id": job_id, "owner": owner}).fetchone()
        if row is None:
            raise NotFound(job_id)
        return row

    @_retry_on_dead_connection
    def list_jobs(self, owner: str, *, state: str | None = None, tag: str | None = None,
                  name_prefix: str | None = None, limit: int = 50, after_name: str | None = None
                  ) -> list[dict[str, Any]]:
        """A page of this owner's jobs in name order, after ``after_name`` (the keyset cursor)."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["list_jobs"], {
                "owner": owner, "state": state, "tag": tag, "name_prefix": name_prefix,
                "after_name": after_name, "limit": limit}).fetchall()

    @_retry_on_dead_connection
    def modify_job(self, owner: str, job_id: str, change: Change, expected_version: int | None = None
                   ) -> dict[str, Any]:
        """Hold the row, let ``change(row, now)`` compute the new columns, write them (version + 1).
        Raises ``NotFound``, ``VersionMismatch`` (``expected_version`` given and stale) or
        ``NameTaken``."""
        if not _is_uuid(job_id):
            raise NotFound(job_id)
        try:
            with self.pool.connection() as conn, conn.transaction():
                row = conn.execute(QUERIES["get_job_for_update"], {"id": job_id, "owner": owner}).fetchone()
                if row is None:
                    raise NotFound(job_id)
                if expected_version is not None and row["version"] != expected_version:
                    raise VersionMismatch(row["version"])
                now = row.pop("db_now")
                new = {**row, **change(row, now)}
                params = {**_spec_params(new), "id": job_id, "owner": owner,
                          **{k: new[k] for k in ("state", "scheduled_at", "attempt", "next_run_at",
                                                 "manual_run_at")}}
                return conn.execute(QUERIES["update_job"], params).fetchone()
        except psycopg.errors.UniqueViolation:
            raise NameTaken("name") from None

    @_retry_on_dead_connection
    def delete_job(self, owner: str, job_id: str) -> None:
        """Delete the job and its executions. Raises ``NotFound``."""
        if not _is_uuid(job_id):
            raise NotFound(job_id)
        with self.pool.connection() as conn:
            if conn.execute(QUERIES["delete_job"], {"id": job_id, "owner": owner}).fetchone() is None:
                raise NotFound(job_id)

    @_retry_on_dead_connection
    def request_run(self, owner: str, job_id: str) -> dict[str, Any]:
        """Ask for a run now, outside the schedule; the next claim takes it."""
        if not _is_uuid(job_id):
            raise NotFound(job_id)
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["request_manual_run"], {"id": job_id, "owner": owner}).fetchone()
        if row is None:
            raise NotFound(job_id)
        return row

    # -- the runner ----------------------------------------------------------------------------

    @_retry_on_dead_connection
    def claim_due(self, limit: int, lease_seconds: float) -> list[Claim]:
        """Lease up to ``limit`` due jobs (one statement; see ``claim_due`` in queries.sql)."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["claim_due"], {"limit": limit, "lease_seconds": lease_seconds}).fetchall()
        return [Claim(job_id=str(r["job_id"]), lock_token=str(r["lock_token"]), lease_kind=r["lease_kind"],
                      scheduled_at=r["scheduled_at"], due_at=r["due_at"], claimed_at=r["claimed_at"],
                      locked_until=r["locked_until"], reclaimed=r["reclaimed"]) for r in rows]

    @_retry_on_dead_connection
    def release(self, job_id: str, lock_token: str) -> bool:
        """Give back a claim that could not be dispatched, so the job is due again at once."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["release_lease"], {"job_id": job_id, "lock_token": lock_token}
                                ).fetchone() is not None

    @_retry_on_dead_connection
    def start_execution(self, job_id: str, lock_token: str, lease_margin_seconds: float = 30
                        ) -> StartedExecution | None:
        """Confirm the claim, extend its lease over the target's timeout plus the margin, and
        record a running execution; None when the lease was lost (expired and taken over, or
        already started by a duplicate invoke)."""
        with self.pool.connection() as conn:
            row = _uuids_as_text(conn).execute(QUERIES["start_execution"], {
                "job_id": job_id, "lock_token": lock_token, "lease_margin_seconds": lease_margin_seconds,
                "execution_id": str(uuid.uuid4())}).fetchone()
        return None if row is None else _started(row)

    @_retry_on_dead_connection
    def claim_and_start(self, limit: int, lease_margin_seconds: float = 30) -> list[Claim]:
        """Lease up to ``limit`` due jobs and start them, in one statement: for a runner that
        delivers each claim at once (each lease covers the target's timeout plus the margin).
        Every claim carries its ``started`` execution."""
        with self.pool.connection() as conn:
            rows = _uuids_as_text(conn).execute(QUERIES["claim_and_start"], {
                "limit": limit, "lease_margin_seconds": lease_margin_seconds}).fetchall()
        claims = []
        for row in rows:
            started = _started(row)
            claims.append(Claim(job_id=str(row["id"]), lock_token=str(row["lock_token"]),
                                lease_kind=row["lease_kind"], scheduled_at=started.scheduled_at,
                                due_at=row["due_at"], claimed_at=row["claimed_at"],
                                locked_until=row["locked_until"], reclaimed=row["reclaimed"], started=started))
        return claims

    @_retry_on_dead_connection
    def write_completions(self, planned: Sequence[tuple[Completion, Mapping[str, Any]]]) -> set[str]:
        """Write outcomes planned from their started rows (``Completion.started``) in one
        statement (``complete_jobs``, or ``complete_job`` for one); the ids of the jobs written.
        A job whose lease was lost, or whose row changed since it was started, is not written.
        A plan marked ``"delete": True`` (the service's decision: ``after_completion = 'delete'``
        and the job completed) deletes its job with its executions in the same transaction, once
        written; without any, the statement runs alone (no transaction to open)."""
        rows = [_completion_row(done, plan, done.started.job.version, done.started.scheduled_at,
                                done.started.started_at) for done, plan in planned]
        doomed = [str(done.job_id) for done, plan in planned if plan.get("delete")]
        with self.pool.connection() as conn, (conn.transaction() if doomed else contextlib.nullcontext()):
            written = {str(r["job_id"]) for r in _complete(_uuids_as_text(conn), rows).fetchall()}
            _delete_completed(conn, [job_id for job_id in doomed if job_id in written])
            return written

    @_retry_on_dead_connection
    def complete_locked(self, done: Completion, plan: CompletionPlanner) -> bool:
        """The locking path: hold the row while our lease stands, plan from it with
        ``plan(job, now, ran_scheduled_at)``, write (and delete the job when the plan says
        ``"delete"``, as ``write_completions``). False when the lease is lost (fenced)."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(QUERIES["lock_leased_job"], {
                "job_id": done.job_id, "lock_token": done.lock_token, "execution_id": done.execution_id}).fetchone()
            if row is None:
                return False
            job, ran = Job.from_row(row), row["ran_scheduled_at"]
            planned = plan(job, row["db_now"], ran)
            written = _complete(conn, [_completion_row(done, planned, job.version, ran, row["ran_started_at"])]
                                ).fetchone() is not None
            if written and planned.get("delete"):
                _delete_completed(conn, [done.job_id])
            return written

    @_retry_on_dead_connection
    def due_backlog(self) -> tuple[int, float]:
        """(unleased due jobs, age in seconds of the oldest) for the metrics."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["due_backlog"]).fetchone()
        return int(row["due"]), float(row["oldest_due_age_seconds"])

    @_retry_on_dead_connection
    def live_leases(self) -> int:
        """Jobs under an unexpired lease: executors at work or on their way (the fan-out's bound)."""
        with self.pool.connection() as conn:
            return int(conn.execute(QUERIES["count_live_leases"]).fetchone()["leases"])

    @_retry_on_dead_connection
    def next_due_in(self) -> float | None:
        """Seconds until a job may next be claimed (negative when one is due), None when none."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["next_due_in"]).fetchone()["seconds"]

    # -- executions ----------------------------------------------------------------------------

    @_retry_on_dead_connection
    def list_executions(self, owner: str, job_id: str, *, status: str | None = None, limit: int = 50,
                        before_seq: int | None = None) -> list[Execution]:
        """A page of the job's executions, newest first. Raises ``NotFound``."""
        job = self.get_job(owner, job_id)
        params = {"job_id": job_id, "status": status, "before_seq": before_seq, "limit": limit, "since": None,
                  "until": None}
        # As list_owner_executions, for a first page: the recent days first (seq and started_at
        # order a job's executions alike, see queries.sql), as many as the job's rate so far
        # says hold a page, the older ones only for a page left short. A job too rare for a week
        # to hold a page, and a page after a cursor (its instant unknown), read every day at once.
        now = datetime.now(timezone.utc)
        days = None if before_seq is not None or status is not None else _days_for_a_page(job, now, limit)
        with self.pool.connection() as conn:
            if days is None:
                rows = conn.execute(QUERIES["list_executions"], params).fetchall()
            else:
                recent = _days_before(now, days)
                rows = conn.execute(QUERIES["list_executions"], {**params, "since": recent}).fetchall()
                if len(rows) < limit:
                    rows += conn.execute(QUERIES["list_executions"], {
                        **params, "until": recent, "limit": limit - len(rows)}).fetchall()
        return [Execution.from_row(row) for row in rows]

    @_retry_on_dead_connection
    def get_execution(self, execution_id: str, started_at: datetime | None = None) -> Execution | None:
        """One execution by id (internal: no owner check); its ``started_at``, when known, makes
        the lookup read one day's partition."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["get_execution"], {"execution_id": execution_id,
                                                          "started_at": started_at}).fetchone()
        return None if row is None else Execution.from_row(row)

    @_retry_on_dead_connection
    def maintain_partitions(self, retention_days: int, days_ahead: int = 3) -> PartitionMaintenance:
        """Retention by whole days: create the executions' partitions of today and the next
        ``days_ahead`` days, drop those wholly older than ``retention_days``, purge expired rows
        of the DEFAULT partition (``scheduler_maintain_partitions``, migration 0005: it holds the
        DDL rights the application's role lacks). A step that would wait on a lock is left to
        the next call (counted in ``skipped``)."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["maintain_partitions"], {
                "retention_days": retention_days, "days_ahead": days_ahead}).fetchone()
        return PartitionMaintenance(**row)

    @_retry_on_dead_connection
    def list_owner_executions(self, owner: str, *, status: str | None = None, job_id: str | None = None,
                              since: datetime | None = None, limit: int = 50,
                              before: tuple[datetime, str] | None = None) -> list[Execution]:
        """A page of the owner's executions across all their jobs, newest first by ``started_at``
        (then id), each with its ``job_name``; ``before`` is the keyset cursor, the (started_at,
        id) of the previous page's last row. A ``job_id`` that is not a UUID matches nothing."""
        if job_id is not None and not _is_uuid(job_id):
            return []
        before_started_at, before_id = before if before is not None else (None, None)
        params = {"owner": owner, "status": status, "job_id": job_id, "since": since, "until": None, "limit": limit,
                  "before_started_at": before_started_at, "before_id": before_id}
        # A page usually lies in the last days (before the cursor, or today): a first try bounded
        # below by midnight OWNER_RECENT_DAYS back, a constant the planner prunes every older day's
        # partition with (planning a query over a month of partitions costs more than reading the
        # page). Only a page it leaves short reads on below that instant. The local clock only
        # places the bound: the two tries cover every instant, so a skewed clock costs a second try.
        recent = _days_before(before_started_at or datetime.now(timezone.utc), OWNER_RECENT_DAYS)
        with self.pool.connection() as conn:
            if since is not None and since >= recent:
                rows = conn.execute(QUERIES["list_owner_executions"], params).fetchall()
            else:
                rows = conn.execute(QUERIES["list_owner_executions"], {**params, "since": recent}).fetchall()
                if len(rows) < limit:
                    rows += conn.execute(QUERIES["list_owner_executions"], {
                        **params, "until": recent, "limit": limit - len(rows)}).fetchall()
        return [Execution.from_row(row) for row in rows]


# Days of executions a history page's first try reads (see list_owner_executions): an owner's
# executions across jobs, the day before and today's; one job's, up to a week, from its rate.
OWNER_RECENT_DAYS = 1
JOB_RECENT_DAYS = 7


def _days_before(instant: datetime, days: int) -> datetime:
    """Midnight UTC ``days`` before ``instant``'s day (the executions' partitions are UTC days)."""
    day = instant.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=days)


def _days_for_a_page(job: Mapping[str, Any], now: datetime, limit: int) -> int | None:
    """Days back likely to hold ``limit`` of the job's executions, at its rate so far (runs over
    its age, with a margin), at most JOB_RECENT_DAYS; None when that would not hold a page."""
    age_days = max((now - job["created_at"]).total_seconds() / 86400, 1 / 24)
    per_day = job["run_count"] / age_days
    if per_day * JOB_RECENT_DAYS < 1.5 * limit:
        return None
    return max(1, min(JOB_RECENT_DAYS, math.ceil(1.5 * limit / per_day)))


_CANONICAL_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _is_uuid(value: str) -> bool:
    # The canonical text form only: uuid.UUID also takes "urn:uuid:...", braces and missing or
    # extra dashes, which Postgres refuses (a 500 had the check let them through).
    return isinstance(value, str) and _CANONICAL_UUID.fullmatch(value) is not None

