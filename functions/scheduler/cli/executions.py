"""``scheduler executions [JOB]``: a job's executions, or the caller's across all jobs,
``--follow`` to keep printing them as they finish, and ``executions get ID`` for one, whole."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from scheduler.cli.api import client_command
from scheduler.cli.columns import EXECUTION_COLUMN_SET, Column, cell, execution_columns
from scheduler.cli.common import EXECUTION_STATUSES, EXIT_OK, UsageError, positive_float, positive_int, since
from scheduler.cli.jobs import print_listing
from scheduler.cli.output import execution_row, format_execution_details, format_executions, print_data
from scheduler.cli.reading import yaml_text
from scheduler.cli.streaming import Rows
from scheduler.transport.api_models import parse_time, thaw
from scheduler.transport.api_wire import InvalidRequest

FOLLOW_PAGE = 100
# --follow keeps in view at most FOLLOW_TRACKED executions it saw running (the oldest started
# are let go beyond), and reads those that left the newest page again with at most
# FOLLOW_LOOKUPS requests a poll, in turn.
FOLLOW_TRACKED = 1000
FOLLOW_LOOKUPS = 10


def _fetch(args: argparse.Namespace, client: Any) -> tuple[Callable[..., dict[str, Any]], dict[str, Any], bool]:
    """The listing call, its filters, and whether rows come from several jobs."""
    if args.job:
        job_id = client.resolve_job_id(args.job)
        filters = {"status": args.status, "limit": args.limit}
        return (lambda **kw: client.list_executions(job_id, **kw)), filters, False
    job_id = client.resolve_job_id(args.job_filter) if args.job_filter else None
    filters = {"status": args.status, "since": args.since, "job_id": job_id, "limit": args.limit}
    return client.list_all_executions, filters, True


def _stream_line(cells: list[str], columns: list[Column]) -> str:
    """One line of a streamed table: each column at its fixed width, so lines align without
    knowing the rows to come (a longer cell pushes the rest of its line only)."""
    padded = [text.ljust(max(column.width, len(column.header))) for text, column in zip(cells, columns)]
    return "  ".join(padded[:-1] + [cells[-1]]).rstrip()


def _print_one(execution: dict[str, Any], output: str, wide: bool, columns: list[Column], out: TextIO) -> None:
    if output == "table":
        cells = [cell(v) for v in execution_row(execution, wide=wide, columns=columns)]
        print(_stream_line(cells, columns), file=out, flush=True)
    elif output == "yaml":  # one YAML document each
        print("---\n" + yaml_text(execution).rstrip(), file=out, flush=True)
    else:  # one JSON document per line
        print(json.dumps(execution, ensure_ascii=False), file=out, flush=True)


def _started(execution: dict[str, Any]) -> float:
    """When an execution started, as a number to order by (0 when unknown)."""
    try:
        started = parse_time(execution.get("started_at"))
    except (TypeError, ValueError):
        return 0.0
    return started.timestamp() if started else 0.0


class _Running:
    """The executions ``follow`` saw running and has not printed. One that left the newest page
    (a hundred newer ones started meanwhile) is read again on its own, ``GET /v1/executions`` of
    its job since its start (its own start the oldest there): the cursor of the page that held
    it is kept, so later reads take one request, and a walk cut by the poll's budget resumes."""

    def __init__(self, listing: Callable[..., dict[str, Any]]):
        self.listing = listing
        self.rows: dict[str, dict[str, Any]] = {}  # in the order they are read again
        self.cursors: dict[str, str | None] = {}

    def saw(self, page: list[dict[str, Any]]) -> None:
        """Note a page's rows: the running ones kept (or refreshed), the others let go."""
        for row in page:
            key = str(row.get("id"))
            if row.get("status") == "running" and row.get("job_id") and row.get("started_at"):
                self.rows[key] = row  # a new one at the back of the line, one kept in its place
            else:
                self.rows.pop(key, None)
                self.cursors.pop(key, None)
        while len(self.rows) > FOLLOW_TRACKED:
            oldest = min(self.rows, key=lambda k: _started(self.rows[k]))
            del self.rows[oldest]
            self.cursors.pop(oldest, None)

    def settled(self, on_running: set[str], page: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Under a status filter: those that left the page of running executions (``on_running``)
        and ended with that status before the filtered ``page``'s oldest (past its reach: a
        hundred newer ones of that status started since), read again as :meth:`ended` reads. One
        within the page's reach is let go unread: it is on the page if it ended with that status."""
        on_page = {str(e.get("id")) for e in page}
        oldest = min((_started(e) for e in page), default=0.0) if len(page) >= FOLLOW_PAGE else None
        for key in [k for k in self.rows if k not in on_running]:
            if key in on_page or oldest is None or _started(self.rows[key]) >= oldest:
                del self.rows[key]
                self.cursors.pop(key, None)
        return self.ended(on_running)

    def ended(self, on_page: set[str]) -> list[dict[str, Any]]:
        """Those that left the page and have ended since (oldest first), read with at most
        ``FOLLOW_LOOKUPS`` requests; one read still running goes to the back of the line, one
        not found (its job deleted) is let go."""
        ended, budget = [], FOLLOW_LOOKUPS
        for key in [k for k in self.rows if k not in on_page]:
            if budget <= 0:
                break
            row = self.rows.pop(key)
            found, budget = self._read(key, row, budget)
            if found is None:
                self.cursors.pop(key, None)
            elif found.get("status") == "running":
                self.rows[key] = found
            else:
                self.cursors.pop(key, None)
                ended.append(found)
        return sorted(ended, key=_started)

    def _read(self, key: str, row: dict[str, Any], budget: int) -> tuple[dict[str, Any] | None, int]:
        """The execution as it is now (None when the listing has it no more), and the budget
        left; ``row`` as it was when the budget ran out first."""
        query = {"job_id": row.get("job_id"), "since": row.get("started_at"), "limit": FOLLOW_PAGE}
        cursor = self.cursors.get(key)
        while budget > 0:
            budget -= 1
            try:
                page = self.listing(**query, cursor=cursor)
            except InvalidRequest as exc:
                if cursor is None or exc.field != "cursor":
                    raise
                cursor = self.cursors[key] = None  # refused (another container's key, say): from the start
                continue
            for item in page.get("executions") or []:
                if str(item.get("id")) == key:
                    self.cursors[key] = cursor
                    return item, budget
            cursor = self.cursors[key] = page.get("next_cursor")
            if not cursor:
                return None, budget
        return row, budget


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
    from_start: bool = False,
    backlog: int | None = None,
    columns: list[Column] | None = None,
    lookup: Callable[..., dict[str, Any]] | None = None,
) -> int:
    """Print the executions that finish from now on, oldest first, polling every ``interval``
    seconds until ``stop`` is set (or Ctrl-C). Those finished before the start are left out,
    unless ``from_start`` (the newest page's, then, or its newest ``backlog``: ``--limit``). A
    table's columns keep fixed widths.

    A poll reads the newest page (``FOLLOW_PAGE`` rows): more executions than that finishing
    between two polls would be missed, so keep ``interval`` short for busy owners. One a poll
    saw running is printed when it ends even after it left that page: read again through
    ``lookup`` (``GET /v1/executions``). Under a status filter, the running executions are seen
    on a page of their own, read first (one that ends after it is still running there), and
    only those that ended beyond the filtered page's reach are read again."""
    stop = stop or threading.Event()
    out = out or sys.stdout
    columns = columns or execution_columns(None, job_column=job_column)
    seen: set[str] = set()
    running = _Running(lookup) if lookup is not None else None
    status = filters.get("status")
    if output == "table":
        print(_stream_line([c.header for c in columns], columns), file=out, flush=True)
    query = {**filters, "limit": FOLLOW_PAGE, "status": filters.get("status")}
    first = True
    try:
        while True:
            in_flight = _running_page(fetch, query) if running is not None and status else None
            rows = list(reversed(fetch(**query, cursor=None).get("executions") or []))
            finished = [e for e in rows if e.get("status") != "running"]
            if first and backlog:  # --from-start --limit N: the newest N of those finished before
                seen.update(str(execution.get("id")) for execution in finished[:-backlog])
                finished = finished[-backlog:]
            if running is not None and in_flight is not None:
                running.saw(in_flight)
                ended = running.settled({str(e.get("id")) for e in in_flight}, rows)
                finished = [e for e in ended if e.get("status") == status] + finished
            elif running is not None:  # those that left the page ended before those on it started
                running.saw(rows)
                finished = running.ended({str(e.get("id")) for e in rows}) + finished
            for execution in finished:
                if str(execution.get("id")) in seen:
                    continue
                seen.add(str(execution.get("id")))
                if from_start or not first:
                    _print_one(execution, output, wide, columns, out)
            first = False
            if stop.wait(interval):
                return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK


