"""The first page of GET /v1/executions with 1,000,000 executions of one owner vs 10,000.

    .venv/bin/python bench/executions_index.py [--jobs 10000] [--small 10000] [--large 1000000]
        [--others 0] [--repeats 200] [--limit 50] [--quick] [--json PATH]

Fills two databases with one owner's --jobs jobs and --small vs --large executions spread over
them (INSERT ... SELECT generate_series, in chunks, oldest first as a live table grows), plus
--others executions of another owner in both when given, then times the store method the route
calls (``Store.list_owner_executions``, newest first, a page of --limit plus one) on both,
alternately in one run, and prints the median and p95 in ms and their ratio: with the index on
(owner, started_at DESC, id DESC) a page reads about --limit index entries, so the ratio should
stay near 1. The same for the page after a cursor, and for the status filter (2% of the
executions failed), and for the rare statuses, fewer than a page in either table: RUNNING live
runs (their jobs' run states name them, as a start writes them) and LOST executions spread over
the history (a walk in the page's order would read every execution for them; they are read where
they are named, job_runs and lost_executions). The plan of the first page on the large table is
printed with the buffers it touched. ``--quick`` shrinks the run (100,000 executions, 50 repeats).
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from common import fresh_database, machine_summary, postgres_server, progress, server_version, write_json
from scheduler.sql import QUERIES
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from tests.support import insert_due_jobs

OWNER = "arn:aws:iam::111111111111:user/bench"
# Another tenant's executions in the same table (--others): the page must not read them.
OTHER_OWNER = "arn:aws:iam::222222222222:user/neighbour"
FAILED_EVERY = 50  # 2% of the executions failed: the status filter's case
# The rare statuses' case, as many in either table (fewer than a page): live runs, lost executions.
RUNNING = 20
LOST = 30


def fill(
    url: str, jobs: int, executions: int, owner: str = OWNER, chunk_rows: int = 100_000, seconds_apart: float = 1.0
) -> None:
    """``owner``'s jobs (not due) and ``executions`` executions spread evenly over them, one
    every ``seconds_apart`` backwards from now (started_at distinct, the jobs interleaved),
    inserted oldest first as a live table grows, in chunks (a progress bar, no huge transaction)."""
    pool = make_pool(url, min_size=1, max_size=1)
    insert_due_jobs(pool, jobs, owner=owner, prefix="job", due_offset_seconds=86400, state="paused")
    per_job = max(executions // jobs, 1)
    rounds = max(chunk_rows // jobs, 1)  # each chunk: `rounds` executions of every job
    with pool.connection() as conn:
        conn.execute(
            "CREATE TEMP TABLE numbered AS SELECT id, owner, row_number() OVER (ORDER BY id) AS n "
            "FROM jobs WHERE owner = %s",
            (owner,),
        )
        with progress(per_job * jobs, f"filling {per_job * jobs:,} executions", unit="row") as bar:
            for last in range(per_job - 1, -1, -rounds):
                first = max(last - rounds + 1, 0)
                conn.execute(
                    """
                    INSERT INTO executions (id, job_id, owner, scheduled_at, started_at, finished_at, attempt,
                                            trigger, status, http_status, duration_ms)
                    SELECT gen_random_uuid(), j.id, j.owner, t.at, t.at, t.at + interval '50 ms', 1, 'schedule',
                           CASE WHEN (g * %(jobs)s + j.n) %% %(every)s = 0 THEN 'failed' ELSE 'succeeded' END,
                           200, 50
                    FROM numbered j
                    CROSS JOIN generate_series(%(first)s::integer, %(last)s::integer) AS g
                    CROSS JOIN LATERAL (SELECT now() - make_interval(secs => (g * %(jobs)s + j.n) * %(apart)s)
                                        AS at) AS t
                    ORDER BY t.at""",
                    {"jobs": jobs, "every": FAILED_EVERY, "first": first, "last": last, "apart": seconds_apart},
                )
                bar.update((last - first + 1) * jobs)
    pool.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE job_specs, job_runs")
        conn.execute("VACUUM ANALYZE executions")


def add_rare(url: str, owner: str = OWNER) -> None:
    """``owner``'s rare executions: LOST of its executions, evenly spread over their starts, marked
    lost (lost_executions takes them, by its trigger), and RUNNING live runs, each of another job
    started in the last hour, written as a start writes them (the execution running, the job's
    run state naming it, started at its last_run_at, under a live lease)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            WITH numbered AS (
                SELECT job_id, started_at, seq, row_number() OVER (ORDER BY started_at) AS n, count(*) OVER () AS total
                FROM executions WHERE owner = %(owner)s AND status = 'succeeded'
            )
            UPDATE executions e SET status = 'lost', http_status = NULL,
                error = 'the lease expired before the execution finished (runner lost)'
            FROM numbered p
            WHERE p.n %% greatest(p.total / %(lost)s, 1) = 0 AND p.n / greatest(p.total / %(lost)s, 1) <= %(lost)s
              AND e.job_id = p.job_id AND e.started_at = p.started_at AND e.seq = p.seq""",
            {"owner": owner, "lost": LOST},
        )
        conn.execute(
            """
            WITH run AS (
                UPDATE job_runs r
                SET running_execution_id = gen_random_uuid(), lock_token = gen_random_uuid(), lease_kind = 'schedule',
                    locked_until = now() + interval '1 hour', last_run_at = now() - make_interval(secs => 60 * k.n)
                FROM (SELECT id, row_number() OVER (ORDER BY name) AS n FROM job_specs WHERE owner = %(owner)s
                      ORDER BY name LIMIT %(running)s) k
                WHERE r.job_id = k.id
                RETURNING r.job_id, r.running_execution_id, r.last_run_at
            )
            INSERT INTO executions (id, job_id, owner, scheduled_at, started_at, attempt, trigger, status)
            SELECT running_execution_id, job_id, %(owner)s, last_run_at, last_run_at, 1, 'schedule', 'running' FROM run""",
            {"owner": owner, "running": RUNNING},
        )
        conn.execute("VACUUM ANALYZE job_runs, executions, lost_executions")


def first_page_plan(url: str, limit: int) -> tuple[str, int]:
    """The plan of the first page (EXPLAIN ANALYZE, BUFFERS) and the shared buffers it touched."""
    sql = QUERIES["list_owner_executions"]
    params = {
        "owner": OWNER,
        "status": None,
        "job_id": None,
        "since": None,
        "until": None,
        "limit": limit + 1,
        "before_started_at": None,
        "before_id": None,
    }
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + sql, params).fetchall()
    plan = "\n".join(r[0] for r in rows)
    top = next(r[0] for r in rows if "Buffers:" in r[0])
    buffers = sum(int(part.split("=")[1]) for part in top.split("Buffers:")[1].split() if "=" in part)
    return plan, buffers


def timed(store: Store, **kwargs) -> float:
    began = time.perf_counter()
    rows = store.list_owner_executions(OWNER, **kwargs)
    elapsed = time.perf_counter() - began
    assert rows, kwargs
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument(
        "--others", type=int, default=0, help="also this many executions of another owner in both tables (default none)"
    )
    parser.add_argument("--quick", action="store_true", help="a small run: 100,000 executions, 50 repeats")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.quick:
        args.large, args.repeats = min(args.large, 100_000), min(args.repeats, 50)
        args.others = min(args.others, 10_000)
    results: dict = {
        "benchmark": "executions_index",
        "jobs": args.jobs,
        "small": args.small,
        "large": args.large,
        "others": args.others,
        "limit": args.limit,
        "repeats": args.repeats,
        "machine": machine_summary(),
    }

    with postgres_server() as server:
        results["postgres"] = server_version(server)
        print(
            f"GET /v1/executions, first page of {args.limit}: one owner's {args.jobs:,} jobs with "
            f"{args.small:,} vs {args.large:,} executions (and {args.others:,} of another owner in both)"
        )
        with fresh_database(server, "xsmall") as small, fresh_database(server, "xlarge") as large:
            began = time.monotonic()
            for url, executions in ((small, args.small), (large, args.large)):
                fill(url, args.jobs, executions)
                if args.others:
                    fill(url, max(args.jobs // 10, 1), args.others, OTHER_OWNER)
                add_rare(url)
            results["fill_seconds"] = round(time.monotonic() - began, 1)
            plan, buffers = first_page_plan(large, args.limit)
            results["large_first_page_plan"], results["large_first_page_buffers"] = plan, buffers
            results["small_first_page_buffers"] = first_page_plan(small, args.limit)[1]
            print(plan)
            pools = {name: make_pool(url, min_size=1, max_size=1) for name, url in (("small", small), ("large", large))}
            stores = {name: Store(pool) for name, pool in pools.items()}
            cursors = {}
            for name, store in stores.items():  # the second page starts after the first page's last row
                last = store.list_owner_executions(OWNER, limit=args.limit)[-1]
                cursors[name] = (last.started_at, last.id)
            cases = {
                "first_page": lambda name: {"limit": args.limit + 1},
                "after_cursor": lambda name: {"limit": args.limit + 1, "before": cursors[name]},
                "status_failed": lambda name: {"limit": args.limit + 1, "status": "failed"},
                "status_running": lambda name: {"limit": args.limit + 1, "status": "running"},
                "status_lost": lambda name: {"limit": args.limit + 1, "status": "lost"},
            }
            samples = {case: {"small": [], "large": []} for case in cases}
            for _ in range(10):  # warm up both
                for params in cases.values():
                    for name in ("small", "large"):
                        timed(stores[name], **params(name))
            with progress(args.repeats, "page latency", unit="round") as bar:
                for _ in range(args.repeats):  # alternate, so both see the same machine noise
                    for case, params in cases.items():
                        for name in ("small", "large"):
                            samples[case][name].append(timed(stores[name], **params(name)))
                    bar.update(1)
            for pool in pools.values():
                pool.close()
        for case in cases:
            entry: dict = {}
            for name in ("small", "large"):
                data = sorted(samples[case][name])
                entry[name + "_ms"] = {
                    "median": statistics.median(data),
                    "p95": data[int(len(data) * 0.95)],
                    "samples": data,
                }
            entry["ratio"] = entry["large_ms"]["median"] / entry["small_ms"]["median"]
            results[case] = entry
            print(
                f"  {case:>13}: {args.small:>9,} executions: median {entry['small_ms']['median']:6.2f} ms, "
                f"p95 {entry['small_ms']['p95']:6.2f} ms | {args.large:>9,}: median "
                f"{entry['large_ms']['median']:6.2f} ms, p95 {entry['large_ms']['p95']:6.2f} ms | "
                f"ratio {entry['ratio']:.2f}"
            )
        results["ratio"] = results["first_page"]["ratio"]
        print(f"  buffers read by the first page: {results['small_first_page_buffers']} vs {buffers}")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
