"""The data access of the scheduler: every read and write of jobs and executions, on Postgres.

Each method is one transaction; the SQL lives in ``sql/queries.sql``. Times come from the
database (``now()``), never from the caller's clock. Methods taking an ``owner`` only ever see
that owner's jobs: another principal's job is indistinguishable from an absent one.

The store does not plan: a write that needs a plan (the next occurrence, a retry) takes it
computed (a ``domain.Plan``), and writes it only if the job is still what it was planned from
(its version, and the run state the plan read): ``insert_job``, ``update_job``,
``write_completions``, ``complete_leased``. Nothing is called back while a row is held.
``scheduler.service`` reads, plans with ``scheduler.planning.lifecycle``, and writes.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from scheduler.core.domain import (
    Change,
    Claim,
    Completion,
    Job,
    JobState,
    LeasedJob,
    Pause,
    Plan,
    RunOverrides,
    StartedExecution,
    Trigger,
)
from scheduler.core.errors import NameTaken, NotFound, VersionMismatch
from scheduler.core.records import SkipTrim
from scheduler.ports import ChainCheck
from scheduler.sql import QUERIES
from scheduler.store.alert_rules import AlertRuleTables
from scheduler.store.alerts import AlertRecords
from scheduler.store.calendars import CalendarTables, held_calendars
from scheduler.store.changes import ChangeLog, hold_chains, request_chained_runs, write_change
from scheduler.store.completions import completion_batch, completion_row
from scheduler.store.history import JOB_RECENT_DAYS, OWNER_RECENT_DAYS, ExecutionHistory  # noqa: F401 (re-exported)
from scheduler.store.leases import LeaseLooks
from scheduler.store.limits import TargetSlots
from scheduler.store.rows import (
    is_uuid,
    plan_params,
    retry_on_dead_connection,
    spec_params,
    started_rows_cursor,
    transaction_if,
    unavailable,
)
from scheduler.store.skips import (
    RunRecords,
    pause_params,
    record_plan_extras,
    record_shifts,
    skips_param,
    trim_skips,
)
from scheduler.store.started import LEASE_KINDS, STARTED_COLUMNS, claims_of, read_started

__all__ = ["STARTED_COLUMNS", "Store"]


@functools.lru_cache(maxsize=256)
def _claim_and_start_sql(limit: int) -> str:
    """``claim_and_start`` with its limit written in: a parameter there would have Postgres plan
    each execution afresh (its generic plan assumes a tenth of the table is claimed), a third of
    a millisecond a batch; a constant lets the prepared statement keep its plan. A runner asks
    for few distinct limits (its batch size, or its idle executors rounded by
    ``ClaimMode.sized``), each text made once: the same string object keeps its hash for psycopg's caches of the query."""
    return QUERIES["claim_and_start"].replace("%(limit)s", str(int(limit)))


def _delete_completed(conn: psycopg.Connection, job_ids: Sequence[str]) -> None:
    """In the transaction of their completion: delete the jobs it completed whose
    ``after_completion`` is ``delete``, with their executions (the query fences it)."""
    if job_ids:
        conn.execute(QUERIES["delete_completed_jobs"], {"job_ids": [str(job_id) for job_id in job_ids]})


@contextlib.contextmanager
def _held(
    conn: psycopg.Connection,
    owner: str,
    calendars: Sequence[str],
    change: Change | None,
    chains: ChainCheck | None = None,
    more: bool = False,
) -> Iterator[None]:
    """The transaction of a write: with its chains checked, the owner's chains held
    (``hold_chains``), the calendars it names held, and its change-log entry or ``more`` writes
    (none opened for a write alone)."""
    with contextlib.ExitStack() as stack:
        if change is not None or chains is not None or more:
            stack.enter_context(conn.transaction())
        hold_chains(conn, owner, chains)
        stack.enter_context(held_calendars(conn, owner, calendars))
        yield


