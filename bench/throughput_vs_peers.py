"""Claim + start + complete throughput of the store, side by side with two peers on the same Postgres.

    .venv/bin/python bench/throughput_vs_peers.py [--jobs 20000] [--per-job-jobs 4000] [--workers 1 2 4] [--rounds 5] [--quick]

For each worker count, in one run and in rotating order (the machine is noisy, so only the
ratios mean much):

- **store**: N due jobs drained by W worker *processes* (multiprocessing), each doing what local
  mode's runner does with the store, less the delivery: ``Store.claim_and_start(batch)`` (claim
  and start in one statement) in the fan-out loop, while a recorder thread records the batch
  before with ``complete_executions`` (one statement), each on its own connection, at most one
  batch waiting for the recorder.
- **store per job**: as the deployment does it: ``claim_due(batch)`` in the fan-out, then per
  claim, as each executor Lambda does, ``start_execution`` and ``complete_execution`` (two
  statements per job). Shown for scale.
- **pgbench**: the store's statements (``claim_and_start`` and ``complete_jobs`` of
  ``queries.sql``, rewritten for pgbench variables) over the same N jobs with ``-c W -j W -M
  prepared``: one script run claims and starts a batch, aggregated into arrays, then completes
  it, as the store does. No Python, no client-side planning: the database's own limit for this
  work on this machine.
- **pgqueuer**: pgqueuer's schema in a separate database, N no-op jobs enqueued with its API,
  drained by W processes each running a ``QueueManager`` in drain mode with one no-op
  entrypoint (asyncpg driver when installed, else psycopg), with the same batch size.

Targets: store >= 1.0x pgqueuer; store >= 0.5x pgbench with one process, >= 0.9x with several. Each worker's CPU time per job (the
client's, robust to a noisy machine) is reported beside the rates. A profile of one store worker
(claim and record in turn: round trips and client-side latency per call, a bare round trip and a
bare commit) explains the gap.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing as mp
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from common import (
    ServerCpu,
    checkpoint,
    find_pgbench,
    fresh_database,
    libpq_env,
    machine_summary,
    postgres_server,
    progress,
    server_version,
    split_with,
    strip_sql_comments,
    substitute,
    write_json,
)
from scheduler import service
from scheduler.planning.lifecycle import Outcome
from scheduler.sql import QUERIES
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from tests.support import insert_due_jobs, succeeded

LEASE_SECONDS = 120
SYSTEMS = ("store", "store_per_job", "pgbench", "pgqueuer")
RUN_TIMEOUT = 240.0  # seconds: any one measured run that takes longer is abandoned


# -- the table of due jobs (store and pgbench) ---------------------------------------------------


def reset_jobs(url: str, jobs: int) -> None:
    """Exactly ``jobs`` due jobs and no executions, vacuumed and analysed, then a checkpoint."""
    pool = make_pool(url, min_size=1, max_size=1)
    try:
        with pool.connection() as conn:
            conn.execute("TRUNCATE job_specs, job_runs, executions CASCADE")  # and what references a job (backfills)
        insert_due_jobs(pool, jobs)
    finally:
        pool.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE job_specs, job_runs")
        conn.execute("VACUUM ANALYZE executions")
    checkpoint(url)


def db_transactions(url: str) -> int:
    """Transactions the server counted in this database so far (pg_stat_database): the
    difference around a run, per job, compares the systems' commit rates (each ended backend
    has flushed its counts; the reading connection's own transaction is counted later)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return int(
            conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()[0]
        )


def transactions_per_job(url: str, before: int, jobs: int) -> float:
    time.sleep(0.3)  # let the ended backends flush their statistics
    return (db_transactions(url) - before - 1) / jobs


def server_cpu_ms_per_job(cpu: ServerCpu, before: float | None, jobs: int) -> float | None:
    """Postgres CPU per job over a run (None when the server's processes cannot be read)."""
    time.sleep(0.3)  # let the backends of the disconnected workers exit and be reaped
    after = cpu.seconds()
    if before is None or after is None:
        return None
    return (after - before) * 1000 / jobs


