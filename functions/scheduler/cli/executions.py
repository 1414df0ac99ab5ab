"""``scheduler executions [JOB]``: a job's executions, or the caller's across all jobs, and
``--follow`` to keep printing them as they finish."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from scheduler.cli.api import client_command
from scheduler.cli.common import EXECUTION_STATUSES, EXIT_OK, positive_float, positive_int
from scheduler.cli.jobs import print_listing
from scheduler.cli.output import EXECUTION_COLUMNS, execution_row, format_executions

FOLLOW_PAGE = 100


def _fetch(args: argparse.Namespace, client: Any) -> tuple[Callable[..., dict[str, Any]], dict[str, Any], bool]:
    """The listing call, its filters, and whether rows come from several jobs."""
    if args.job:
        job_id = client.resolve_job_id(args.job)
        filters = {"status": args.status, "limit": args.limit}
        return (lambda **kw: client.list_executions(job_id, **kw)), filters, False
    job_id = client.resolve_job_id(args.job_filter) if args.job_filter else None
    filters = {"status": args.status, "since": args.since, "job_id": job_id, "limit": args.limit}
    return client.list_all_executions, filters, True


def follow(
    fetch: Callable[..., dict[str, Any]],
    filters: dict[str, Any],
    *,
    output: str = "table",
    wide: bool = False,
    job_column: bool = True,
    interval: float = 2.0,
    stop: threading.Event | None = None,
    out: TextIO | None = None,
) -> int:
    """Print the executions that finish from now on, oldest first, polling every ``interval``
    seconds until ``stop`` is set (or Ctrl-C). Those finished before the start are printed first.

    A poll reads the newest page (``FOLLOW_PAGE`` rows): more executions than that finishing
    between two polls would be missed, so keep ``interval`` short for busy owners."""
    stop = stop or threading.Event()
    out = out or sys.stdout
    seen: set[str] = set()
    headers = (("JOB",) if job_column else ()) + EXECUTION_COLUMNS
    if output == "table":
        print("  ".join(headers), file=out, flush=True)
    query = {**filters, "limit": FOLLOW_PAGE, "status": filters.get("status")}
    try:
        while True:
            page = fetch(**query, cursor=None)
            fresh = [
                e
                for e in reversed(page.get("executions") or [])
                if e.get("status") != "running" and str(e.get("id")) not in seen
            ]
            for execution in fresh:
                seen.add(str(execution.get("id")))
                if output == "table":
                    row = execution_row(execution, wide=wide)
                    if job_column:
                        row = [execution.get("job_name") or execution.get("job_id")] + row
                    print(
                        "  ".join("-" if v in (None, "") else " ".join(str(v).split()) for v in row),
                        file=out,
                        flush=True,
                    )
                elif output == "yaml":  # one YAML document each
                    import yaml

                    print(
                        "---\n" + yaml.safe_dump(execution, sort_keys=False, allow_unicode=True).rstrip(),
                        file=out,
                        flush=True,
                    )
                else:  # one JSON document per line
                    print(json.dumps(execution, ensure_ascii=False), file=out, flush=True)
            if stop.wait(interval):
                return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK


@client_command
def executions(args: argparse.Namespace, client: Any) -> int:
    """``scheduler executions``."""
    fetch, filters, across = _fetch(args, client)
    if args.follow:
        return follow(
            fetch,
            {k: v for k, v in filters.items() if k != "limit"},
            output=args.output,
            wide=args.wide,
            job_column=across,
            interval=args.interval,
        )
    return print_listing(
        args,
        "executions",
        lambda rows: format_executions(rows, wide=args.wide, job_column=across),
        lambda: fetch(cursor=args.cursor, **filters),
        lambda: client.pages(fetch, {**filters, "cursor": args.cursor}),
    )


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler executions``."""
    parser = subparser(sub, "executions", "list executions: a job's, or across all your jobs (newest first)")
    parser.add_argument("job", metavar="JOB", nargs="?", help="job id or name (default: across all jobs)")
    parser.add_argument("--job", dest="job_filter", metavar="JOB", help="across jobs, only this job's (id or name)")
    parser.add_argument("--status", choices=EXECUTION_STATUSES, help="only executions with this status")
    parser.add_argument(
        "--since", metavar="TIMESTAMP", help="across jobs: only executions started at or after this RFC 3339 instant"
    )
    parser.add_argument("--limit", type=positive_int, metavar="N", help="page size")
    parser.add_argument("--cursor", help="the next_cursor of the previous page")
    parser.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    parser.add_argument("--wide", action="store_true", help="print whole errors, not their first 60 characters")
    parser.add_argument(
        "--follow",
        "-F",
        action="store_true",
        help="keep printing executions as they finish (polls the API) until Ctrl-C",
    )
    parser.add_argument(
        "--interval",
        type=positive_float,
        default=2.0,
        metavar="SECONDS",
        help="--follow: seconds between polls (default: 2)",
    )
    parser.set_defaults(func=executions)
