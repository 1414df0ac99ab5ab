"""The deployed path, simulated on this machine: fan-outs, Lambda's async queue, executors.

    .venv/bin/python bench/deploy_sim.py [--fanouts 2 | --max-fanouts 4] [--executors 6] [--quick]

What runs, each part the real code where the deployment runs real code:
- **fan-outs**: processes running the fan-out function's own code path
  (``fanout.run_lambda_invocation``, as ``fanout_handler`` calls it: ``run_fanout`` with
  ``LambdaDispatch``, second precision, claims of the deployment's batch size), their
  Lambda client pointed at a loopback endpoint and built as ``scheduler.wiring`` builds it,
  their live leases bounded by the executor's reserved concurrency (``--executor-concurrency``,
  default 800 as in the capacity plan's configuration) as ``fanout_handler`` bounds them, and
  under a backlog a group of up to ``--claims-per-invoke`` claims an invoke (the deployment's
  ``claims_per_invoke``);
  ``--fanouts K``: K fan-outs at once for each phase, none starting helpers. ``--max-fanouts N``
  (N > 1): the deployment's growth instead: one primary started per simulated minute of a phase,
  which starts helper fan-outs (asynchronous invokes of the fan-out function, payload
  ``{"helper": true}``) as the due backlog calls for them, up to N fan-outs at once; the endpoint
  answers each such invoke by starting a helper process running the same code path (its
  simulated timeout cut at the phase's end);
- **Lambda's async queue**: a loopback HTTP server answering the Invoke API
  (``InvocationType=Event``: 202 at once) and queueing each payload of the executor function;
- **executors**: W worker processes (the executor function's concurrency), each importing the
  real ``executor_handler`` and calling ``handler(event, context)`` for each queued payload: start
  the claim, deliver it, record the outcome (``start_execution``, HTTP, ``complete_job``), or for
  a group: ``start_executions``, a delivery per thread, ``complete_jobs`` as they end;
- real Postgres (``DATABASE_URL`` or an embedded one) and a loopback HTTP target answering 200.

The Invoke API and the target are minimal asyncio HTTP/1.1 servers: stand-ins for AWS and for
the user's endpoint, kept cheap because they share this machine's cores with what is measured.

Measured:
- **sustained**: N recurring jobs (``@every 1s``, so more is due than the pipeline can take)
  run for a window; completed executions per second over it, after a warm-up;
- **burst**: 10,000 one-off jobs due within one second; lateness = an execution's start (the
  database clock) minus its scheduled time, p50 and p99, and the time to drain them;
- **the per-job SQL limit**, side by side in the same run: pgbench running the per-job path's
  own statements from ``queries.sql`` over the same kind of rows: ``claim_due`` for a batch, then
  ``start_execution`` and ``complete_job`` for each claimed job, each statement its own commit,
  sent as the executors send them through RDS Proxy (``-M extended``: planned at each call; a
  server-side prepared statement would pin the proxy's connection). The same with the statements
  prepared once per connection (``-M prepared``) is printed beside it: what planning costs. And
  the grouped path's statements (``start_executions`` and ``complete_jobs`` per group of
  ``--claims-per-invoke``): the database's limit for what the deployment sends under a backlog.
  Postgres's CPU per job is printed for each (read from /proc when the server runs here).

The last line reads:
``deployment: S jobs/s sustained = R x the per-job SQL limit (L jobs/s); burst of N due in one second: p99 P s``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from common import (
    MinimalHttpProtocol,
    ServerCpu,
    find_pgbench,
    fresh_database,
    libpq_env,
    machine_summary,
    percentile,
    postgres_server,
    server_version,
    split_with,
    strip_sql_comments,
    substitute,
    write_json,
)
from scheduler.core.constants import DEFAULT_CLAIMS_PER_INVOKE
from scheduler.sql import QUERIES
from tests.support import insert_jobs_sql

ROOT = Path(__file__).resolve().parent.parent
FUNCTION = "scheduler-executor"
FANOUT_FUNCTION = "scheduler-fanout"
# The fan-out function's timeout (infra/runner.py) and the reserve kept from it (scheduler.runner.fanout).
FANOUT_TIMEOUT_S = 90.0
DEADLINE_RESERVE_S = 10.0
RUN_TIMEOUT = 300.0


# -- the parts, each in its own process ---------------------------------------------------------


def _serve_http(port_out, stop, handle) -> None:
    """Serve ``handle(method, path, headers, body) -> status`` on a loopback port until ``stop``."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(
        loop.create_server(lambda: MinimalHttpProtocol(handle), "127.0.0.1", 0, backlog=1024)
    )
    port_out.put(server.sockets[0].getsockname()[1])
    threading.Thread(target=lambda: (stop.wait(), loop.call_soon_threadsafe(loop.stop)), daemon=True).start()
    loop.run_forever()


