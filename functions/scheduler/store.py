"""The data access of the scheduler: every read and write of jobs and executions, on Postgres.

Each method is one transaction; the SQL lives in ``sql/queries.sql``. Times come from the
database (``now()``), never from the caller's clock. Methods taking an ``owner`` only ever see
that owner's jobs: another principal's job is indistinguishable from an absent one.
"""

from __future__ import annotations

import contextlib
import functools
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Sequence

import psycopg
from psycopg.types.json import Jsonb
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool

from scheduler import lifecycle
from scheduler.sql import QUERIES

# Columns whose change means the occurrences must be computed afresh.
SCHEDULE_FIELDS = ("schedule", "run_at", "timezone", "start_at", "end_at")
# Columns a job's owner may write (POST, PUT, PATCH).
SPEC_FIELDS = ("name", "description", "tags", "schedule", "run_at", "timezone", "start_at", "end_at",
               "target", "retry", "missed_runs", "after_completion")


class NotFound(LookupError):
    """No such job for this owner."""


class NameTaken(ValueError):
    """The owner already has a job of that name."""


class VersionMismatch(ValueError):
    """The job's version is not the one the caller expected (If-Match)."""

    def __init__(self, current: int):
        super().__init__(f"the job is at version {current}")
        self.current = current


@dataclass(frozen=True)
class Claim:
    """A job taken by the fan-out, with the lease token that fences its completion."""

    job_id: str
    lock_token: str
    lease_kind: str
    scheduled_at: datetime
    due_at: datetime
    claimed_at: datetime
    locked_until: datetime
    reclaimed: bool = False
    # Set by claim_and_start: the execution already recorded as running on this claim.
    started: "StartedExecution | None" = None

    def to_event(self) -> dict[str, Any]:
        """The executor's invoke payload."""
        return {"job_id": self.job_id, "lock_token": self.lock_token,
                "scheduled_at": self.scheduled_at.isoformat(), "due_at": self.due_at.isoformat(),
                "claimed_at": self.claimed_at.isoformat()}


@dataclass(frozen=True)
class StartedExecution:
    """An execution recorded as running, with the job's columns its delivery and its completion
    need (``started_job_columns`` in queries.sql lists them; the target still encrypted)."""

    job: dict[str, Any]
    execution_id: str
    scheduled_at: datetime
    attempt: int
    trigger: str
    started_at: datetime

    @property
    def lateness_ms(self) -> float:
        """How late the execution started after its scheduled time, by the database clock."""
        return (self.started_at - self.scheduled_at).total_seconds() * 1000


@dataclass(frozen=True)
class Completion:
    """How one started execution ended, to be recorded (``Store.complete_executions``)."""

    job_id: str
    lock_token: str
    execution_id: str
    outcome: lifecycle.Outcome
    http_status: int | None = None
    response_excerpt: str | None = None
    # What start_execution returned and the seconds since: the plan is made from that row.
    started: StartedExecution | None = None
    elapsed_seconds: float | None = None


# The parameters of ``complete_job`` (values), and of ``complete_jobs`` (arrays of them).
_COMPLETION_COLUMNS = ("job_id", "lock_token", "execution_id", "version", "state", "scheduled_at", "attempt",
                       "next_run_at", "ran_scheduled_at", "status", "error", "http_status", "response_excerpt")


def _complete(conn: psycopg.Connection | psycopg.Cursor, rows: list[dict[str, Any]]) -> psycopg.Cursor:
    """Execute the completion of planned outcomes: plain values for one (the cheaper statement
    to plan, for executors through RDS Proxy that cannot keep prepared statements), arrays for
    a batch."""
    if len(rows) == 1:
        return conn.execute(QUERIES["complete_job"], rows[0])
    return conn.execute(QUERIES["complete_jobs"], {key: [row[key] for row in rows] for key in _COMPLETION_COLUMNS})


def _completion_row(done: Completion, plan: Mapping[str, Any], version: int, ran_scheduled_at: datetime | None
                    ) -> dict[str, Any]:
    return {"job_id": done.job_id, "lock_token": done.lock_token, "execution_id": done.execution_id,
            "version": version, "state": plan["state"], "scheduled_at": plan["scheduled_at"],
            "attempt": plan["attempt"], "next_run_at": plan["next_run_at"], "ran_scheduled_at": ran_scheduled_at,
            "status": done.outcome.status, "error": done.outcome.error, "http_status": done.http_status,
            "response_excerpt": done.response_excerpt}


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


def _uuids_as_text(conn: psycopg.Connection) -> psycopg.Cursor:
    """A cursor reading uuid columns as text: the runner's started rows carry four ids each,
    used only as text, and a uuid.UUID object per id is a measurable share of a batch's cost."""
    cursor = conn.cursor()
    cursor.adapters.register_loader("uuid", TextLoader)
    return cursor


