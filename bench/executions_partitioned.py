"""The history pages before and after executions were partitioned by day (migration 0005).

    .venv/bin/python bench/executions_partitioned.py [--jobs 1000] [--executions 1000000]
        [--days 30] [--repeats 200] [--limit 50] [--quick] [--json PATH]

Fills one database migrated up to 0004 (one table) with one owner's --jobs jobs and
--executions executions spread evenly over the last --days days (``executions_index.fill``),
copies it (CREATE DATABASE ... TEMPLATE), and migrates the copy through 0005 and on: the same rows,
one partition per day (the migration's duration is printed). Then times, alternately on both,
the store methods behind the two history routes, newest first, a page of --limit plus one:
GET /v1/executions (``list_owner_executions``: first page, the page after a cursor, the status
filter) and GET /v1/jobs/{id}/executions (``list_executions``: first page, after the API's
cursor of seq and started_at, and after a cursor of a seq alone, as issued before cursors carried
the instant), and prints the median and p95 in ms side by side with their ratio, the partitions
each page's statements plan (partitioned side), the shared buffers each first page read, and the
plan of the partitioned first pages. The storage per execution row
(heap and indexes) is printed for both, and for --real-rows executions written by the runner's
own statements (claim_and_start, then complete_executions with a typical answer). ``--quick``: 100,000 executions,
50 repeats.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from executions_index import OWNER, fill
from psycopg.conninfo import conninfo_to_dict

from common import machine_summary, postgres_server, progress, server_version, write_json
from scheduler import service
from scheduler.sql import QUERIES
from scheduler.store.db import make_pool
from scheduler.store.migrations import migrate
from scheduler.store.postgres import JOB_RECENT_DAYS, OWNER_RECENT_DAYS, Store
from tests.support import insert_due_jobs, succeeded, temporary_database

# The answer a real target's delivery records (a small JSON acknowledgement): the rows measured
# for the storage line are written by the runner's own statements with it.
TYPICAL_EXCERPT = '{"status": "ok", "received": true, "id": "6f1c2a9e-8d4b-4f61-9a0e-3c5d7b2e1f08"}'

SIDES = ("unpartitioned", "partitioned")
# A scan of one day's partition (or the DEFAULT one) in a plan; not one of their indexes.
PARTITION_SCAN = re.compile(r" on (executions_(?:p\d{8}|default))\b(?!_)")


def plan_and_buffers(url: str, query: str, params: dict) -> tuple[str, int]:
    """EXPLAIN (ANALYZE, BUFFERS) of a query: the plan and the shared buffers its top node read."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = [
            r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + query, params).fetchall()
        ]
    top = next(r for r in rows if "Buffers:" in r)
    return "\n".join(rows), sum(int(p.split("=")[1]) for p in top.split("Buffers:")[1].split() if "=" in p)


def planned_partitions(url: str, query: str, params: dict) -> list[str]:
    """The partitions of executions the planner keeps for a statement (plan-time pruning)."""
    with psycopg.connect(url, autocommit=True) as conn:
        plan = [r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + query, params).fetchall()]
    return sorted({name for line in plan for name in PARTITION_SCAN.findall(line)})


class RecordingPool:
    """A pool whose connections record each statement run with its parameters."""

    def __init__(self, pool: Any):
        self.pool, self.statements = pool, []

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self.pool.connection() as conn:
            statements = self.statements

            class Recording:
                def execute(self, query: str, params: Any = None) -> Any:
                    statements.append((query, params))
                    return conn.execute(query, params)

            yield Recording()