def _target_server(port_out, stop) -> None:
    """A loopback HTTP target: 200 and an empty body, HTTP/1.1 keep-alive."""
    _serve_http(port_out, stop, lambda method, path, headers, body: 200)


def _lambda_service(port_out, invocations, received, stop, fanout_invocations=None) -> None:
    """The Invoke API of Lambda for asynchronous invokes: 202 at once, the payload queued for
    the executors (Lambda's async queue); an invoke of the fan-out function itself (a helper) is
    queued on ``fanout_invocations`` for the deployment to start a fan-out process."""

    def handle(method: str, path: str, headers: dict[str, str], payload: bytes) -> int:
        ok = (
            method == "POST"
            and path.startswith("/2015-03-31/functions/")
            and path.endswith("/invocations")
            and headers.get("x-amz-invocation-type") == "Event"
        )
        if ok and fanout_invocations is not None and path.split("/")[3] == FANOUT_FUNCTION:
            fanout_invocations.put(payload)
        elif ok:
            invocations.put(payload)
            with received.get_lock():
                received.value += 1
        return 202 if ok else 400

    _serve_http(port_out, stop, handle)


def _executor_worker(env: dict[str, str], invocations, handled, failed, cpu, executions) -> None:
    """One executor container: the real handler module, warm, taking queued invokes one at a
    time (as one concurrent Lambda execution environment does). ``cpu`` adds up the CPU seconds
    its invocations took, ``executions`` the claims they carried."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT / "functions"))
    sys.stdout = open(os.devnull, "w")  # the handler's JSON logs and EMF metrics
    import executor_handler

    from scheduler.runner.executor import invoke_claims
    from scheduler.transport.http_adapter import LocalLambdaContext

    context = LocalLambdaContext(function_name=FUNCTION)
    while True:
        payload = invocations.get()
        if payload is None:
            return
        began = time.process_time()
        try:
            event = json.loads(payload)
            executor_handler.handler(event, context)
            with cpu.get_lock():
                cpu.value += time.process_time() - began
            with executions.get_lock():
                executions.value += len(invoke_claims(event))
            with handled.get_lock():
                handled.value += 1
        except Exception:  # an infrastructure fault: Lambda would retry; counted
            with failed.get_lock():
                failed.value += 1


def _fanout_process(
    url: str,
    lambda_url: str,
    budget: float,
    batch: int,
    lease: float,
    reports,
    event: dict | None = None,
    max_fanouts: int = 1,
    fanout_rate: float | None = None,
    executor_concurrency: int | None = None,
    claims_per_invoke: int = 1,
) -> None:
    """One fan-out Lambda invocation, the handler's code path (``run_lambda_invocation``): the
    tick's (``event`` None), claiming for ``budget`` seconds, or a helper's (``{"helper": true}``),
    until a claim comes back empty or ``budget`` (its remaining time less the reserve)."""
    sys.path.insert(0, str(ROOT / "functions"))
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    import boto3

    from scheduler.runner.fanout import run_lambda_invocation
    from scheduler.runner.growth import FANOUT_DISPATCH_RATE
    from scheduler.store.db import make_pool
    from scheduler.store.postgres import Store
    from scheduler.wiring import event_invoke_client, lambda_client_config

    pool = make_pool(url, min_size=1, max_size=2, through_proxy=True)
    client = boto3.client(
        "lambda",
        endpoint_url=lambda_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=lambda_client_config(),
    )
    client = event_invoke_client(client)  # as the fan-out Lambda wires it
    cpu0, began = time.process_time(), time.time()
    try:
        store = Store(pool)
        report, helper = run_lambda_invocation(
            event if event is not None else {"source": "aws.events"},
            store,
            client,
            remaining_seconds=budget + DEADLINE_RESERVE_S,
            executor_function=FUNCTION,
            fanout_function=FANOUT_FUNCTION,
            max_fanouts=max_fanouts,
            batch_size=batch,
            lease_seconds=lease,
            dispatch_rate=fanout_rate or FANOUT_DISPATCH_RATE,
            # As fanout_handler wires it: no more live leases than the executor's reserved
            # concurrency, and under a backlog up to claims_per_invoke claims an invoke.
            dispatch_options={"claims_per_invoke": claims_per_invoke}
            | ({"max_in_flight": executor_concurrency, "in_flight": store.live_leases} if executor_concurrency else {}),
        )
    finally:
        pool.close()
    reports.put(
        {
            "claimed": report.claimed,
            "dispatched": report.dispatched,
            "released": report.released,
            "rounds": report.rounds,
            "helpers": report.helpers,
            "helper": helper,
            "cpu_s": time.process_time() - cpu0,
            "began": began,
            "ended": time.time(),
        }
    )


class Deployment:
    """The target, the Lambda service, W executors; fan-outs are started per phase."""

    def __init__(
        self,
        url: str,
        executors: int,
        key_file: str,
        max_fanouts: int = 1,
        fanout_rate: float | None = None,
        executor_concurrency: int | None = None,
        claims_per_invoke: int = 1,
    ) -> None:
        self.ctx = mp.get_context("spawn")
        self.url = url
        self.max_fanouts = max_fanouts
        self.fanout_rate = fanout_rate
        self.executor_concurrency = executor_concurrency
        self.claims_per_invoke = claims_per_invoke
        self.stop = self.ctx.Event()
        ports = self.ctx.Queue()
        self.invocations = self.ctx.Queue()
        self.fanout_invocations = self.ctx.Queue() if max_fanouts > 1 else None
        self.received = self.ctx.Value("q", 0)
        self.handled = self.ctx.Value("q", 0)
        self.executions = self.ctx.Value("q", 0)
        self.failed = self.ctx.Value("q", 0)
        self.cpu = self.ctx.Value("d", 0.0)
        self.procs = [self.ctx.Process(target=_target_server, args=(ports, self.stop), daemon=True)]
        self.procs[0].start()
        self.target_url = f"http://127.0.0.1:{ports.get(timeout=30)}/hook"
        service = self.ctx.Process(
            target=_lambda_service,
            args=(ports, self.invocations, self.received, self.stop, self.fanout_invocations),
            daemon=True,
        )
        service.start()
        self.procs.append(service)
        self.lambda_url = f"http://127.0.0.1:{ports.get(timeout=30)}"
        env = {
            "SCHEDULER_DATABASE_URL": url,
            "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
            "SCHEDULER_LOCAL_KEY_FILE": key_file,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        self.workers = [
            self.ctx.Process(
                target=_executor_worker,
                args=(env, self.invocations, self.handled, self.failed, self.cpu, self.executions),
                daemon=True,
            )
            for _ in range(executors)
        ]
        for worker in self.workers:
            worker.start()

    def run_fanouts(self, count: int, budget: float, batch: int, lease: float) -> list[dict[str, Any]]:
        """``count`` fan-outs at once for ``budget`` seconds; their reports. With growth
        (``max_fanouts`` > 1): a primary per simulated minute instead, and the helpers they start."""
        if self.max_fanouts > 1:
            return self._run_growing(budget, batch, lease)
        reports = self.ctx.Queue()
        procs = [
            self.ctx.Process(
                target=_fanout_process,
                args=(self.url, self.lambda_url, budget, batch, lease, reports),
                kwargs={"executor_concurrency": self.executor_concurrency, "claims_per_invoke": self.claims_per_invoke},
                daemon=True,
            )
            for _ in range(count)
        ]
        for proc in procs:
            proc.start()
        out = [reports.get(timeout=budget + RUN_TIMEOUT) for _ in procs]
        for proc in procs:
            proc.join(timeout=30)
        return out

    def _run_growing(self, budget: float, batch: int, lease: float) -> list[dict[str, Any]]:
        """One primary at the start of each simulated minute of ``budget`` (the tick), each
        claiming for the rest of its minute plus the overlap; every helper invoke they send is
        answered by a helper process. Returns when all of them have ended."""
        reports = self.ctx.Queue()
        procs: list[Any] = []
        began = time.monotonic()
        phase_end = began + budget
        done = threading.Event()

        def start(event: dict | None, seconds: float) -> None:
            proc = self.ctx.Process(
                target=_fanout_process,
                args=(
                    self.url,
                    self.lambda_url,
                    seconds,
                    batch,
                    lease,
                    reports,
                    event,
                    self.max_fanouts,
                    self.fanout_rate,
                    self.executor_concurrency,
                    self.claims_per_invoke,
                ),
                daemon=True,
            )
            proc.start()
            procs.append(proc)

        def helpers() -> None:  # Lambda starting the fan-out function for each helper invoke
            import queue as queue_module

            while not (done.is_set() and self.fanout_invocations.empty()):
                try:
                    payload = self.fanout_invocations.get(timeout=0.1)
                except queue_module.Empty:
                    continue
                left = min(FANOUT_TIMEOUT_S - DEADLINE_RESERVE_S, phase_end - time.monotonic())
                start(json.loads(payload), max(left, 1.0))

        spawner = threading.Thread(target=helpers, daemon=True)
        spawner.start()
        minute = 0
        while began + 60 * minute < phase_end:
            tick = began + 60 * minute
            time.sleep(max(tick - time.monotonic(), 0))
            start(None, min(65.0, phase_end - time.monotonic()))
            minute += 1
        deadline = phase_end + RUN_TIMEOUT
        while True:  # every process, helpers started late included, has ended
            for proc in list(procs):
                proc.join(timeout=max(deadline - time.monotonic(), 0.1))
            if all(not p.is_alive() for p in procs) and self.fanout_invocations.empty():
                time.sleep(0.3)  # a helper invoke sent by the last fan-out to end
                if all(not p.is_alive() for p in procs) and self.fanout_invocations.empty():
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("fan-outs still running past the phase's deadline")
        done.set()
        spawner.join(timeout=5)
        out = []
        while len(out) < len(procs):
            out.append(reports.get(timeout=30))
        return out

    def wait_idle(self, timeout: float) -> bool:
        """Until every queued invoke was handled (or failed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.handled.value + self.failed.value >= self.received.value:
                return True
            time.sleep(0.1)
        return False

    def close(self) -> None:
        for _ in self.workers:
            self.invocations.put(None)
        for worker in self.workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.terminate()
        self.stop.set()
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()


# -- load ---------------------------------------------------------------------------------------


def insert_jobs(
    url: str,
    count: int,
    target_url: str,
    *,
    schedule: str | None,
    first_due: str,
    spread_seconds: float = 0.0,
    prefix: str = "job",
) -> None:
    """``count`` jobs with an HTTP target at ``target_url``: recurring (``schedule``) or one-off
    (``run_at``), the first due at ``first_due`` (an SQL expression) plus an even spread."""
    target = json.dumps({"type": "http", "url": target_url, "method": "POST", "timeout_seconds": 10})
    retry = json.dumps({"max_attempts": 1, "min_backoff_seconds": 1, "max_backoff_seconds": 60})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, schedule, run_at, target, retry, scheduled_at, next_run_at",
                f"""
                SELECT gen_random_uuid(), 'sim', %(prefix)s || '-' || g, %(schedule)s,
                       CASE WHEN %(schedule)s::text IS NULL THEN t END, %(target)s::jsonb, %(retry)s::jsonb, t, t
                FROM generate_series(1, %(count)s) AS g,
                     LATERAL (SELECT {first_due} + make_interval(secs => %(spread)s * (g - 1) / %(count)s) AS t) AS at
                """,
            ),
            {
                "prefix": prefix,
                "schedule": schedule,
                "target": target,
                "retry": retry,
                "count": count,
                "spread": spread_seconds,
            },
        )
        conn.execute("VACUUM ANALYZE job_specs, job_runs")


