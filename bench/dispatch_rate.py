"""Fan-out dispatch rate: claims turned into asynchronous Lambda invokes per second.

    .venv/bin/python bench/dispatch_rate.py [--jobs 5000] [--quick]

A loopback HTTP server (its own process, threaded) answers the Lambda Invoke API
(``POST /2015-03-31/functions/{name}/invocations``) with 202 and an empty body, as Lambda does
for ``InvocationType=Event``. The fan-out runs as the fanout Lambda runs it:
``run_fanout(store, LambdaDispatch(client, name), budget_seconds=0, batch_size=100)`` over N due
jobs, with the fan-out's Lambda client pointed at the loopback server (dummy credentials,
us-east-1, built as ``scheduler.wiring`` builds it: asynchronous invokes signed and sent by
``scheduler.transport.lambda_invoke``, a pooled connection per invoking thread).

Side by side in the same run:
- **fan-out**: claims + invokes through ``run_fanout`` (what is measured against the target),
- **fan-out, botocore's defaults**: the same with a plain boto3 client of botocore's default
  configuration (every invoke through botocore; a pool of 10 connections for the invoker's 16
  threads, parameters validated per call),
- **invokes only**: the same ``LambdaDispatch`` and client fed the same number of claims in the
  same batches, without the database: fan-out / invokes-only is what the claims cost.
Target: at least 500 invokes/s through the fan-out.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import statistics
import threading
import time
from datetime import UTC
from typing import Any

import psycopg

from common import fresh_database, machine_summary, postgres_server, progress, server_version, write_json
from scheduler.runner.dispatch import LambdaDispatch
from scheduler.runner.fanout import run_fanout
from scheduler.settings import Settings
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from tests.support import insert_due_jobs

FUNCTION = "scheduler-executor"
RUN_TIMEOUT = 240.0


def _lambda_server(port_out, counter, stop) -> None:
    """A stand-in for the Lambda Invoke API: 202 and an empty body for an Event invoke."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            ok = self.path.startswith("/2015-03-31/functions/") and self.path.endswith("/invocations")
            status = 202 if ok and self.headers.get("X-Amz-Invocation-Type") == "Event" else 400
            with counter.get_lock():
                counter.value += status == 202
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.send_header("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512

    httpd = Server(("127.0.0.1", 0), Handler)
    port_out.put(httpd.server_address[1])
    threading.Thread(target=lambda: (stop.wait(), httpd.shutdown()), daemon=True).start()
    httpd.serve_forever(poll_interval=0.1)
    httpd.server_close()


class FakeLambda:
    """The loopback Lambda endpoint in a child process (so it does not share our GIL)."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.counter = ctx.Value("l", 0)
        self.stop = ctx.Event()
        ports = ctx.Queue()
        self.proc = ctx.Process(target=_lambda_server, args=(ports, self.counter, self.stop), daemon=True)
        self.proc.start()
        self.port = ports.get(timeout=30)
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def count(self) -> int:
        return self.counter.value

    def close(self) -> None:
        self.stop.set()
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)


def lambda_client(endpoint: str, botocore_defaults: bool = False):
    import boto3

    from scheduler.wiring import event_invoke_client, lambda_client_config

    config = None if botocore_defaults else lambda_client_config()
    client = boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=config,
    )
    return client if botocore_defaults else event_invoke_client(client)


def watch(fake: FakeLambda, total: int, desc: str, stop) -> None:
    start = fake.count
    with progress(total, desc, unit="invoke") as bar:
        while not stop.is_set():
            bar.update(fake.count - start - bar.n)
            stop.wait(0.25)


def run_fanout_once(
    url: str, fake: FakeLambda, jobs: int, batch: int, botocore_defaults: bool, label: str
) -> dict[str, Any]:
    pool = make_pool(url, min_size=1, max_size=2)
    try:
        with pool.connection() as conn:
            conn.execute("TRUNCATE job_specs, job_runs, executions CASCADE")  # and what references a job (backfills)
        insert_due_jobs(pool, jobs)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE job_specs, job_runs")
        store = Store(pool)
        client = lambda_client(fake.url, botocore_defaults)
        client.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")  # warm: endpoint, signer
        invoker = LambdaDispatch(client, FUNCTION)
        before = fake.count
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(fake, jobs, label, stop), daemon=True)
        watcher.start()
        began, cpu0 = time.perf_counter(), time.process_time()
        try:
            report = run_fanout(store, invoker, budget_seconds=0, batch_size=batch, lease_seconds=120)
        finally:
            invoker.close()
            elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu0
            stop.set()
            watcher.join(timeout=2)
        received = fake.count - before
    finally:
        pool.close()
    if report.dispatched != jobs or received != jobs:
        raise RuntimeError(f"{label}: {report.dispatched} dispatched, {received} received of {jobs}")
    return {
        "jobs": jobs,
        "seconds": elapsed,
        "invokes_per_s": jobs / elapsed,
        "rounds": report.rounds,
        "claimed": report.claimed,
        "released": report.released,
        "cpu_ms_per_invoke": cpu * 1000 / jobs,
    }


def run_invokes_only(fake: FakeLambda, jobs: int, batch: int) -> dict[str, Any]:
    """The same invoker and client, fed claims without the database (the payloads have the
    same shape): what the fan-out would do if claiming were free."""
    import uuid
    from datetime import datetime

    from scheduler.store.postgres import Claim

    client = lambda_client(fake.url)
    client.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")
    now = datetime.now(UTC)
    claims = [
        Claim(
            job_id=str(uuid.uuid4()),
            lock_token=str(uuid.uuid4()),
            lease_kind="schedule",
            scheduled_at=now,
            due_at=now,
            claimed_at=now,
            locked_until=now,
        )
        for _ in range(jobs)
    ]
    invoker = LambdaDispatch(client, FUNCTION)
    before = fake.count
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(fake, jobs, "invokes only", stop), daemon=True)
    watcher.start()
    began, cpu0 = time.perf_counter(), time.process_time()
    refused = 0
    try:
        for start in range(0, jobs, batch):
            refused += len(invoker.dispatch(claims[start : start + batch]))
    finally:
        invoker.close()
        elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu0
        stop.set()
        watcher.join(timeout=2)
    if refused or fake.count - before != jobs:
        raise RuntimeError(f"invokes only: {fake.count - before} of {jobs} received, {refused} refused")
    return {"jobs": jobs, "seconds": elapsed, "invokes_per_s": jobs / elapsed, "cpu_ms_per_invoke": cpu * 1000 / jobs}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument(
        "--batch",
        type=int,
        default=Settings().claim_batch_size,
        help="claim batch size (default: the deployment's, %(default)s)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant; the median is kept")
    parser.add_argument("--quick", action="store_true", help="a small run: 1000 jobs, one round")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.rounds = min(args.jobs, 1000), 1
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    # botocore's pool (10) is smaller than the invoker's 16 threads: urllib3 says so on every
    # discarded connection; counted in the figures, not printed.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)

    results: dict[str, Any] = {
        "benchmark": "dispatch_rate",
        "jobs": args.jobs,
        "batch": args.batch,
        "rounds": args.rounds,
        "machine": machine_summary(),
        "runs": [],
    }
    fake = FakeLambda()
    try:
        with postgres_server() as server, fresh_database(server, "dispatch") as url:
            results["postgres"] = server_version(url)
            print(
                f"fan-out dispatch of {args.jobs} due jobs, claim batch {args.batch}, LambdaDispatch(max_workers=16) "
                f"-> loopback Invoke API, {args.rounds} round(s)",
                flush=True,
            )
            runners = {
                "fanout": lambda: run_fanout_once(url, fake, args.jobs, args.batch, False, "fan-out"),
                "fanout_botocore_defaults": lambda: run_fanout_once(
                    url, fake, args.jobs, args.batch, True, "fan-out, botocore defaults"
                ),
                "invokes_only": lambda: run_invokes_only(fake, args.jobs, args.batch),
            }
            names = list(runners)
            for r in range(args.rounds):
                for name in names[r % 3 :] + names[: r % 3]:  # rotate the order between rounds
                    run = runners[name]()
                    run.update(system=name, round=r)
                    results["runs"].append(run)
    finally:
        fake.close()
    for name in ("fanout", "fanout_botocore_defaults", "invokes_only"):
        rates = [r["invokes_per_s"] for r in results["runs"] if r["system"] == name]
        cpu = [r["cpu_ms_per_invoke"] for r in results["runs"] if r["system"] == name]
        results[name] = {
            "invokes_per_s": statistics.median(rates),
            "samples": rates,
            "cpu_ms_per_invoke": statistics.median(cpu),
        }
    results["fanout_vs_invokes_only"] = results["fanout"]["invokes_per_s"] / results["invokes_only"]["invokes_per_s"]
    fanout, defaults, raw = results["fanout"], results["fanout_botocore_defaults"], results["invokes_only"]
    print(
        f"  fan-out (client as wired):    {fanout['invokes_per_s']:6.0f} invokes/s  (target >= 500); "
        f"{fanout['cpu_ms_per_invoke']:.2f} ms of the fan-out process's CPU per invoke"
    )
    print(
        f"  fan-out (botocore defaults):  {defaults['invokes_per_s']:6.0f} invokes/s; "
        f"{defaults['cpu_ms_per_invoke']:.2f} ms of CPU per invoke"
    )
    print(
        f"  invokes only (no database):   {raw['invokes_per_s']:6.0f} invokes/s; "
        f"fan-out / invokes only = {results['fanout_vs_invokes_only']:.2f}"
    )
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