def bytes_per_row(url: str) -> dict:
    """Heap (with TOAST) and index bytes of executions, per row (every partition summed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("""
            WITH parts AS (
                SELECT c.oid FROM pg_class c WHERE c.relname = 'executions' AND c.relkind = 'r'
                UNION ALL
                SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'executions'::regclass
            )
            SELECT sum(pg_table_size(oid)) AS heap, sum(pg_indexes_size(oid)) AS indexes,
                   (SELECT count(*) FROM executions) AS n
            FROM parts""").fetchone()
    heap, indexes, n = (int(v) for v in row)
    return {
        "rows": n,
        "heap_bytes": heap,
        "index_bytes": indexes,
        "heap_per_row": heap / n,
        "index_per_row": indexes / n,
        "total_per_row": (heap + indexes) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--executions", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="a small run: 100,000 executions, 50 repeats")
    parser.add_argument(
        "--real-rows",
        type=int,
        default=20_000,
        help="executions written through the runner's statements for the storage line",
    )
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.quick:
        args.executions, args.repeats = min(args.executions, 100_000), min(args.repeats, 50)
    results: dict = {
        "benchmark": "executions_partitioned",
        "jobs": args.jobs,
        "executions": args.executions,
        "days": args.days,
        "limit": args.limit,
        "repeats": args.repeats,
        "machine": machine_summary(),
    }
    apart = args.days * 86400 / args.executions

    with postgres_server() as server:
        results["postgres"] = server_version(server)
        print(
            f"History pages of {args.limit}: one owner's {args.jobs:,} jobs, {args.executions:,} executions over "
            f"{args.days:g} days, in one table vs one partition per day"
        )
        with temporary_database(server, label="xunpart") as before:
            migrate(before, target=4)
            began = time.monotonic()
            fill(before, args.jobs, args.executions, seconds_apart=apart)
            with psycopg.connect(before, autocommit=True) as conn:  # as if the runner had run them
                conn.execute(
                    "UPDATE jobs SET created_at = now() - make_interval(days => %s), run_count = %s",
                    (args.days, args.executions // args.jobs),
                )
            results["fill_seconds"] = round(time.monotonic() - began, 1)
            with temporary_database(server, label="xpart", template=conninfo_to_dict(before)["dbname"]) as after:
                began = time.monotonic()
                applied = migrate(after)  # 0005 (the days) and every later one
                assert applied[0] == 5, applied
                results["migration_seconds"] = round(time.monotonic() - began, 2)
                print(
                    f"  migrations {applied[0]:04d}-{applied[-1]:04d} over {args.executions:,} rows: "
                    f"{results['migration_seconds']} s"
                )
                with psycopg.connect(after, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE executions")
                    results["partitions"] = conn.execute(
                        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'executions'::regclass"
                    ).fetchone()[0]
                urls = dict(zip(SIDES, (before, after)))
                results["storage"] = {side: bytes_per_row(url) for side, url in urls.items()}
                for side in SIDES:
                    s = results["storage"][side]
                    print(
                        f"  {side:>13}: {s['total_per_row']:.0f} bytes per execution row "
                        f"(heap {s['heap_per_row']:.0f}, indexes {s['index_per_row']:.0f})"
                    )
                run(args, urls, results)
            with temporary_database(server, label="xreal") as real:
                migrate(real)
                results["storage_real_rows"] = real_rows(real, args.real_rows)
                s = results["storage_real_rows"]
                print(
                    f"  {s['rows']:,} executions written by claim_and_start and complete_executions "
                    f"(HTTP 200, a {len(TYPICAL_EXCERPT)}-byte answer): {s['total_per_row']:.0f} bytes per row "
                    f"(heap {s['heap_per_row']:.0f}, indexes {s['index_per_row']:.0f})"
                )
    write_json(args.json, results)


def real_rows(url: str, count: int, batch: int = 500) -> dict:
    """Bytes per execution row written the way the runner writes them: due jobs claimed and
    started (``claim_and_start``) and completed (``complete_executions``) with a typical answer,
    then vacuumed (the dead row versions of the completion's update reclaimed)."""
    pool = make_pool(url, min_size=1, max_size=1)
    store = Store(pool)
    insert_due_jobs(pool, count, owner=OWNER)
    with progress(count, f"writing {count:,} executions", unit="row") as bar:
        while claims := store.claim_and_start(batch, 30):
            service.complete_executions(
                store,
                [succeeded(claim, response_excerpt=TYPICAL_EXCERPT) for claim in claims],
            )
            bar.update(len(claims))
    pool.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE executions")
    return bytes_per_row(url)


def run(args: argparse.Namespace, urls: dict[str, str], results: dict) -> None:
    pools = {side: make_pool(url, min_size=1, max_size=1) for side, url in urls.items()}
    stores = {side: Store(pool) for side, pool in pools.items()}
    with pools["unpartitioned"].connection() as conn:
        job_id = str(
            conn.execute("SELECT id FROM jobs WHERE owner = %s ORDER BY name LIMIT 1", (OWNER,)).fetchone()["id"]
        )
    owner_cursor, job_cursor = {}, {}
    for side, store in stores.items():
        last = store.list_owner_executions(OWNER, limit=args.limit)[-1]
        owner_cursor[side] = (last.started_at, last.id)
        last = store.list_executions(OWNER, job_id, limit=args.limit)[-1]
        job_cursor[side] = (last.seq, last.started_at)
    pages = {
        "owner_first_page": lambda store, side: store.list_owner_executions(OWNER, limit=args.limit + 1),
        "owner_after_cursor": lambda store, side: store.list_owner_executions(
            OWNER, limit=args.limit + 1, before=owner_cursor[side]
        ),
        "owner_status_failed": lambda store, side: store.list_owner_executions(
            OWNER, limit=args.limit + 1, status="failed"
        ),
        "job_first_page": lambda store, side: store.list_executions(OWNER, job_id, limit=args.limit + 1),
        # The API's cursor: the last row's seq and started_at.
        "job_after_cursor": lambda store, side: store.list_executions(
            OWNER, job_id, limit=args.limit + 1, before_seq=job_cursor[side][0], before_started_at=job_cursor[side][1]
        ),
        # A cursor issued before cursors carried the instant: its seq alone.
        "job_after_seq_cursor": lambda store, side: store.list_executions(
            OWNER, job_id, limit=args.limit + 1, before_seq=job_cursor[side][0]
        ),
    }
    cases = {case: (lambda side, page=page: page(stores[side], side)) for case, page in pages.items()}
    # The partitions each page's statements plan (of the partitioned side), with its statements recorded once.
    recording = RecordingPool(pools["partitioned"])
    planned = {}
    for case, page in pages.items():
        recording.statements.clear()
        page(Store(recording), "partitioned")
        planned[case] = [
            len(planned_partitions(urls["partitioned"], query, params))
            for query, params in recording.statements
            if query in (QUERIES["list_executions"], QUERIES["list_owner_executions"])
        ]
    samples = {case: {side: [] for side in SIDES} for case in cases}
    for _ in range(10):  # warm up both
        for page in cases.values():
            for side in SIDES:
                page(side)
    with progress(args.repeats, "page latency", unit="round") as bar:
        for _ in range(args.repeats):  # alternate, so both see the same machine noise
            for case, page in cases.items():
                for side in SIDES:
                    began = time.perf_counter()
                    assert page(side)
                    samples[case][side].append((time.perf_counter() - began) * 1000)
            bar.update(1)
    for pool in pools.values():
        pool.close()
    for case in cases:
        entry: dict = {}
        for side in SIDES:
            data = sorted(samples[case][side])
            entry[side + "_ms"] = {"median": statistics.median(data), "p95": data[int(len(data) * 0.95)]}
        entry["ratio"] = entry["partitioned_ms"]["median"] / entry["unpartitioned_ms"]["median"]
        entry["partitions_planned"] = planned[case]
        results[case] = entry
        print(
            f"  {case:>20}: one table: median {entry['unpartitioned_ms']['median']:6.2f} ms, "
            f"p95 {entry['unpartitioned_ms']['p95']:6.2f} ms | by day: median "
            f"{entry['partitioned_ms']['median']:6.2f} ms, p95 {entry['partitioned_ms']['p95']:6.2f} ms | "
            f"ratio {entry['ratio']:.2f} | partitions planned {'+'.join(map(str, planned[case]))}"
        )
    # The store's first tries (since midnight UTC so many days back): the page, when they hold it.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    owner_params = {
        "owner": OWNER,
        "status": None,
        "job_id": None,
        "since": today - timedelta(days=OWNER_RECENT_DAYS),
        "until": None,
        "limit": args.limit + 1,
        "before_started_at": None,
        "before_id": None,
    }
    job_params = {
        "job_id": job_id,
        "status": None,
        "before_seq": None,
        "before_started_at": None,
        "limit": args.limit + 1,
        "since": today - timedelta(days=JOB_RECENT_DAYS),
        "until": None,
    }
    for name, query, params in (
        ("owner", "list_owner_executions", owner_params),
        ("job", "list_executions", job_params),
    ):
        for side in SIDES:
            plan, buffers = plan_and_buffers(urls[side], QUERIES[query], params)
            results[f"{name}_first_page_buffers_{side}"] = buffers
            if side == "partitioned":
                results[f"{name}_first_page_plan_partitioned"] = plan
        one, by_day = (results[f"{name}_first_page_buffers_{side}"] for side in SIDES)
        print(f"  buffers read by the {name} first page: one table {one} vs by day {by_day}")
    print(results["owner_first_page_plan_partitioned"])
    print(results["job_first_page_plan_partitioned"])


if __name__ == "__main__":
    main()
