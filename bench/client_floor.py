"""What the batched path's Python costs: the store beside a Python client doing no per-job work,
and beside pgbench, on the same statements and the same Postgres.

    .venv/bin/python bench/client_floor.py [--jobs 20000] [--workers 2] [--rounds 5] [--quick] [--json PATH]

Three systems drain the same N due jobs with W processes, in rotating order, ``--rounds`` times:

- **store**: as ``throughput_vs_peers.py`` runs it (``claim_and_start`` in the claiming loop,
  ``complete_executions`` in a recorder thread, each on its connection): every claimed row read
  into a job and a started execution, every completion planned in Python;
- **python floor**: one psycopg connection per process running exactly pgbench's script (the
  claim with its rows aggregated by the server into ``complete_jobs``' outcomes, then the
  completion with that text as its parameter): Python and psycopg, prepared statements, one
  round trip per statement, and no per-job work in Python at all;
- **pgbench**: the same script in C (``-M prepared``), the database's own limit.

It prints each system's median jobs/s, Postgres CPU and client CPU per job, and the ratios to
pgbench. The floor says how near a Python client can come to pgbench on these statements; the
store's distance from the floor is its per-job Python work (docs/capacity.md, "Scaling with
processes"). ``--quick``: 4,000 jobs, one round.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import throughput_vs_peers as peers

from common import ServerCpu, fresh_database, machine_summary, postgres_server, server_version, write_json

SYSTEMS = ("store", "floor", "pgbench")


def floor_statements(script: str) -> tuple[str, str]:
    """pgbench's script as two psycopg statements: the claim (answering the count, the outcomes
    and the first and last start) and the completion, its ``:variables`` as parameters."""
    text = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    claim, complete = text.split(" \\gset")
    complete = re.sub(r":(outcomes|first_start|last_start)\b", r"%(\1)s", complete.strip().rstrip(";"))
    return claim.strip(), complete


def _floor_worker(url: str, script: str, barrier, counter, results) -> None:
    claim, complete = floor_statements(script)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")  # connected before the clock starts
        barrier.wait(timeout=60)
        began, cpu, done = time.monotonic(), time.process_time(), 0
        while time.monotonic() < began + peers.RUN_TIMEOUT:
            claimed, outcomes, first, last = conn.execute(claim, prepare=True).fetchone()
            if claimed == 0:
                break
            conn.execute(complete, {"outcomes": outcomes, "first_start": first, "last_start": last}, prepare=True)
            done += claimed
            with counter.get_lock():
                counter.value += claimed
        ended, cpu = time.monotonic(), time.process_time() - cpu
    results.put((began, ended, done, cpu))


def run_floor(url: str, jobs: int, workers: int, script: str) -> dict[str, Any]:
    peers.reset_jobs(url, jobs)
    cpu = ServerCpu(url)
    cpu0 = cpu.seconds()
    elapsed, _, client_cpu = peers.spawn_workers(_floor_worker, lambda i: (url, script), workers, jobs, "floor")
    completed = peers.completed_jobs(url)
    if completed != jobs:
        raise RuntimeError(f"python floor: {completed} of {jobs} jobs completed")
    return {
        "jobs_per_s": jobs / elapsed,
        "server_cpu_ms_per_job": peers.server_cpu_ms_per_job(cpu, cpu0, jobs),
        "client_cpu_us_per_job": client_cpu * 1e6 / jobs,
    }


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000, help="jobs drained per run (default 20000)")
    parser.add_argument("--workers", type=int, default=2, help="processes of each system (default 2)")
    parser.add_argument("--batch", type=int, default=50, help="claim batch size (default 50)")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each system; the median is kept")
    parser.add_argument("--quick", action="store_true", help="a small run: 4,000 jobs, one round")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.rounds = min(args.jobs, 4000), 1
    results: dict[str, Any] = {
        "benchmark": "client_floor",
        "jobs": args.jobs,
        "workers": args.workers,
        "batch": args.batch,
        "rounds": args.rounds,
        "machine": machine_summary(),
        "runs": [],
    }
    with (
        postgres_server() as server,
        fresh_database(server, "floor") as url,
        tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp,
    ):
        results["postgres"] = server_version(url)
        script = peers.pgbench_script(args.batch)
        path = Path(tmp) / "claim_start_complete.sql"
        path.write_text(script, encoding="utf-8")
        runners = {
            "store": lambda: peers.run_store(url, args.jobs, args.workers, args.batch),
            "floor": lambda: run_floor(url, args.jobs, args.workers, script),
            "pgbench": lambda: peers.run_pgbench(url, args.jobs, args.workers, args.batch, path),
        }
        for r in range(args.rounds):
            for system in SYSTEMS[r % 3 :] + SYSTEMS[: r % 3]:  # no system always goes first
                run = runners[system]()
                results["runs"].append({"system": system, "round": r, **run})
    table = {}
    for system in SYSTEMS:
        runs = [run for run in results["runs"] if run["system"] == system]
        table[system] = {
            key: _median(runs, key) for key in ("jobs_per_s", "server_cpu_ms_per_job", "client_cpu_us_per_job")
        }
    results["table"] = table
    pgbench = table["pgbench"]["jobs_per_s"]
    print(f"{args.jobs} jobs, {args.workers} process(es), batch {args.batch}, {args.rounds} round(s); medians:")
    for system, label in (("store", "store"), ("floor", "python floor"), ("pgbench", "pgbench")):
        row = table[system]
        server = row["server_cpu_ms_per_job"]
        client = row["client_cpu_us_per_job"]
        print(
            f"  {label:<13} {row['jobs_per_s']:8.0f} jobs/s  {row['jobs_per_s'] / pgbench:5.2f}x pgbench"
            + (f"  Postgres {server * 1000:5.1f} us/job" if server is not None else "")
            + (f"  client {client:5.1f} us/job" if client is not None else "")
        )
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