class Store(
    ExecutionHistory, CalendarTables, AlertRecords, AlertRuleTables, TargetSlots, RunRecords, ChangeLog, LeaseLooks
):
    """Postgres-backed store of jobs and executions (every port of ``scheduler.ports``)."""

    def __init__(self, pool: ConnectionPool):
        self.pool = pool

    # -- jobs ----------------------------------------------------------------------------------

    @retry_on_dead_connection
    def now(self) -> datetime:
        """The database clock."""
        with self.pool.connection() as conn:
            return conn.execute(QUERIES["now"]).fetchone()["now"]

    def a_stored_secret(self) -> str | None:
        """One secret token that a job's target holds (None when no job has a secret)."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["a_stored_secret"]).fetchone()
        return None if row is None else row["token"]

    @retry_on_dead_connection
    def insert_job(
        self,
        owner: str,
        spec: Mapping[str, Any],
        plan: Plan,
        *,
        created_at: datetime,
        job_id: str | None = None,
        change: Change | None = None,
        chains: ChainCheck | None = None,
    ) -> Job:
        """Insert a job with its first plan (made for ``created_at``, the database's now it was
        planned at), and its ``change`` entry in the same transaction, ``chains`` checked in it
        first (the owner's chains held). Raises ``NameTaken``, ``ChainError``."""
        params = {
            **spec_params(spec),
            **plan_params(plan),
            "id": job_id or str(uuid.uuid4()),
            "owner": owner,
            "created_at": created_at,
            "skips": skips_param(plan.skips),
        }
        with self.pool.connection() as conn, _held(conn, owner, params["exclude_calendars"], change, chains):
            row = conn.execute(QUERIES["insert_job"], params).fetchone()
            if row is None:
                raise NameTaken(spec["name"])
            write_change(conn, owner, params["id"], row["version"], change)
        return Job.from_row(row)

    @retry_on_dead_connection
    def get_job(self, owner: str, job_id: str) -> Job:
        """One job of this owner. Raises ``NotFound``."""
        if not is_uuid(job_id):
            raise NotFound(job_id)
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["get_job"], {"id": job_id, "owner": owner}).fetchone()
        if row is None:
            raise NotFound(job_id)
        return Job.from_row(row)

    @retry_on_dead_connection
    def list_jobs(
        self,
        owner: str,
        *,
        state: JobState | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        limit: int = 50,
        after_name: str | None = None,
    ) -> list[Job]:
        """A page of this owner's jobs in name order, after ``after_name`` (the keyset cursor)."""
        params = {
            "owner": owner,
            "state": state,
            "tag": tag,
            "name_prefix": name_prefix,
            "after_name": after_name,
            "limit": limit,
        }
        with self.pool.connection() as conn:
            return [Job.from_row(row) for row in conn.execute(QUERIES["list_jobs"], params, prepare=False).fetchall()]

    @retry_on_dead_connection
    def update_job(
        self,
        owner: str,
        job_id: str,
        spec: Mapping[str, Any],
        plan: Plan | None,
        *,
        version: int,
        planned_from: Plan | None = None,
        pause: Pause | None = None,
        pausing: bool = False,
        change: Change | None = None,
        chains: ChainCheck | None = None,
        trims: Sequence[SkipTrim] = (),
    ) -> Job | None:
        """Write the job's spec, its pause's record (``pause``; ``pausing`` for a pause) and,
        when given, its plan with its skipped occurrences as skipped rows (version + 1), if the
        job is still ``version`` and, with a plan, still has the run state ``planned_from`` it
        was planned from, with its ``change`` entry and what is left of the skipped rows its
        ``trims`` name (``trim_skips``) and the chained runs of ``plan.chain`` (the occurrence
        whose pending retry the edit drops) in the same transaction (``chains`` checked
        in it first, the owner's chains held: ``ChainError``). None when it
        changed meanwhile (read it again, plan again); ``NameTaken`` when the spec's name is
        another job's."""
        if not is_uuid(job_id):
            raise NotFound(job_id)
        if plan is not None and planned_from is None:
            raise ValueError("a plan is written only with the run state it was planned from")
        was = planned_from or Plan(JobState.ACTIVE, None, 0, None)
        params = {
            **spec_params(spec),
            **plan_params(plan or was),
            "id": job_id,
            "owner": owner,
            "version": version,
            "reschedule": plan is not None,
            "was_state": was.state,
            "was_scheduled_at": was.scheduled_at,
            "was_attempt": was.attempt,
            "was_next_run_at": was.next_run_at,
            **pause_params(pausing, pause),
            "skips": skips_param(plan.skips if plan is not None else ()),
        }
        try:
            calendars = params["exclude_calendars"]
            chained = plan.chain if plan is not None else None
            more = bool(trims) or chained is not None
            with self.pool.connection() as conn, _held(conn, owner, calendars, change, chains, more):
                row = conn.execute(QUERIES["update_job"], params).fetchone()
                if row is not None:
                    write_change(conn, owner, job_id, row["version"], change)
                    trim_skips(conn, job_id, trims)  # fenced: written only with the job's version
                    if chained is not None:  # a dropped retry's occurrence ended: its chained runs
                        request_chained_runs(conn, [chained])
                    if row["running_execution_id"] is not None:  # edited during a run: its lease noted
                        conn.execute(QUERIES["watch_lease"], {"id": job_id})
        except psycopg.errors.UniqueViolation:
            raise NameTaken("name") from None
        return None if row is None else Job.from_row(row)

    @retry_on_dead_connection
    def delete_job(
        self, owner: str, job_id: str, *, change: Change | None = None, expected_version: int | None = None
    ) -> None:
        """Delete the job and its executions (its change log stays, with ``change``). Raises
        ``NotFound``, and ``VersionMismatch`` (nothing deleted) when ``expected_version`` is
        given and the job is at another."""
        if not is_uuid(job_id):
            raise NotFound(job_id)
        params = {"id": job_id, "owner": owner}
        with self.pool.connection() as conn, conn.transaction():
            held = conn.execute(QUERIES["get_job_for_update"], params).fetchone()
            if held is None:
                raise NotFound(job_id)
            if expected_version is not None and held["version"] != expected_version:
                raise VersionMismatch(held["version"])
            conn.execute(QUERIES["delete_job"], params)
            write_change(conn, owner, job_id, held["version"], change)

    @retry_on_dead_connection
    def request_run(
        self, owner: str, job_id: str, overrides: RunOverrides | None = None, *, change: Change | None = None
    ) -> Job:
        """Ask for a run now, outside the schedule, with ``overrides`` for that run; the next
        claim takes it (with ``change``)."""
        if not is_uuid(job_id):
            raise NotFound(job_id)
        value = None if overrides is None else Jsonb({"deliver": overrides.deliver, "shown": overrides.shown})
        with self.pool.connection() as conn, transaction_if(conn, change is not None):
            params = {"id": job_id, "owner": owner, "overrides": value}
            row = conn.execute(QUERIES["request_manual_run"], params).fetchone()
            if row is None:
                raise NotFound(job_id)
            write_change(conn, owner, job_id, row["version"], change)
        return Job.from_row(row)

    # -- the runner ----------------------------------------------------------------------------

    @retry_on_dead_connection
    def claim_due(self, limit: int, lease_seconds: float) -> list[Claim]:
        """Lease up to ``limit`` due jobs (one statement; see ``claim_due`` in queries.sql), and
        mark lost, in the same transaction, the executions of those whose lease expired while
        they ran (``Claim.reclaimed``)."""
        with self.pool.connection() as conn, conn.transaction():
            rows = conn.execute(QUERIES["claim_due"], {"limit": limit, "lease_seconds": lease_seconds}).fetchall()
            orphans = [r for r in rows if r["orphan_execution_id"] is not None]
            if orphans:
                conn.execute(
                    QUERIES["mark_executions_lost"],
                    {
                        "job_id": [r["job_id"] for r in orphans],
                        "execution_id": [r["orphan_execution_id"] for r in orphans],
                        "started_at": [r["orphan_started_at"] for r in orphans],
                    },
                )
        return [
            Claim(
                job_id=str(r["job_id"]),
                lock_token=str(r["lock_token"]),
                lease_kind=LEASE_KINDS[r["lease_kind"]],
                scheduled_at=r["scheduled_at"],
                due_at=r["due_at"],
                claimed_at=r["claimed_at"],
                locked_until=r["locked_until"],
                reclaimed=r["reclaimed"],
                owner=r["owner"],
                lost_execution_id=str(r["orphan_execution_id"]) if r["orphan_execution_id"] is not None else None,
            )
            for r in rows
        ]

    def start_execution(
        self, job_id: str, lock_token: str, lease_margin_seconds: float = 30
    ) -> StartedExecution | None:
        """Confirm the claim, extend its lease over the target's timeout plus the margin, and
        record a running execution; None when the lease was lost (expired and taken over, or
        already started by a duplicate invoke)."""
        execution_id = str(uuid.uuid4())
        params = {"job_id": job_id, "lock_token": lock_token, "execution_id": execution_id}
        rows, sent_at = self._start(
            QUERIES["start_execution"],
            {**params, "lease_margin_seconds": lease_margin_seconds},
            [lock_token],
            [execution_id],
        )
        return read_started(rows[0], sent_at, lease_margin_seconds) if rows else None

    def start_executions(
        self, claims: Sequence[tuple[str, str]], lease_margin_seconds: float = 30
    ) -> list[StartedExecution]:
        """``start_execution`` for a group of claims (``(job_id, lock_token)`` pairs), in one
        statement: the executions started, in no particular order; a claim whose lease was lost
        has none."""
        if not claims:
            return []
        # In id order, so two executors given the same group (Lambda may deliver an event twice)
        # lock its rows in the same order: one waits for the other rather than deadlocking.
        claims = sorted(claims)
        tokens, execution_ids = [lock_token for _, lock_token in claims], [str(uuid.uuid4()) for _ in claims]
        params = {"job_id": [job_id for job_id, _ in claims], "lock_token": tokens, "execution_id": execution_ids}
        rows, sent_at = self._start(
            QUERIES["start_executions"], {**params, "lease_margin_seconds": lease_margin_seconds}, tokens, execution_ids
        )
        return [read_started(row, sent_at, lease_margin_seconds) for row in rows]

    def claim_and_start(self, limit: int, lease_margin_seconds: float = 30) -> list[Claim]:
        """Lease up to ``limit`` due jobs and start them, in one statement: for a runner that
        delivers each claim at once (each lease covers the target's timeout plus the margin).
        Every claim carries its ``started`` execution. The batch's one lease token is chosen
        here, so that a batch whose answer was lost is read back by it."""
        token = str(uuid.uuid4())
        params = {"lock_token": token, "lease_margin_seconds": lease_margin_seconds}
        rows, sent_at = self._start(_claim_and_start_sql(limit), params, [token], None)
        return claims_of(rows, sent_at, lease_margin_seconds)

    def _start(
        self, query: str, params: dict[str, Any], tokens: list[str], execution_ids: list[str] | None
    ) -> tuple[list[tuple[Any, ...]], float]:
        """Run a statement that starts executions under lease tokens: its started rows, and the
        ``time.monotonic()`` it was sent at (their leases run from no earlier). When its
        connection dies, the executions it may have started (committed, the answer lost) are read
        back by their tokens (``started_by_lease``) and delivered now, where they would have
        waited out their leases to be marked lost, an attempt counted that was never made. None
        found: it never ran, or rolled back, and runs once more on a fresh connection."""
        sent_at = time.monotonic()
        try:
            return self._started_rows(query, params), sent_at
        except PoolTimeout as exc:  # no connection: nothing was sent
            raise unavailable(exc) from exc
        except psycopg.OperationalError:
            pass
        # Every connection of the pool may be dead (the server restarted, the network dropped):
        # each attempt that fails takes one away, so one more than the pool holds reaches a new
        # one. A wait for a connection that ends empty (the server is down) ends the attempts.
        read_back = {"lock_token": tokens, "execution_id": execution_ids}
        for attempt in range(self.pool.max_size + 1):
            try:
                found = self._started_rows(QUERIES["started_by_lease"], read_back)
                if found:
                    return found, sent_at
                sent_at = time.monotonic()
                return self._started_rows(query, params), sent_at
            except psycopg.OperationalError as exc:
                if attempt == self.pool.max_size or isinstance(exc, PoolTimeout):
                    raise unavailable(exc) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _started_rows(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        with self.pool.connection() as conn:
            return started_rows_cursor(conn).execute(query, params).fetchall()

    @retry_on_dead_connection
    def write_completions(self, planned: Sequence[tuple[Completion, Plan]]) -> set[str]:
        """Write outcomes planned from their started rows (``Completion.started``) in one
        statement (``complete_jobs``, or ``complete_job`` for one); the ids of the jobs written.
        A job whose lease was lost, or whose row changed since it was started, is not written.
        A plan marked ``"delete": True`` (the service's decision: ``after_completion = 'delete'``
        and the job completed) deletes its job with its executions in the same transaction, once
        written; without any, the statement runs alone (no transaction to open)."""
        if len(planned) == 1:
            [(done, plan)] = planned
            started = done.started
            assert started is not None, "planned from their started rows"
            query = QUERIES["complete_job"]
            params = completion_row(done, plan, started.job.version, started.scheduled_at, started.started_at)
        else:
            query, params = QUERIES["complete_jobs"], completion_batch(planned)
        # What the statement alone does not write (rare): one pass to find out.
        extra = [
            (done, plan)
            for done, plan in planned
            if plan.delete
            or plan.skips
            or plan.backfill_retry
            or plan.parked
            or plan.chain is not None
            or plan.shift is not None
        ]
        doomed = [str(done.job_id) for done, plan in extra if plan.delete]
        skipping = any(plan.skips or plan.backfill_retry or plan.parked for _, plan in extra)
        chained = [(str(done.job_id), plan.chain) for done, plan in extra if plan.chain is not None]
        shifted = [(done, plan.shift, done.started.started_at) for done, plan in extra if plan.shift and done.started]
        transaction = doomed or skipping or chained or shifted
        with self.pool.connection() as conn, transaction_if(conn, bool(transaction)):
            # The ids of the outcomes NOT written come back (complete_outcomes), as text, as the
            # callers hold them: nearly always none.
            fenced = {job_id for (job_id,) in conn.cursor(row_factory=tuple_row).execute(query, params)}
            written = {str(done.job_id) for done, _ in planned}
            if fenced:
                written -= fenced
            if skipping:  # skipped rows, failed backfill deliveries' retries, pauses by the runner
                record_plan_extras(
                    conn, [(str(done.job_id), plan) for done, plan in planned if str(done.job_id) in written]
                )
            if chained:
                request_chained_runs(conn, [chain for job_id, chain in chained if job_id in written])
            if shifted:
                record_shifts(conn, [shift for shift in shifted if str(shift[0].job_id) in written])
            _delete_completed(conn, [job_id for job_id in doomed if job_id in written])
            return written

    @retry_on_dead_connection
    def leased_job(self, done: Completion) -> LeasedJob | None:
        """The job of a finished execution as it is now, if the execution's lease still stands
        (None: fenced, another runner holds the job), to plan the completion from."""
        params = {"job_id": done.job_id, "lock_token": done.lock_token, "execution_id": done.execution_id}
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["leased_job"], params).fetchone()
        if row is None:
            return None
        trigger = Trigger(row["ran_trigger"]) if row["ran_trigger"] else None
        ran = (row["ran_scheduled_at"], row["ran_started_at"], trigger, row["ran_attempt"] or 1)
        return LeasedJob(Job.from_row(row), row["db_now"], *ran)

    @retry_on_dead_connection
    def complete_leased(self, done: Completion, plan: Plan, leased: LeasedJob) -> bool:
        """Record the outcome with the plan made from ``leased`` (and delete the job when the
        plan says ``delete``, as ``write_completions``): written only while the lease stands and
        the job is still the version read. False otherwise (read again, or fenced)."""
        params = completion_row(done, plan, leased.job.version, leased.ran_scheduled_at, leased.ran_started_at)
        with self.pool.connection() as conn, conn.transaction():
            written = conn.execute(QUERIES["complete_job"], params).fetchone() is None  # the unwritten id
            if written and (plan.skips or plan.backfill_retry or plan.parked):
                record_plan_extras(conn, [(str(done.job_id), plan)])
            if written and plan.chain is not None:
                request_chained_runs(conn, [plan.chain])
            if written and plan.shift is not None:
                record_shifts(conn, [(done, plan.shift, leased.ran_started_at)])
            if written and plan.delete:
                _delete_completed(conn, [done.job_id])
            return written