def _started(row: dict[str, Any]) -> StartedExecution:
    """A row of start_execution or claim_and_start: the job's columns and its execution's."""
    execution = {k: row.pop(k) for k in list(row) if k.startswith("execution_")}
    return StartedExecution(job=row, execution_id=str(execution["execution_id"]),
                            scheduled_at=execution["execution_scheduled_at"], attempt=execution["execution_attempt"],
                            trigger=execution["execution_trigger"], started_at=execution["execution_started_at"])


def _delete_completed(conn: psycopg.Connection, job_ids: list[str]) -> None:
    """In the transaction of their completion: delete the jobs it completed whose
    ``after_completion`` is ``delete``, with their executions."""
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
    """Postgres-backed store of jobs and executions."""

    def __init__(self, pool: ConnectionPool, rng: random.Random | None = None):
        self.pool = pool
        self.rng = rng or random.Random()

    # -- jobs ----------------------------------------------------------------------------------

    @_retry_on_dead_connection
    def now(self) -> datetime:
        """The database clock."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["now"]).fetchone()["now"]

    @_retry_on_dead_connection
    def create_job(self, owner: str, spec: Mapping[str, Any], *, job_id: str | None = None) -> dict[str, Any]:
        """Insert a job and compute its first occurrence. Raises ``NameTaken``."""
        with self.pool.connection() as conn:
            now = conn.execute(QUERIES["now"]).fetchone()["now"]
            draft = {**spec, "created_at": now}
            plan = lifecycle.plan_first(draft, now)
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
    def _modify(self, owner: str, job_id: str, change: Callable[[dict[str, Any], datetime], dict[str, Any]],
                expected_version: int | None = None) -> dict[str, Any]:
        """Hold the row, let ``change`` compute the new columns, write them (version + 1)."""
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

    def update_job(self, owner: str, job_id: str, build: Callable[[dict[str, Any]], Mapping[str, Any]],
                   expected_version: int | None = None) -> dict[str, Any]:
        """Replace the job's writable fields by ``build(current_row)``.

        ``build`` runs while the row is held, so it may merge with the current values (PATCH, a
        ``"***"`` secret kept). When a schedule field changed, the occurrences start afresh from
        now; otherwise the occurrence in hand is kept.
        """
        def change(row: dict[str, Any], now: datetime) -> dict[str, Any]:
            spec = {k: v for k, v in build(row).items() if k in SPEC_FIELDS}
            new = {**row, **spec}
            if any(row.get(k) != new.get(k) for k in SCHEDULE_FIELDS):
                state = row["state"] if row["state"] == "paused" else "active"
                return {**spec, **lifecycle.plan_first(new, now, state)}
            return spec
        return self._modify(owner, job_id, change, expected_version)

    def pause_job(self, owner: str, job_id: str) -> dict[str, Any]:
        """Stop firing the job's schedule (a manual run still runs)."""
        return self._modify(owner, job_id, lambda row, now: lifecycle.plan_pause(row))

    def resume_job(self, owner: str, job_id: str) -> dict[str, Any]:
        """Fire the schedule again, applying ``missed_runs`` to what was missed."""
        return self._modify(owner, job_id, lifecycle.plan_resume)

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
            lease = {k: row.pop(k) for k in ("lock_token", "locked_until", "due_at", "claimed_at", "reclaimed")}
            started = _started(row)
            claims.append(Claim(job_id=str(row["id"]), lock_token=str(lease["lock_token"]),
                                lease_kind=row["lease_kind"], scheduled_at=started.scheduled_at,
                                due_at=lease["due_at"], claimed_at=lease["claimed_at"],
                                locked_until=lease["locked_until"], reclaimed=lease["reclaimed"], started=started))
        return claims

    def complete_execution(self, job_id: str, lock_token: str, execution_id: str, outcome: lifecycle.Outcome,
                           *, http_status: int | None = None, response_excerpt: str | None = None,
                           started: StartedExecution | None = None, elapsed_seconds: float | None = None
                           ) -> bool:
        """Record how the execution ended and move the job on (retry, next occurrence or
        completed), releasing the lease. Fenced: with a token that no longer holds the job,
        nothing is written and False is returned.

        Given ``started`` (what ``start_execution`` returned) and the seconds elapsed since, the
        next state is planned from that row and written in one statement, valid only if the row
        is still that version; otherwise, or without them, the row is locked and read first.
        """
        completion = Completion(job_id, lock_token, execution_id, outcome, http_status=http_status,
                                response_excerpt=response_excerpt, started=started, elapsed_seconds=elapsed_seconds)
        return self.complete_executions([completion])[0]

    def complete_executions(self, completions: Sequence[Completion]) -> list[bool]:
        """``complete_execution`` for several executions: those planned from their started row
        are written in one statement (``complete_jobs``, or ``complete_job`` for one); the rest
        (and any whose job changed meanwhile) take the locking path one by one. Answers, in
        order, whether each was recorded (False: fenced)."""
        recorded = [False] * len(completions)
        fast = [i for i, done in enumerate(completions)
                if done.started is not None and done.elapsed_seconds is not None]
        if fast:
            rows = []
            for i in fast:
                done = completions[i]
                job = done.started.job
                now = done.started.started_at + timedelta(seconds=max(done.elapsed_seconds, 0.0))
                plan = lifecycle.plan_completion(job, done.outcome, now, self.rng, done.started.scheduled_at)
                rows.append(_completion_row(done, plan, job["version"], done.started.scheduled_at))
            written = self._write_completions(rows)
            for i in fast:
                recorded[i] = str(completions[i].job_id) in written
        for i, done in enumerate(completions):
            if not recorded[i]:
                recorded[i] = self._complete_locked(done)
        return recorded

    @_retry_on_dead_connection
    def _write_completions(self, rows: list[dict[str, Any]]) -> set[str]:
        """Write planned outcomes in one statement; the ids of the jobs written."""
        completed = [row["job_id"] for row in rows if row["state"] == "completed"]
        with self.pool.connection() as conn, (conn.transaction() if completed else contextlib.nullcontext()):
            written = {str(r["job_id"]) for r in _complete(_uuids_as_text(conn), rows).fetchall()}
            _delete_completed(conn, [job_id for job_id in completed if str(job_id) in written])
            return written

    @_retry_on_dead_connection
    def _complete_locked(self, done: Completion) -> bool:
        """The locking path: hold the row while our lease stands, plan from it, write."""
        with self.pool.connection() as conn, conn.transaction():
            job = conn.execute(QUERIES["lock_leased_job"], {
                "job_id": done.job_id, "lock_token": done.lock_token, "execution_id": done.execution_id}).fetchone()
            if job is None:
                return False
            now, ran = job.pop("db_now"), job.pop("ran_scheduled_at")
            plan = lifecycle.plan_completion(job, done.outcome, now, self.rng, ran)
            written = _complete(conn, [_completion_row(done, plan, job["version"], ran)]).fetchone() is not None
            if written and plan["state"] == "completed":
                _delete_completed(conn, [done.job_id])
            return written

    @_retry_on_dead_connection
    def due_backlog(self) -> tuple[int, float]:
        """(unleased due jobs, age in seconds of the oldest) for the metrics."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["due_backlog"]).fetchone()
        return int(row["due"]), float(row["oldest_due_age_seconds"])

    @_retry_on_dead_connection
    def next_due_in(self) -> float | None:
        """Seconds until a job may next be claimed (negative when one is due), None when none."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["next_due_in"]).fetchone()["seconds"]

    # -- executions ----------------------------------------------------------------------------

    @_retry_on_dead_connection
    def list_executions(self, owner: str, job_id: str, *, status: str | None = None, limit: int = 50,
                        before_seq: int | None = None) -> list[dict[str, Any]]:
        """A page of the job's executions, newest first. Raises ``NotFound``."""
        self.get_job(owner, job_id)
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["list_executions"], {
                "job_id": job_id, "status": status, "before_seq": before_seq, "limit": limit}).fetchall()

    @_retry_on_dead_connection
    def get_execution(self, execution_id: str) -> dict[str, Any] | None:
        """One execution by id (internal: no owner check)."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["get_execution"], {"execution_id": execution_id}).fetchone()

    @_retry_on_dead_connection
    def purge_executions(self, retention_days: int, batch: int = 500, max_batches: int = 20) -> int:
        """Delete finished executions older than the retention, in small batches; returns how many."""
        total = 0
        for _ in range(max_batches):
            with self.pool.connection() as conn:
                n = len(conn.execute(QUERIES["purge_executions"],
                                     {"retention_days": retention_days, "batch": batch}).fetchall())
            total += n
            if n < batch:
                break
        return total

    @_retry_on_dead_connection
    def list_owner_executions(self, owner: str, *, status: str | None = None, job_id: str | None = None,
                              since: datetime | None = None, limit: int = 50,
                              before: tuple[datetime, str] | None = None) -> list[dict[str, Any]]:
        """A page of the owner's executions across all their jobs, newest first by ``started_at``
        (then id), each with ``job_name``; ``before`` is the keyset cursor, the (started_at, id)
        of the previous page's last row. A ``job_id`` that is not a UUID matches nothing."""
        if job_id is not None and not _is_uuid(job_id):
            return []
        before_started_at, before_id = before if before is not None else (None, None)
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["list_owner_executions"], {
                "owner": owner, "status": status, "job_id": job_id, "since": since, "limit": limit,
                "before_started_at": before_started_at, "before_id": before_id}).fetchall()


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(str(value))
        return True
    except ValueError:
        return False