def _running_page(fetch: Callable[..., dict[str, Any]], query: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest page of running executions under ``query``'s other filters."""
    return list(fetch(**{**query, "status": "running"}, cursor=None).get("executions") or [])


def execution_get(args: argparse.Namespace, client: Any) -> int:
    """``executions get ID``: one execution, whole (found by walking the caller's executions)."""
    if not args.execution_id:
        raise UsageError("executions get needs an execution ID (the executions of a job named get: --job get)")
    job = args.job_filter
    found = thaw(client.executions.get(args.execution_id, job=job, since=args.since).raw)
    if not print_data(args.output, found):
        print(format_execution_details(found))
    return EXIT_OK


@client_command
def executions(args: argparse.Namespace, client: Any) -> int:
    """``scheduler executions``, and ``scheduler executions get ID``."""
    if args.job == "get":
        return execution_get(args, client)
    if args.execution_id:
        raise UsageError(f"unexpected argument {args.execution_id!r} (one JOB; executions get ID shows one execution)")
    fetch, filters, across = _fetch(args, client)
    columns = execution_columns(args.columns, job_column=across)
    if args.follow:
        return follow(
            fetch,
            {k: v for k, v in filters.items() if k != "limit"},
            output=args.output,
            wide=args.wide,
            job_column=across,
            interval=args.interval,
            from_start=args.from_start,
            backlog=args.limit,
            columns=columns,
            lookup=client.list_all_executions,
        )
    return print_listing(
        args,
        "executions",
        (
            lambda rows: format_executions(rows, wide=args.wide, columns=columns),
            Rows([c.header for c in columns], lambda e: execution_row(e, wide=args.wide, columns=columns)),
        ),
        lambda: fetch(cursor=args.cursor, **filters),
        lambda: client.pages(fetch, {**filters, "cursor": args.cursor}),
    )


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler executions``."""
    parser = subparser(
        sub,
        "executions",
        "list executions: a job's, or across all your jobs (newest first); executions get ID: one, whole",
    )
    parser.add_argument(
        "job", metavar="JOB", nargs="?", help="job id or name (default: across all jobs); or get, then an execution ID"
    )
    parser.add_argument("execution_id", metavar="ID", nargs="?", help="executions get ID: the execution to show")
    parser.add_argument("--job", dest="job_filter", metavar="JOB", help="across jobs, only this job's (id or name)")
    parser.add_argument("--status", choices=EXECUTION_STATUSES, help="only executions with this status")
    parser.add_argument(
        "--since",
        type=since,
        metavar="WHEN",
        help="across jobs: only executions started at or after this instant: RFC 3339, or a time ago (10m, 2h, 1d)",
    )
    parser.add_argument("--limit", type=positive_int, metavar="N", help="page size")
    parser.add_argument("--cursor", help="the next_cursor of the previous page")
    parser.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    parser.add_argument("--wide", action="store_true", help="print whole errors, not their first 60 characters")
    parser.add_argument(
        "--columns",
        metavar="COLS",
        help=f"the columns to show, comma-separated: {', '.join(EXECUTION_COLUMN_SET)}",
    )
    parser.add_argument(
        "--follow",
        "-F",
        action="store_true",
        help="keep printing executions as they finish from now on (polls the API) until Ctrl-C",
    )
    parser.add_argument(
        "--from-start",
        action="store_true",
        help="--follow: print the newest page of those finished before too (its newest N with --limit N), then follow",
    )
    parser.add_argument(
        "--interval",
        type=positive_float,
        default=2.0,
        metavar="SECONDS",
        help="--follow: seconds between polls (default: 2)",
    )
    parser.set_defaults(func=executions)