def completed_jobs(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM jobs WHERE run_count > 0 AND lock_token IS NULL").fetchone()[0]


# -- store: worker processes ---------------------------------------------------------------------


def record_batch(store: Store, claims: list, began: float) -> int:
    """Record a claimed batch's outcomes as local mode's recorder does (``Executor.record``: a
    ``Completion`` per outcome, then ``complete_executions``, one statement). Returns the jobs
    recorded."""
    completions = [succeeded(claim, elapsed_seconds=time.monotonic() - began) for claim in claims]
    return sum(service.complete_executions(store, completions))


def drain_batched(store: Store, batch: int, deadline: float = float("inf"), on_batch=None) -> int:
    """What local mode's runner does with the store, less the delivery: the fan-out loop claims
    and starts a batch in one statement (``claim_and_start``) while the recorder thread records
    the outcomes of the batch before in one statement (``complete_executions``), each on a
    connection of its own (``InProcessDispatch`` and its ``TimedBatchBuffer``). At most one
    batch waits for the recorder: the claims never run further ahead. ``store``'s pool needs
    two connections. Returns the jobs completed."""
    handoff: queue.Queue = queue.Queue(maxsize=1)
    done = 0
    failed: list[BaseException] = []

    def recorder() -> None:
        nonlocal done
        while (item := handoff.get()) is not None:
            if failed:
                continue  # drain the handoff so that the claimer never blocks
            try:
                claims, began = item
                done += record_batch(store, claims, began)
                if on_batch:
                    on_batch(len(claims))
            except BaseException as exc:  # reported by the claimer, after the join
                failed.append(exc)

    thread = threading.Thread(target=recorder, name="recorder", daemon=True)
    thread.start()
    try:
        while not failed and time.monotonic() < deadline and (claims := store.claim_and_start(batch, 30)):
            handoff.put((claims, time.monotonic()))
    finally:
        handoff.put(None)
        thread.join()
    if failed:
        raise failed[0]
    return done


def drain_per_job(store: Store, batch: int, deadline: float = float("inf"), on_batch=None) -> int:
    """What an executor Lambda does, one claim at a time: ``start_execution`` then
    ``complete_execution``, each its own statement. Returns the jobs completed."""
    done = 0
    while time.monotonic() < deadline and (claims := store.claim_due(batch, LEASE_SECONDS)):
        for claim in claims:
            began_job = time.monotonic()
            started = store.start_execution(claim.job_id, claim.lock_token, 30)
            if started is not None:  # as the executor does: completion planned from the started row
                done += service.complete_execution(
                    store,
                    claim.job_id,
                    claim.lock_token,
                    started.execution_id,
                    Outcome("succeeded", http_status=200),
                    started=started,
                    elapsed_seconds=time.monotonic() - began_job,
                )
        if on_batch:
            on_batch(len(claims))
    return done


def _store_worker(url: str, batch: int, per_job: bool, barrier, counter, results) -> None:
    connections = 1 if per_job else 2  # the batched runner's claimer and recorder
    pool = make_pool(url, min_size=connections, max_size=connections)
    store = Store(pool)
    store.now()  # connected and warm before the clock starts
    if connections == 2:
        with pool.connection(), pool.connection():
            pass
    barrier.wait(timeout=60)
    began, cpu = time.monotonic(), time.process_time()

    def count(n: int) -> None:
        with counter.get_lock():
            counter.value += n

    drain = drain_per_job if per_job else drain_batched
    done = drain(store, batch, began + RUN_TIMEOUT, count)
    ended, cpu = time.monotonic(), time.process_time() - cpu
    pool.close()
    results.put((began, ended, done, cpu))


def spawn_workers(target, args_for, workers: int, total: int, desc: str) -> tuple[float, int, float]:
    """Start ``workers`` processes of ``target``; all start together (a barrier); returns
    (elapsed from the first start to the last end, jobs done, the workers' CPU seconds)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    counter = ctx.Value("l", 0)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(*args_for(i), barrier, counter, results), daemon=True) for i in range(workers)
    ]
    for p in procs:
        p.start()
    got = []
    bar = progress(total, desc)
    deadline = time.monotonic() + RUN_TIMEOUT + 60
    try:
        while len(got) < workers and time.monotonic() < deadline:
            try:
                got.append(results.get(timeout=0.5))
            except queue.Empty:
                pass
            bar.update(counter.value - bar.n)
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError(f"a {desc} worker failed: exit codes {[p.exitcode for p in procs]}")
    finally:
        bar.close()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    if len(got) < workers:
        raise RuntimeError(f"{desc}: {len(got)} of {workers} workers reported within the time limit")
    began = min(r[0] for r in got)
    ended = max(r[1] for r in got)
    return ended - began, sum(r[2] for r in got), sum(r[3] for r in got)


def run_store(url: str, jobs: int, workers: int, batch: int, per_job: bool = False) -> dict[str, Any]:
    reset_jobs(url, jobs)
    before = db_transactions(url)
    cpu = ServerCpu(url)
    cpu0 = cpu.seconds()
    name = "store per job" if per_job else "store"
    elapsed, done, client_cpu = spawn_workers(
        _store_worker, lambda i: (url, batch, per_job), workers, jobs, f"{name} x{workers}"
    )
    cpu_ms = server_cpu_ms_per_job(cpu, cpu0, jobs)
    xacts = transactions_per_job(url, before, jobs)
    completed = completed_jobs(url)
    if completed != jobs:
        raise RuntimeError(f"{name}: {completed} of {jobs} jobs completed ({done} reported)")
    return {
        "jobs": jobs,
        "seconds": elapsed,
        "jobs_per_s": jobs / elapsed,
        "transactions_per_job": xacts,
        "server_cpu_ms_per_job": cpu_ms,
        "client_cpu_us_per_job": client_cpu * 1e6 / jobs,
    }


# -- pgbench: the same SQL -----------------------------------------------------------------------


def pgbench_script(batch: int) -> str:
    """One script run: what the store's batched path does, exactly the statements of
    queries.sql: claim and start up to ``batch`` jobs (``claim_and_start``, its rows aggregated
    into the completion's outcomes for ``\\gset``), then record them all (``complete_jobs``)."""
    ctes, main = split_with(strip_sql_comments(QUERIES["claim_and_start"]))
    # The claimed rows gathered into complete_jobs' outcomes: each job's completion plan after a
    # success, a yearly job's as scheduler.planning.lifecycle computes it, built here by the server (in
    # the store, the client encodes it).
    next_year = "(date_trunc('year', now()) + interval '1 year')"
    claim = (
        f"WITH {ctes + ', ' if ctes else ''}__claimed AS ({main})\n"
        "SELECT count(*) AS n,\n"
        f"       COALESCE(json_agg(json_build_array(id, lock_token, execution_id, 1, 'active', {next_year}, 0,\n"
        f"                                          {next_year}, NULL, 'succeeded', NULL, 200, NULL,\n"
        "                                          execution_started_at)), '[]')::text AS outcomes,\n"
        "       COALESCE(min(execution_started_at), now()) AS first_start,\n"
        "       COALESCE(max(execution_started_at), now()) AS last_start\n"
        "FROM __claimed"
    )
    # The batch's one lease token (the store's, a parameter): one uuid a statement, as the store's.
    claim = substitute(
        claim, {"limit": str(batch), "lease_margin_seconds": "30", "lock_token": "(SELECT gen_random_uuid())"}
    )
    complete = substitute(
        strip_sql_comments(QUERIES["complete_jobs"]),
        {"outcomes": ":outcomes", "earliest_started_at": ":first_start", "latest_started_at": ":last_start"},
    )
    return (
        "\n".join(
            [
                "-- generated by bench/throughput_vs_peers.py from functions/scheduler/sql/queries.sql",
                claim + " \\gset",
                complete + ";",
            ]
        )
        + "\n"
    )


def run_pgbench(url: str, jobs: int, clients: int, batch: int, script: Path) -> dict[str, Any]:
    reset_jobs(url, jobs)
    per_client = math.ceil(jobs / (batch * clients)) + 1  # the last runs find the table drained
    cmd = [
        find_pgbench(),
        "-n",
        "-M",
        "prepared",
        "-f",
        str(script),
        "-c",
        str(clients),
        "-j",
        str(clients),
        "-t",
        str(per_client),
        "-P",
        "1",
    ]
    bar = progress(jobs, f"pgbench x{clients}")
    done_scripts = 0

    def follow(stream) -> list[str]:
        nonlocal done_scripts
        kept = []
        for line in stream:
            kept.append(line)
            m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps", line)
            if m:
                done_scripts += float(m.group(2))  # scripts in that 1-second interval
                bar.update(min(jobs, int(done_scripts * batch)) - bar.n)
        return kept

    before = db_transactions(url)
    cpu = ServerCpu(url)
    cpu0 = cpu.seconds()
    proc = subprocess.Popen(cmd, env=libpq_env(url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(follow(proc.stderr)), daemon=True)
    reader.start()
    killer = threading.Timer(RUN_TIMEOUT, proc.kill)  # bounded in time, like every run
    killer.daemon = True
    killer.start()
    try:
        out = proc.stdout.read()  # the report, once pgbench ends (stderr is the reader's)
        proc.wait()
    finally:
        killer.cancel()
        reader.join(timeout=5)
        bar.close()
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed ({proc.returncode}):\n{out}\n{''.join(err_lines)[-2000:]}")
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if not m:
        raise RuntimeError(f"no tps in pgbench's output:\n{out}")
    tps = float(m.group(1))
    elapsed = clients * per_client / tps
    cpu_ms = server_cpu_ms_per_job(cpu, cpu0, jobs)
    xacts = transactions_per_job(url, before, jobs)
    completed = completed_jobs(url)
    if completed != jobs:
        raise RuntimeError(f"pgbench: {completed} of {jobs} jobs completed")
    return {
        "jobs": jobs,
        "seconds": elapsed,
        "jobs_per_s": jobs / elapsed,
        "scripts_per_client": per_client,
        "transactions_per_job": xacts,
        "server_cpu_ms_per_job": cpu_ms,
    }


# -- pgqueuer --------------------------------------------------------------------------------------


def pgq_driver_name(preferred: str) -> str:
    if preferred == "auto":
        try:
            import asyncpg  # noqa: F401

            return "asyncpg"
        except ImportError:
            return "psycopg"
    return preferred


@contextmanager
def pgqueuer_database(server_url: str, driver: str):
    """A database holding pgqueuer's schema only (installed with its own ``Queries.install``)."""
    name = f"pgq_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(server_url, dbname=name)
    try:
        asyncio.run(_pgq_call(url, driver, "install"))
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _pgq_connect(url: str, driver: str):
    """(driver object, closer) for one connection."""
    if driver == "asyncpg":
        import asyncpg
        from pgqueuer.db import AsyncpgDriver

        kwargs = _asyncpg_kwargs(url)
        conn = await asyncpg.connect(**kwargs)
        return AsyncpgDriver(conn), conn.close
    from pgqueuer.db import PsycopgDriver

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    return PsycopgDriver(conn), conn.close


def _asyncpg_kwargs(url: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(url)
    kwargs: dict[str, Any] = {"database": p.get("dbname"), "user": p.get("user"), "password": p.get("password")}
    if p.get("host"):
        kwargs["host"] = p["host"]
    if p.get("port"):
        kwargs["port"] = int(p["port"])
    return {k: v for k, v in kwargs.items() if v is not None}


async def _pgq_call(url: str, driver: str, what: str, jobs: int = 0) -> int:
    from pgqueuer.queries import Queries

    drv, close = await _pgq_connect(url, driver)
    try:
        queries = Queries(drv)
        if what == "install":
            await queries.install()
        elif what == "enqueue":
            await queries.clear_queue()
            await queries.clear_queue_log()
            await queries.clear_statistics_log()
            chunk = 5000
            for start in range(0, jobs, chunk):
                n = min(chunk, jobs - start)
                await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
        elif what == "remaining":
            return int((await drv.fetch("SELECT count(*) AS n FROM pgqueuer"))[0]["n"])
    finally:
        await close()
    return 0


def _pgq_worker(url: str, driver: str, batch: int, barrier, counter, results) -> None:
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    done = 0

    async def main() -> tuple[float, float, float]:
        nonlocal done
        drv, close = await _pgq_connect(url, driver)
        qm = QueueManager(Queries(drv))

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            nonlocal done
            done += 1
            if done % 50 == 0:
                with counter.get_lock():
                    counter.value += 50

        await asyncio.get_running_loop().run_in_executor(None, lambda: barrier.wait(timeout=60))
        began, cpu = time.monotonic(), time.process_time()
        try:
            await asyncio.wait_for(
                qm.run(
                    mode=QueueExecutionMode.drain,
                    batch_size=batch,
                    log_aggregation_interval=__import__("datetime").timedelta(0),
                ),
                timeout=RUN_TIMEOUT,
            )
        finally:
            ended, cpu = time.monotonic(), time.process_time() - cpu
            await close()
        return began, ended, cpu

    began, ended, cpu = asyncio.run(main())
    results.put((began, ended, done, cpu))


def run_pgqueuer(url: str, jobs: int, workers: int, batch: int, driver: str) -> dict[str, Any]:
    asyncio.run(_pgq_call(url, driver, "enqueue", jobs))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    checkpoint(url)
    before = db_transactions(url)
    cpu = ServerCpu(url)
    cpu0 = cpu.seconds()
    elapsed, done, client_cpu = spawn_workers(
        _pgq_worker, lambda i: (url, driver, batch), workers, jobs, f"pgqueuer x{workers}"
    )
    cpu_ms = server_cpu_ms_per_job(cpu, cpu0, jobs)
    xacts = transactions_per_job(url, before, jobs)
    remaining = asyncio.run(_pgq_call(url, driver, "remaining"))
    if remaining or done < jobs:
        raise RuntimeError(f"pgqueuer: {done} of {jobs} jobs run, {remaining} left in the queue")
    return {
        "jobs": jobs,
        "seconds": elapsed,
        "jobs_per_s": jobs / elapsed,
        "driver": driver,
        "transactions_per_job": xacts,
        "server_cpu_ms_per_job": cpu_ms,
        "client_cpu_us_per_job": client_cpu * 1e6 / jobs,
    }


# -- profile of one store worker -------------------------------------------------------------------


def profile_store(url: str, jobs: int, batch: int, traced_jobs: int = 200) -> dict[str, Any]:
    """Where one worker's time goes: client-observed latency of each store call (untraced run
    over ``jobs``), protocol round trips per call (libpq's trace over ``traced_jobs``: one
    ReadyForQuery per round trip), and for scale a bare round trip (SELECT 1) and a bare durable
    commit (a one-row UPDATE in autocommit)."""
    names = ("claim_and_start", "complete_executions")

    def drain(store: Store, call) -> int:
        done = 0
        while claims := call("claim_and_start", store.claim_and_start, batch, 30):
            done += call("complete_executions", record_batch, store, claims, time.monotonic())
        return done

    # Round trips: trace each call on its own (libpq flushes its trace on untrace).
    reset_jobs(url, traced_jobs)
    pool = make_pool(url, min_size=1, max_size=1)
    store = Store(pool)
    with pool.connection() as conn:
        pgconn = conn.pgconn
    trips: dict[str, list[int]] = {k: [] for k in names}
    trace = tempfile.NamedTemporaryFile(prefix="bench-trace-", suffix=".log", delete=False)
    trace.close()
    traced = hasattr(pgconn, "trace")

    def traced_call(name: str, fn, *args, **kwargs):
        if not traced:
            return fn(*args, **kwargs)
        fd = os.open(trace.name, os.O_WRONLY | os.O_TRUNC)
        pgconn.trace(fd)
        try:
            return fn(*args, **kwargs)
        finally:
            pgconn.untrace()
            with open(trace.name, "rb") as f:
                trips[name].append(sum(1 for line in f if b"\tReadyForQuery" in line))

    try:
        drain(store, traced_call)
    except Exception as exc:  # pragma: no cover - libpq without tracing support
        print(f"  (round trips not counted: {exc})", file=sys.stderr)
        traced = False
    finally:
        os.unlink(trace.name)
        pool.close()

    # Latency: an untraced run.
    reset_jobs(url, jobs)
    pool = make_pool(url, min_size=1, max_size=1)
    store = Store(pool)
    store.now()
    timings: dict[str, list[float]] = {k: [] for k in names}

    def timed_call(name: str, fn, *args, **kwargs):
        t0 = time.perf_counter()
        value = fn(*args, **kwargs)
        timings[name].append((time.perf_counter() - t0) * 1000)
        return value

    with psycopg.connect(url, autocommit=True) as conn:
        lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    began = time.perf_counter()
    done = drain(store, timed_call)
    total = time.perf_counter() - began
    with psycopg.connect(url, autocommit=True) as conn:
        # WAL is cluster-wide: anything else writing meanwhile is counted too.
        wal = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,)).fetchone()[0]
        conn.execute("VACUUM ANALYZE executions")
        # A partitioned table has no storage of its own: its partitions' sizes add up.
        size = conn.execute(
            "SELECT COALESCE(sum(pg_total_relation_size(inhrelid)), 0)::bigint FROM pg_inherits "
            "WHERE inhparent = 'executions'::regclass"
        ).fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM executions").fetchone()[0]
    # The Python part of a completion: scheduler.planning.lifecycle planning the next occurrence.
    from scheduler.core.domain import Job
    from scheduler.planning import lifecycle

    with pool.connection() as conn:
        row = conn.execute("SELECT *, now() AS db_now FROM jobs LIMIT 1").fetchone()
    now = row.pop("db_now")
    job = Job.from_row(row)
    t0 = time.perf_counter()
    for _ in range(500):
        lifecycle.plan_completion(job, Outcome("succeeded"), now)
    plan_ms = (time.perf_counter() - t0) * 1000 / 500
    pool.close()

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id int PRIMARY KEY, n bigint)")
        conn.execute("INSERT INTO bench_commit VALUES (1, 0) ON CONFLICT DO NOTHING")
        rt, cm = [], []
        for _ in range(200):
            t0 = time.perf_counter()
            conn.execute("SELECT 1")
            rt.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            conn.execute("UPDATE bench_commit SET n = n + 1 WHERE id = 1")
            cm.append((time.perf_counter() - t0) * 1000)
        conn.execute("DROP TABLE bench_commit")
    calls = {name: len(v) for name, v in timings.items()}
    rt_per_call = {k: statistics.mean(v) for k, v in trips.items() if v} if traced else {}
    rt_per_job = None
    if traced and trips["claim_and_start"] and sum(sum(v) for v in trips.values()):  # an empty trace: not counted
        rt_per_job = sum(sum(v) for v in trips.values()) / traced_jobs
    return {
        "jobs": done,
        "seconds": total,
        "jobs_per_s": done / total,
        "traced": traced,
        "traced_jobs": traced_jobs,
        "calls": calls,
        "median_ms": {k: statistics.median(v) for k, v in timings.items() if v},
        "total_ms_per_job": {k: sum(v) / done for k, v in timings.items() if v},
        "round_trips_per_call": rt_per_call,
        "round_trips_per_job": rt_per_job,
        "commits_per_job": sum(calls.values()) / done,
        "plan_completion_ms": plan_ms,
        "wal_bytes_per_job": float(wal) / done,
        "execution_bytes_per_row": size / rows if rows else None,
        "select1_ms": statistics.median(rt),
        "commit_ms": statistics.median(cm),
    }


# -- the run -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # 20,000: a run of 4,000 jobs lasted about 0.3 s with two processes, and its start (the first
    # five executions of each statement planned afresh before psycopg prepares it, processes
    # released by the barrier a few ms apart) weighed on its rate as much as the machine's noise.
    parser.add_argument("--jobs", type=int, default=20000, help="jobs drained per run (default 20000)")
    parser.add_argument(
        "--per-job-jobs", type=int, default=4000, help="jobs drained per run of store per job (default 4000)"
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=50, help="claim / dequeue batch size (default 50)")
    parser.add_argument(
        "--rounds", type=int, default=5, help="runs of each system per worker count; the median is kept"
    )
    parser.add_argument("--pgqueuer-driver", choices=("auto", "asyncpg", "psycopg"), default="auto")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile of one store worker")
    parser.add_argument("--quick", action="store_true", help="a small run: 800 jobs, one round")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.per_job_jobs, args.rounds = min(args.jobs, 800), min(args.per_job_jobs, 800), 1
    driver = pgq_driver_name(args.pgqueuer_driver)

    results: dict[str, Any] = {
        "benchmark": "throughput_vs_peers",
        "jobs": args.jobs,
        "per_job_jobs": args.per_job_jobs,
        "batch": args.batch,
        "rounds": args.rounds,
        "pgqueuer_driver": driver,
        "machine": machine_summary(),
        "runs": [],
    }
    with (
        postgres_server() as server,
        fresh_database(server, "peers") as url,
        pgqueuer_database(server, driver) as pgq_url,
        tempfile.TemporaryDirectory(prefix="bench-pgbench-") as tmp,
    ):
        results["postgres"] = server_version(url)
        script = Path(tmp) / "claim_start_complete.sql"
        script.write_text(pgbench_script(args.batch), encoding="utf-8")
        runners = {
            "store": lambda w: run_store(url, args.jobs, w, args.batch),
            "store_per_job": lambda w: run_store(url, args.per_job_jobs, w, args.batch, per_job=True),
            "pgbench": lambda w: run_pgbench(url, args.jobs, w, args.batch, script),
            "pgqueuer": lambda w: run_pgqueuer(pgq_url, args.jobs, w, args.batch, driver),
        }
        print(
            f"claim + start + complete of {args.jobs} jobs ({args.per_job_jobs} per job), batch {args.batch}, "
            f"{args.rounds} round(s); "
            f"pgqueuer on {driver}",
            flush=True,
        )
        table: dict[int, dict[str, float]] = {}
        for w_index, workers in enumerate(args.workers):
            samples: dict[str, list[float]] = {s: [] for s in SYSTEMS}
            for r in range(args.rounds):
                shift = (w_index + r) % len(SYSTEMS)  # rotate the order: no system always goes first
                for system in SYSTEMS[shift:] + SYSTEMS[:shift]:
                    run = runners[system](workers)
                    run.update(system=system, workers=workers, round=r)
                    results["runs"].append(run)
                    samples[system].append(run["jobs_per_s"])
            table[workers] = {s: statistics.median(v) for s, v in samples.items()}
            xacts = {
                s: statistics.median(
                    r["transactions_per_job"] for r in results["runs"] if r["system"] == s and r["workers"] == workers
                )
                for s in SYSTEMS
            }
            cpus = {
                s: [
                    r["server_cpu_ms_per_job"]
                    for r in results["runs"]
                    if r["system"] == s and r["workers"] == workers and r.get("server_cpu_ms_per_job") is not None
                ]
                for s in SYSTEMS
            }
            cpus = {s: statistics.median(v) for s, v in cpus.items() if v}
            client = {
                s: statistics.median(
                    r["client_cpu_us_per_job"] for r in results["runs"] if r["system"] == s and r["workers"] == workers
                )
                for s in ("store", "store_per_job", "pgqueuer")
            }
            row = table[workers]
            print(
                f"  {workers} worker(s): store {row['store']:7.0f} jobs/s | pgbench {row['pgbench']:7.0f} | "
                f"pgqueuer {row['pgqueuer']:7.0f} || store/pgbench {row['store'] / row['pgbench']:.2f} "
                f"(target >= {0.5 if workers == 1 else 0.9}) | store/pgqueuer {row['store'] / row['pgqueuer']:.2f} (target >= 1.0)",
                flush=True,
            )
            print(
                f"               transactions per job: store {xacts['store']:.2f} | pgbench {xacts['pgbench']:.2f} | "
                f"pgqueuer {xacts['pgqueuer']:.2f}",
                flush=True,
            )
            if len(cpus) == len(SYSTEMS):
                print(
                    f"               Postgres CPU ms per job: store {cpus['store']:.3f} | pgbench {cpus['pgbench']:.3f} | "
                    f"pgqueuer {cpus['pgqueuer']:.3f}",
                    flush=True,
                )
                results.setdefault("server_cpu_ms_per_job", {})[str(workers)] = cpus
            print(
                f"               client CPU us per job: store {client['store']:.1f} | "
                f"store per job {client['store_per_job']:.1f} | pgqueuer {client['pgqueuer']:.1f}",
                flush=True,
            )
            results.setdefault("client_cpu_us_per_job", {})[str(workers)] = client
            results.setdefault("transactions_per_job", {})[str(workers)] = xacts
        results["table"] = {
            str(w): {
                **v,
                "store_vs_pgbench": v["store"] / v["pgbench"],
                "store_vs_pgqueuer": v["store"] / v["pgqueuer"],
            }
            for w, v in table.items()
        }
        if not args.no_profile:
            prof = profile_store(url, min(args.jobs, 1000), args.batch)
            results["profile"] = prof
            print(f"profile, 1 store worker over {prof['jobs']} jobs ({prof['jobs_per_s']:.0f} jobs/s):")
            for name in ("claim_and_start", "complete_executions"):
                rts = prof["round_trips_per_call"].get(name)
                print(
                    f"  {name:<19} {prof['calls'][name]:5d} calls, median {prof['median_ms'][name]:6.2f} ms"
                    + (f", {rts:.1f} round trips/call" if rts is not None else "")
                    + f", {prof['total_ms_per_job'][name]:.2f} ms per job"
                )
            if prof["round_trips_per_job"] is not None:
                print(
                    f"  {prof['round_trips_per_job']:.1f} round trips and {prof['commits_per_job']:.2f} commits per job; "
                    f"a bare round trip {prof['select1_ms']:.2f} ms, a bare durable commit {prof['commit_ms']:.2f} ms; "
                    f"planning the next occurrence (Python) {prof['plan_completion_ms']:.3f} ms"
                )
            print(
                f"  WAL {prof['wal_bytes_per_job'] / 1024:.1f} KiB per job; an execution row takes "
                f"{prof['execution_bytes_per_row']:.0f} bytes with its indexes"
            )
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