def add_history_days(url: str, days: int) -> int:
    """Empty day partitions of ``executions`` for the ``days`` before today, named as
    ``scheduler_maintain_partitions`` names them: a deployment keeping 30 days of history has
    that many, and a statement that cannot prune them at plan time pays for each at every call."""
    with psycopg.connect(url, autocommit=True) as conn:
        for back in range(1, days + 1):
            conn.execute(
                "DO $$ DECLARE day date := (now() AT TIME ZONE 'UTC')::date - "
                + str(int(back))
                + "; BEGIN EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF executions "
                "FOR VALUES FROM (%L) TO (%L)', 'executions_p' || to_char(day, 'YYYYMMDD'), "
                "day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC'); END $$"
            )
        return conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'executions'::regclass").fetchone()[0]


def reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE job_specs, job_runs, executions CASCADE")  # and what references a job (backfills)


def finished_between(url: str, since: float, until: float) -> int:
    """Executions finished in the window (database clock, epoch seconds)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM executions WHERE finished_at >= to_timestamp(%s) AND finished_at < to_timestamp(%s)",
            (since, until),
        ).fetchone()[0]


def db_epoch(url: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        return float(conn.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())").fetchone()[0])


def fanouts_summary(args: argparse.Namespace, reports: list[dict[str, Any]]) -> str:
    """How many fan-outs ran: fixed, or primaries and the helpers they started."""
    if args.max_fanouts <= 1:
        return f"{args.fanouts} fan-out(s)"
    helpers = sum(1 for r in reports if r.get("helper"))
    return (
        f"{len(reports) - helpers} primary and {helpers} helper fan-out(s), {peak_fanouts(reports)} at once "
        f"at most (--max-fanouts {args.max_fanouts})"
    )


def peak_fanouts(reports: list[dict[str, Any]]) -> int:
    """The most fan-outs that were claiming at the same time (from their start and end times)."""
    edges = sorted(
        [(r["began"], 1) for r in reports if "began" in r] + [(r["ended"], -1) for r in reports if "ended" in r],
        key=lambda e: (e[0], e[1]),
    )
    peak = running = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def run_sustained(dep: Deployment, args: argparse.Namespace) -> dict[str, Any]:
    reset(dep.url)
    insert_jobs(
        dep.url,
        args.jobs,
        dep.target_url,
        schedule="@every 1s",
        first_due="date_trunc('second', now())",
        prefix="steady",
    )
    began = db_epoch(dep.url)
    executions0, cpu0, invokes0 = dep.executions.value, dep.cpu.value, dep.handled.value
    server = ServerCpu(dep.url)
    db_cpu0 = server.seconds()
    fanouts = threading.Thread(
        target=lambda: out.extend(dep.run_fanouts(args.fanouts, args.seconds, args.batch, args.lease)), daemon=True
    )
    out: list[dict[str, Any]] = []
    fanouts.start()
    fanouts.join(args.seconds + RUN_TIMEOUT)
    ended = db_epoch(dep.url)
    dep.wait_idle(60)
    db_cpu1 = server.seconds()
    window_start, window_end = began + args.warmup, ended
    done = finished_between(dep.url, window_start, window_end)
    rate = done / (window_end - window_start)
    with psycopg.connect(dep.url, autocommit=True) as conn:
        statuses = dict(conn.execute("SELECT status, count(*) FROM executions GROUP BY status").fetchall())
    dispatched = sum(r["dispatched"] for r in out)
    # Per claim dispatched (an invoke carries one claim, or a group under a backlog).
    cpu_per_invoke = sum(r["cpu_s"] for r in out) * 1000 / max(dispatched, 1)
    executions = dep.executions.value - executions0
    claims_per_invoke = executions / max(dep.handled.value - invokes0, 1)
    # Postgres's CPU over the whole phase (the fan-outs' and the executors' statements) per execution.
    db_cpu_ms = None if db_cpu0 is None or db_cpu1 is None else (db_cpu1 - db_cpu0) * 1000 / max(executions, 1)
    db_cpu = "" if db_cpu_ms is None else f"; Postgres CPU {db_cpu_ms:.2f} ms per execution"
    # What one execution costs an executor (start, delivery, completion, in the handler's process):
    # on this machine the executors share its cores with Postgres, in AWS each has its own.
    executor_cpu_ms = (dep.cpu.value - cpu0) * 1000 / max(dep.executions.value - executions0, 1)
    print(
        f"  sustained: {rate:7.0f} jobs/s over {window_end - window_start:.0f} s "
        f"({args.jobs} jobs @every 1s, {fanouts_summary(args, out)}, {args.executors} executors); "
        f"statuses {statuses}; fan-out CPU {cpu_per_invoke:.2f} ms per claim dispatched; "
        f"{claims_per_invoke:.1f} claims per executor invoke; executor CPU {executor_cpu_ms:.2f} ms per execution"
        f"{db_cpu}",
        flush=True,
    )
    return {
        "jobs_per_s": rate,
        "window_s": window_end - window_start,
        "finished": done,
        "statuses": statuses,
        "fanouts": out,
        "fanout_cpu_ms_per_invoke": cpu_per_invoke,
        "executor_cpu_ms_per_execution": executor_cpu_ms,
        "claims_per_invoke": claims_per_invoke,
        "db_cpu_ms_per_execution": db_cpu_ms,
    }


def run_burst(dep: Deployment, args: argparse.Namespace) -> dict[str, Any]:
    reset(dep.url)
    lead = 3.0
    insert_jobs(
        dep.url,
        args.burst,
        dep.target_url,
        schedule=None,
        first_due=f"date_trunc('second', now()) + interval '{lead + 1:.0f} seconds'",
        spread_seconds=0.999,
        prefix="burst",
    )
    handled0, executions0 = dep.handled.value, dep.executions.value
    budget = lead + 1 + args.burst_budget
    out = dep.run_fanouts(args.fanouts, budget, args.batch, args.lease)
    dep.wait_idle(120)
    with psycopg.connect(dep.url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT EXTRACT(EPOCH FROM started_at - scheduled_at), EXTRACT(EPOCH FROM finished_at) FROM executions"
        ).fetchall()
        first_due = float(
            conn.execute("SELECT EXTRACT(EPOCH FROM min(scheduled_at)) FROM executions").fetchone()[0] or 0
        )
    lateness = [float(r[0]) for r in rows]
    if len(lateness) < args.burst:
        print(f"  burst: only {len(lateness)} of {args.burst} ran within the fan-outs' {budget:.0f} s", flush=True)
    p50, p99 = percentile(lateness, 50), percentile(lateness, 99)
    drained = max(float(r[1]) for r in rows if r[1] is not None) - first_due if rows else float("nan")
    print(
        f"  burst of {args.burst} due in one second: lateness p50 {p50:.2f} s, p99 {p99:.2f} s, max "
        f"{max(lateness):.2f} s; all finished {drained:.1f} s after the first was due "
        f"({dep.handled.value - handled0} executor invocations carrying {dep.executions.value - executions0} "
        f"claims; {fanouts_summary(args, out)})",
        flush=True,
    )
    return {
        "jobs": args.burst,
        "ran": len(lateness),
        "p50_s": p50,
        "p99_s": p99,
        "max_s": max(lateness),
        "drain_s": drained,
        "fanouts": out,
    }


# -- pgbench: the per-job path's own statements --------------------------------------------------


def claim_line(batch: int) -> str:
    """The script's first statement: ``claim_due`` of up to ``batch`` jobs, its rows gathered into
    arrays for ``\\gset`` (``n``, ``ids``, ``tokens``, and an execution id for each in ``xids``)."""
    ctes, main = split_with(strip_sql_comments(QUERIES["claim_due"]))
    claim = (
        f"WITH {ctes}, __claimed AS ({main}) "
        "SELECT count(*) AS n, COALESCE(array_agg(job_id), '{}') AS ids, "
        "COALESCE(array_agg(lock_token), '{}') AS tokens, "
        "COALESCE(array_agg(gen_random_uuid()), '{}') AS xids FROM __claimed"
    )
    return substitute(claim, {"limit": str(batch), "lease_seconds": "120"}) + " \\gset"


# What every completion of the scripts writes: the job (a yearly schedule) moved on a year.
NEXT_YEAR = "(date_trunc('year', now()) + interval '1 year')"


def per_job_script(batch: int) -> str:
    """One pgbench transaction script: ``claim_due`` of up to ``batch`` jobs, then for each claimed
    job ``start_execution`` and ``complete_job``, each statement its own commit, as an executor
    invoked with one claim does."""
    lines = [claim_line(batch)]
    start = strip_sql_comments(QUERIES["start_execution"])
    complete = strip_sql_comments(QUERIES["complete_job"])
    next_year = NEXT_YEAR
    for i in range(1, batch + 1):
        item = {
            "job_id": f"(:ids::uuid[])[{i}]",
            "lock_token": f"(:tokens::uuid[])[{i}]",
            "execution_id": f"(:xids::uuid[])[{i}]",
        }
        lines.append(f"\\if :n >= {i}")
        # The start's row (one: the job was claimed by this client) gives the execution's
        # started_at, which the completion names (the executions' partition key).
        lines.append(substitute(start, {**item, "lease_margin_seconds": "30"}).rstrip().rstrip(";") + " \\gset s_")
        lines.append(
            substitute(
                complete,
                {
                    **item,
                    "version": "1",
                    "state": "'active'",
                    "scheduled_at": next_year,
                    "attempt": "0",
                    "next_run_at": next_year,
                    "ran_scheduled_at": "NULL",
                    "status": "'succeeded'",
                    "error": "NULL",
                    "http_status": "200",
                    "response_excerpt": "NULL",
                    "started_at": ":s_execution_started_at",
                    "earliest_started_at": ":s_execution_started_at",
                    "latest_started_at": ":s_execution_started_at",
                },
            ).rstrip(";")
            + ";"
        )
        lines.append("\\endif")
    return "\n".join(lines) + "\n"


def grouped_script(batch: int, group: int) -> str:
    """One pgbench transaction script: ``claim_due`` of up to ``batch`` jobs, then for each group of
    ``group`` claimed jobs ``start_executions`` and ``complete_jobs``, each statement its own
    commit, as an executor invoked with a group of claims does under a backlog (whose outcomes
    ended together: one completion statement)."""
    lines = [claim_line(batch)]
    ctes, main = split_with(strip_sql_comments(QUERIES["start_executions"]))
    # The started rows gathered into the completion's outcomes, each job's token beside its id.
    start = (
        f"WITH {ctes}, __started AS ({main}) "
        # complete_jobs' outcomes (a yearly job's plan after a success), built by the server here.
        "SELECT count(*) AS g_n, COALESCE(json_agg(json_build_array(s.id, j.lock_token, s.execution_id, 1, 'active', "
        f"{NEXT_YEAR}, 0, {NEXT_YEAR}, NULL, 'succeeded', NULL, 200, NULL, s.execution_started_at)), '[]')::text "
        "AS g_outcomes, "
        "COALESCE(min(s.execution_started_at), now()) AS g_first, "
        "COALESCE(max(s.execution_started_at), now()) AS g_last "
        "FROM __started s JOIN jobs j ON j.id = s.id"
    )
    complete = strip_sql_comments(QUERIES["complete_jobs"])

    for first in range(1, batch + 1, group):
        part = f"[{first}:{first + group - 1}]"
        lines.append(f"\\if :n >= {first}")
        lines.append(
            substitute(
                start,
                {
                    "job_id": f"(:ids::uuid[]){part}",
                    "lock_token": f"(:tokens::uuid[]){part}",
                    "execution_id": f"(:xids::uuid[]){part}",
                    "lease_margin_seconds": "30",
                },
            )
            + " \\gset"
        )
        values = {"outcomes": ":g_outcomes", "earliest_started_at": ":g_first", "latest_started_at": ":g_last"}
        lines.append(substitute(complete, values).rstrip(";") + ";")
        lines.append("\\endif")
    return "\n".join(lines) + "\n"


def run_pgbench(
    url: str,
    jobs: int,
    clients: int,
    batch: int,
    target_url: str,
    mode: str = "extended",
    group: int | None = None,
) -> dict[str, Any]:
    """pgbench draining ``jobs`` due jobs with the per-job statements (with ``group``: the grouped
    ones, ``grouped_script``). ``mode`` is pgbench's query protocol: ``extended`` sends each
    statement to be planned, as the executors do through RDS Proxy (no server-side prepared
    statements: they would pin every connection); ``prepared`` plans each statement once per
    connection, a bound the deployment cannot use."""
    reset(url)
    insert_jobs(
        url,
        jobs,
        target_url,
        schedule="0 0 1 1 *",
        first_due="date_trunc('second', now()) - interval '1 second'",
        prefix="pgbench",
    )
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as handle:
        handle.write(grouped_script(batch, group) if group else per_job_script(batch))
        script = handle.name
    per_client = math.ceil(jobs / (batch * clients)) + 1
    cmd = [
        find_pgbench(),
        "-n",
        "-M",
        mode,
        "-f",
        script,
        "-c",
        str(clients),
        "-j",
        str(clients),
        "-t",
        str(per_client),
    ]
    cpu = ServerCpu(url)
    cpu_before = cpu.seconds()
    began = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=libpq_env(url), capture_output=True, text=True, timeout=RUN_TIMEOUT)
    finally:
        os.unlink(script)
    elapsed = time.perf_counter() - began
    cpu_after = cpu.seconds()
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed: {done.stderr[-2000:]}")
    with psycopg.connect(url, autocommit=True) as conn:
        completed = conn.execute("SELECT count(*) FROM executions WHERE status = 'succeeded'").fetchone()[0]
    if completed != jobs:
        raise RuntimeError(f"pgbench: {completed} of {jobs} jobs completed")
    rate = jobs / elapsed
    if group:
        label = f"grouped SQL limit (the same jobs in groups of {group}: a start and a completion per group)"
    elif mode == "extended":
        label = "per-job SQL limit"
    else:
        label = "same, statements prepared once (not possible through RDS Proxy)"
    db_cpu_ms = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) * 1000 / jobs
    db_cpu = "" if db_cpu_ms is None else f", Postgres CPU {db_cpu_ms:.2f} ms per job"
    print(
        f"  {label} (pgbench -M {mode}, {clients} clients, claim batch {batch}): {rate:7.0f} jobs/s{db_cpu}",
        flush=True,
    )
    return {
        "jobs_per_s": rate,
        "jobs": jobs,
        "clients": clients,
        "seconds": elapsed,
        "mode": mode,
        "group": group,
        "db_cpu_ms_per_job": db_cpu_ms,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanouts", type=int, default=2, help="fan-out processes at once (default %(default)s)")
    parser.add_argument(
        "--max-fanouts",
        type=int,
        default=1,
        help="grow as deployed: a primary per minute starting helpers, up to N fan-outs at once "
        "(default %(default)s: --fanouts fixed fan-outs instead)",
    )
    parser.add_argument(
        "--fanout-rate",
        type=float,
        default=None,
        help="invokes/s one fan-out is counted to dispatch when deciding on helpers "
        "(default: the deployment's, scheduler.runner.growth.FANOUT_DISPATCH_RATE)",
    )
    parser.add_argument("--executors", type=int, default=6, help="executor processes (the function's concurrency)")
    parser.add_argument(
        "--executor-concurrency",
        type=int,
        default=800,
        help="the executor function's reserved concurrency, which bounds the fan-outs' live leases as "
        "fanout_handler does (default %(default)s, the capacity plan's configuration; 0: unbounded)",
    )
    parser.add_argument(
        "--claims-per-invoke",
        type=int,
        default=DEFAULT_CLAIMS_PER_INVOKE,
        help="the most claims one executor invoke carries under a backlog, as the fan-out is configured "
        "(context claims_per_invoke; default %(default)s; 1: one job per invocation)",
    )
    parser.add_argument(
        "--history-days",
        type=int,
        default=30,
        help="empty day partitions of executions before today, as a deployment keeping that many days "
        "of history has (default %(default)s)",
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="recurring jobs of the sustained phase")
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the sustained phase")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of it not counted")
    parser.add_argument("--burst", type=int, default=10_000, help="one-off jobs due in one second")
    parser.add_argument("--burst-budget", type=float, default=60.0, help="seconds the fan-outs run for the burst")
    parser.add_argument("--batch", type=int, default=100, help="claim batch size")
    parser.add_argument("--lease", type=float, default=120.0, help="claim lease, seconds")
    parser.add_argument("--pgbench-jobs", type=int, default=20_000)
    parser.add_argument("--pgbench-clients", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="a short run: 2,000 jobs, 20 s, burst of 2,000")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.seconds, args.warmup, args.burst, args.pgbench_jobs = 2000, 20.0, 5.0, 2000, 5000
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    results: dict[str, Any] = {
        "benchmark": "deploy_sim",
        "machine": machine_summary(),
        "config": {k: v for k, v in vars(args).items() if k != "json"},
    }
    with (
        tempfile.TemporaryDirectory(prefix="sched-sim-") as tmp,
        postgres_server() as server,
        fresh_database(server, "deploysim") as url,
    ):
        results["postgres"] = server_version(url)
        results["partitions"] = add_history_days(url, args.history_days)
        shape = (
            f"fan-outs growing to {args.max_fanouts} at once" if args.max_fanouts > 1 else f"{args.fanouts} fan-out(s)"
        )
        print(
            f"deployment simulation: {shape}, {args.executors} executor processes, "
            f"claim batch {args.batch}, up to {args.claims_per_invoke} claims per executor invoke, "
            f"{results['partitions']} day partitions of executions, "
            f"Postgres {results['postgres']}",
            flush=True,
        )
        dep = Deployment(
            url,
            args.executors,
            os.path.join(tmp, "secret.key"),
            max_fanouts=args.max_fanouts,
            fanout_rate=args.fanout_rate,
            executor_concurrency=args.executor_concurrency or None,
            claims_per_invoke=args.claims_per_invoke,
        )
        try:
            results["sustained"] = run_sustained(dep, args)
            results["burst"] = run_burst(dep, args)
            results["per_job_sql"] = run_pgbench(
                url, args.pgbench_jobs, args.pgbench_clients, args.batch, dep.target_url
            )
            results["per_job_sql_prepared"] = run_pgbench(
                url, args.pgbench_jobs, args.pgbench_clients, args.batch, dep.target_url, mode="prepared"
            )
            if args.claims_per_invoke > 1:
                results["grouped_sql"] = run_pgbench(
                    url,
                    args.pgbench_jobs,
                    args.pgbench_clients,
                    args.batch,
                    dep.target_url,
                    group=args.claims_per_invoke,
                )
        finally:
            dep.close()
    sustained, limit = results["sustained"]["jobs_per_s"], results["per_job_sql"]["jobs_per_s"]
    results["ratio"] = sustained / limit
    write_json(args.json, results)
    print(
        f"deployment: {sustained:.0f} jobs/s sustained = {results['ratio']:.2f} x the per-job SQL limit "
        f"({limit:.0f} jobs/s); burst of {results['burst']['jobs']} due in one second: "
        f"p99 {results['burst']['p99_s']:.2f} s",
        flush=True,
    )
    return results


if __name__ == "__main__":
    main()
