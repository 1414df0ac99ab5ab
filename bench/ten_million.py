"""Ten million jobs: the claim, the first page of GET /v1/jobs and a job's executions page, against
the same with ten thousand; the storage per job.

    .venv/bin/python bench/ten_million.py [--large 10000000] [--small 10000] [--repeats 100] [--quick]

Two fresh databases on the same server, filled the same way with ``INSERT ... SELECT
generate_series`` (``tests.support.insert_due_jobs``, through the ``jobs`` view's two tables) in
chunks of a million: ten owners holding a tenth of the jobs each, not due (chunk i due in i days,
up to a year), plus ``--due`` due jobs of an eleventh owner, and one job of the first owner with
``--executions`` executions. Then, alternately on both databases so that both see the same noise,
the median of ``--repeats`` of each case, through the store methods the routes call:

- the claim: ``Store.claim_due(--due)`` (the leases given back after each by the claimed keys,
  untimed; the due jobs' pages are counted at the end: ``due_pages``);
- ``GET /v1/jobs``: ``Store.list_jobs(owner)``, the first page (50) of an owner holding a tenth of
  the jobs;
- a job's executions page: ``Store.list_executions(owner, job)``, the first page (50).

Target: each within 1.3x of its time with ten thousand. Storage per job: ``pg_total_relation_size``
of ``job_specs`` and ``job_runs`` (tables, indexes, TOAST) over the count. Takes about 10 minutes
here (the load, 6 to 9 minutes, most of it); ``make bench-10m`` runs it and rebuilds docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg
from claim_throughput import claim_once

from common import fresh_database, machine_summary, postgres_server, progress, server_version, write_json
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from tests.support import insert_due_jobs

OWNERS = 10
CHUNK = 1_000_000
PAGE = 50
MEASURED_OWNER = "arn:aws:iam::111111111111:user/owner-0"
DUE_OWNER = "arn:aws:iam::111111111111:user/due"


def owner(i: int) -> str:
    return f"arn:aws:iam::111111111111:user/owner-{i}"


def fill(url: str, jobs: int, due: int, executions: int) -> tuple[float, str]:
    """Load the jobs and one job's executions; (seconds the jobs took, that job's id)."""
    pool = make_pool(url, min_size=1, max_size=1)
    per_owner = jobs // OWNERS
    began = time.monotonic()
    with progress(jobs, f"loading {jobs:,} jobs", unit="job") as bar:
        for i in range(OWNERS):
            for start in range(0, per_owner, CHUNK):
                n = min(CHUNK, per_owner - start)
                day = 1 + (i * per_owner + start) * 364 // max(jobs, 1)
                insert_due_jobs(pool, n, owner=owner(i), prefix=f"job{start:08d}", due_offset_seconds=86400 * day)
                bar.update(n)
    insert_due_jobs(pool, due, owner=DUE_OWNER, prefix="due", due_offset_seconds=-1)
    load_s = time.monotonic() - began
    with pool.connection() as conn:
        row = conn.execute("SELECT id FROM jobs WHERE owner = %s ORDER BY name LIMIT 1", (MEASURED_OWNER,)).fetchone()
        job_id = row["id"] if isinstance(row, dict) else row[0]
        conn.execute(
            """
            INSERT INTO executions (id, job_id, owner, scheduled_at, started_at, finished_at, attempt, trigger,
                                    status, http_status, duration_ms)
            SELECT gen_random_uuid(), %(job)s, %(owner)s, t.at, t.at, t.at + interval '50 ms', 1, 'schedule',
                   'succeeded', 200, 50
            FROM generate_series(1, %(n)s) AS g
            CROSS JOIN LATERAL (SELECT now() - make_interval(secs => g * 10) AS at) AS t
            ORDER BY t.at""",
            {"job": job_id, "owner": MEASURED_OWNER, "n": executions},
        )
    pool.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE job_specs, job_runs, executions")
        # The load's and the vacuum's pages written out and synced before anything is timed: with
        # the leases given back by key, the cases take seconds, and run while the kernel still
        # wrote gigabytes back they measured that (GET /v1/jobs 1.46x once, 1.06x settled).
        conn.execute("CHECKPOINT")
    return load_s, str(job_id)


def storage(url: str) -> tuple[dict[str, int], int]:
    """(relation -> bytes with its indexes and TOAST, the jobs' count)."""
    with psycopg.connect(url, autocommit=True) as conn:
        sizes = {
            name: conn.execute("SELECT pg_total_relation_size(%s::regclass)", (name,)).fetchone()[0]
            for name in ("job_specs", "job_runs")
        }
        count = conn.execute("SELECT count(*) FROM job_runs").fetchone()[0]
    return sizes, count


def due_pages(url: str) -> int:
    """The heap pages the due jobs' current row versions sit on: what a claim locks and writes.
    Loaded, they sit together (100 on 5 pages); a claim or a give-back that could not update a
    row in place (not HOT: the page full and its dead versions not yet prunable) moved it."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(DISTINCT (ctid::text::point)[0]) FROM job_runs WHERE due_at <= now()"
        ).fetchone()[0]


def timed(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


def measure(urls: dict[str, str], jobs_of: dict[str, str], due: int, repeats: int) -> dict[str, Any]:
    pools = {name: make_pool(url, min_size=1, max_size=2) for name, url in urls.items()}
    stores = {name: Store(pool) for name, pool in pools.items()}
    cases: dict[str, tuple[str, Callable[[str], float]]] = {
        "claim": (f"claim of {due} due jobs", lambda n: claim_once(pools[n], stores[n], due)),
        "list_jobs": (
            f"`GET /v1/jobs` first page ({PAGE}), an owner with a tenth of the jobs",
            lambda n: timed(lambda: stores[n].list_jobs(MEASURED_OWNER, limit=PAGE)),
        ),
        "list_executions": (
            f"a job's executions, first page ({PAGE})",
            lambda n: timed(lambda: stores[n].list_executions(MEASURED_OWNER, jobs_of[n], limit=PAGE)),
        ),
    }
    out: dict[str, Any] = {}
    try:
        for key, (label, run) in cases.items():
            samples: dict[str, list[float]] = {name: [] for name in urls}
            for _ in range(5):  # warm both
                for name in urls:
                    run(name)
            for _ in range(repeats):  # alternated: the same noise on both
                for name in urls:
                    samples[name].append(run(name))
            small, large = statistics.median(samples["small"]), statistics.median(samples["large"])
            out[key] = {"label": label, "small_ms": small, "large_ms": large, "ratio": large / small}
            print(f"  {label}: {small:.2f} ms vs {large:.2f} ms = {large / small:.2f}x (target <= 1.3)", flush=True)
    finally:
        for pool in pools.values():
            pool.close()
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--executions", type=int, default=1000, help="executions of the measured job")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="200,000 jobs, 30 repeats")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.large, args.repeats = min(args.large, 200_000), min(args.repeats, 30)
    results: dict[str, Any] = {
        "benchmark": "ten_million",
        "large": args.large,
        "small": args.small,
        "due": args.due,
        "batch": args.due,
        "page": PAGE,
        "executions_per_job": args.executions,
        "repeats": args.repeats,
        "machine": machine_summary(),
        "load_average": os.getloadavg(),
    }
    began = time.monotonic()
    with postgres_server() as server:
        results["postgres"] = server_version(server)
        with fresh_database(server, "jobs10k") as small, fresh_database(server, "jobs10m") as large:
            urls = {"small": small, "large": large}
            _, small_job = fill(small, args.small, args.due, args.executions)
            results["load_s"], large_job = fill(large, args.large, args.due, args.executions)
            print(f"loaded {args.large:,} jobs in {results['load_s']:.0f} s", flush=True)
            sizes, count = storage(large)
            results.update(sizes=sizes, count=count, jobs_bytes=sum(sizes.values()))
            results["bytes_per_job"] = results["jobs_bytes"] / count
            print(f"storage: {results['bytes_per_job']:.0f} bytes per job ({sizes})", flush=True)
            results["cases"] = measure(urls, {"small": small_job, "large": large_job}, args.due, args.repeats)
            results["due_pages"] = {name: due_pages(url) for name, url in urls.items()}
            print(f"the due jobs' pages after the claims: {results['due_pages']}", flush=True)
    results["elapsed_s"] = time.monotonic() - began
    results["load_average_after"] = os.getloadavg()
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
