"""``scheduler jobs create|list|get|update|delete|pause|resume|run``: a client of the API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.aws_flags import check_stdin_once
from scheduler.cli.columns import JOB_COLUMN_SET, JOB_DEFAULT, choose
from scheduler.cli.common import (
    EXIT_OK,
    JOB_STATES,
    UsageError,
    add_header_env_flag,
    add_if_match_flag,
    non_empty,
    positive_int,
    since,
    until,
)
from scheduler.cli.definitions import (
    add_definition_options,
    add_limits_options,
    full_definition,
    name_value,
    needs_stored_target,
    patch_definition,
)
from scheduler.cli.hints import check_complete
from scheduler.cli.manifests import with_secret_references
from scheduler.cli.output import (
    CHANGE_ROWS,
    format_changes,
    format_job_details,
    format_jobs,
    job_row,
    print_data,
    require_yaml,
)
from scheduler.cli.reading import READ_ONLY_FIELDS, read_definition
from scheduler.cli.streaming import Rows, emit, listing_pieces


def show_job(args: argparse.Namespace, job: dict[str, Any], details: bool = False) -> None:
    """A job as ``-o`` asks: JSON, YAML, a table row or (``details``) field by field."""
    if not print_data(args.output, job):
        print(format_job_details(job) if details else format_jobs([job]))


def print_listing(
    args: argparse.Namespace,
    key: str,
    table: tuple[Callable[[list[dict[str, Any]]], str], Rows],
    one_page: Callable[[], dict[str, Any]],
    every_page: Callable[[], Iterable[dict[str, Any]]],
) -> int:
    """Print a listing: one page, or with ``--all`` every page as one, printed as the pages
    arrive (``streaming``); the API's JSON (or YAML) with ``-o``, else a table (``table``: the
    table of a list, and the headers and cells a streamed one is made of) and, on stderr, how
    to get the next page."""
    format_rows, rows = table
    if args.all:
        if args.output == "yaml":
            require_yaml()
        emit(listing_pieces(args.output, key, every_page(), rows, format_rows([])))
        return EXIT_OK
    page = one_page()
    if print_data(args.output, page):
        return EXIT_OK
    print(format_rows(page.get(key) or []))
    if page.get("next_cursor"):
        print(f"(more {key}: --all, or --cursor {page['next_cursor']})", file=sys.stderr)
    return EXIT_OK


def add_page_flags(parser: argparse.ArgumentParser) -> None:
    """``--limit``, ``--cursor`` and ``--all`` of a listing (``print_listing``)."""
    parser.add_argument("--limit", type=positive_int, metavar="N", help="page size (API default 50, max 200)")
    parser.add_argument("--cursor", help="the next_cursor of the previous page")
    parser.add_argument("--all", action="store_true", help="follow next_cursor to the last page")


@client_command
def jobs_create(args: argparse.Namespace, client: Any) -> int:
    """``jobs create``."""
    check_stdin_once(args)
    base = with_secret_references(read_definition(args.file), args.file) if args.file else {}
    spec = full_definition(base, args)
    if not spec:
        raise UsageError("give a job definition: -f FILE, or --name, --schedule/--run-at and --url")
    check_complete(spec)
    show_job(args, client.create_job(spec))
    return EXIT_OK


@client_command
def jobs_list(args: argparse.Namespace, client: Any) -> int:
    """``jobs list``."""
    filters = {"state": args.state, "tag": args.tag, "name_prefix": args.name_prefix, "limit": args.limit}
    columns = choose(args.columns, JOB_COLUMN_SET, JOB_DEFAULT)
    return print_listing(
        args,
        "jobs",
        (lambda rows: format_jobs(rows, columns), Rows([c.header for c in columns], lambda j: job_row(j, columns))),
        lambda: client.list_jobs(cursor=args.cursor, **filters),
        lambda: client.iter_job_pages(cursor=args.cursor, **filters),
    )


@client_command
def jobs_get(args: argparse.Namespace, client: Any) -> int:
    """``jobs get``: the whole job."""
    from scheduler.client import is_job_id

    job = client.get_job(args.job.lower()) if is_job_id(args.job) else client.find_job_by_name(args.job)
    show_job(args, job, details=True)
    return EXIT_OK


@client_command
def jobs_update(args: argparse.Namespace, client: Any) -> int:
    """``jobs update``: a merge patch, or ``--replace``."""
    check_stdin_once(args)
    base = with_secret_references(read_definition(args.file), args.file) if args.file else None
    job_id = client.resolve_job_id(args.job)
    if args.replace:
        if_match = args.if_match
        if base is None:  # the stored definition with the flags over it, if still at the version read
            stored = client.get_job(job_id)
            base = {k: v for k, v in stored.items() if k not in READ_ONLY_FIELDS}
            if if_match is None:
                if_match = stored.get("version")
        spec = full_definition(base, args)
        job = client.replace_job(job_id, spec, if_match=if_match)
    else:
        stored = client.get_job(job_id).get("target") if needs_stored_target(base or {}, args) else None
        patch = patch_definition(base or {}, args, stored if isinstance(stored, dict) else None)
        if not patch:
            raise UsageError("nothing to change: give -f FILE or flags such as --schedule, --url")
        job = client.patch_job(job_id, patch, if_match=args.if_match)
    show_job(args, job)
    return EXIT_OK


@client_command
def jobs_delete(args: argparse.Namespace, client: Any) -> int:
    """``jobs delete``."""
    job_id = client.resolve_job_id(args.job)
    client.delete_job(job_id, if_match=args.if_match)
    if args.output == "table":
        print(f"deleted job {job_id}" + (f" ({args.job})" if args.job.lower() != job_id else ""))
    return EXIT_OK


def _selection(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--tag`` or ``--name-prefix`` of a bulk pause or resume (None: one job, ``JOB``)."""
    chosen = {k: v for k, v in (("tag", args.tag), ("name_prefix", args.name_prefix)) if v is not None}
    if len(chosen) > 1 or (chosen and args.job) or not (chosen or args.job):
        raise UsageError(f"give a JOB, or one of --tag or --name-prefix (for the {args.action} of several jobs)")
    if chosen and args.if_match is not None:
        raise UsageError("--if-match is for one JOB (the version of that job), not with --tag or --name-prefix")
    return chosen or None


def _bulk_done(args: argparse.Namespace, answer: dict[str, Any], done: str) -> int:
    if not print_data(args.output, answer):
        print(
            f"{done} {answer.get('count', 0)} job(s)" + "".join(f"\n  {job_id}" for job_id in answer.get("jobs") or [])
        )
    return EXIT_OK


@client_command
def jobs_pause(args: argparse.Namespace, client: Any) -> int:
    """``jobs pause JOB`` (or ``--tag``/``--name-prefix``), with ``--note`` and ``--until``."""
    selection = _selection(args)
    if selection is not None:
        extra = {k: v for k, v in (("note", args.note), ("until", args.until)) if v is not None}
        return _bulk_done(args, client.pause_jobs({**selection, **extra}), "paused")
    job_id = client.resolve_job_id(args.job)
    show_job(args, client.pause_job(job_id, note=args.note, until=args.until, if_match=args.if_match))
    return EXIT_OK


@client_command
def jobs_resume(args: argparse.Namespace, client: Any) -> int:
    """``jobs resume JOB`` (or ``--tag``/``--name-prefix``)."""
    selection = _selection(args)
    if selection is not None:
        return _bulk_done(args, client.resume_jobs(selection), "resumed")
    show_job(args, client.resume_job(client.resolve_job_id(args.job), if_match=args.if_match))
    return EXIT_OK


def run_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--body``, ``--header`` and ``--var`` of ``jobs run`` as the request's overrides."""
    overrides: dict[str, Any] = {}
    if args.body is not None:
        overrides["body"] = read_definition_text(args.body)
    if args.headers:
        overrides["headers"] = dict(name_value(value, "--header") for value in args.headers)
    if args.vars:
        overrides["vars"] = dict(name_value(value, "--var") for value in args.vars)
    return overrides


@client_command
def jobs_backfill(args: argparse.Namespace, client: Any) -> int:
    """``jobs backfill JOB --start --end [--dry-run]``: run a past range's occurrences."""
    job_id = client.resolve_job_id(args.job)
    answer = client.backfill_job(job_id, args.start, args.end, dry_run=args.dry_run) or {}
    if print_data(args.output, answer):
        return EXIT_OK
    if args.dry_run:
        print("\n".join(answer.get("occurrences") or []) or "no occurrences in the range")
        print(f"{answer.get('count', 0)} occurrence(s) would run (dry run: nothing queued)", file=sys.stderr)
    else:
        print(f"queued a backfill of {answer.get('count', 0)} occurrence(s) of job {job_id} (one a second at most)")
    return EXIT_OK


def read_definition_text(value: str) -> str:
    """A ``--body``: the text, or ``@FILE`` for a file's text (``@-``: standard input)."""
    if not value.startswith("@"):
        return value
    if value == "@-":
        return sys.stdin.read()
    try:
        with open(value[1:], encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"--body {value}: {exc.strerror}") from None


@client_command
def jobs_run(args: argparse.Namespace, client: Any) -> int:
    """``jobs run``: queue a run now (with ``--body``, ``--header``, ``--var`` for that run)."""
    job_id = client.resolve_job_id(args.job)
    answer = client.run_job(job_id, run_overrides(args) or None)
    if not print_data(args.output, answer):
        answer = answer or {}
        print(
            f"queued a run of job {answer.get('job_id') or job_id}"
            + (f" (requested at {answer['requested_at']})" if answer.get("requested_at") else "")
        )
    return EXIT_OK


@client_command
def jobs_history(args: argparse.Namespace, client: Any) -> int:
    """``jobs history``: the job's change log, newest first (by id after a delete)."""
    from scheduler.client import is_job_id

    job_id = args.job.lower() if is_job_id(args.job) else client.resolve_job_id(args.job)
    return print_listing(
        args,
        "changes",
        (format_changes, CHANGE_ROWS),
        lambda: client.list_changes(job_id, limit=args.limit, cursor=args.cursor),
        lambda: client.iter_change_pages(job_id, limit=args.limit, cursor=args.cursor),
    )


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler jobs ...``."""
    jobs = sub.add_parser(
        "jobs", help="create, list, change and run jobs", description="create, list, change and run jobs"
    )
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = subparser(actions, "create", "create a job")
    add_definition_options(create)
    add_limits_options(create)
    create.set_defaults(func=jobs_create)

    listing = subparser(actions, "list", "list jobs (in name order)")
    listing.add_argument("--state", choices=JOB_STATES, help="only jobs in this state")
    listing.add_argument("--tag", help="only jobs with this tag")
    listing.add_argument("--name-prefix", metavar="PREFIX", help="only jobs whose name starts so")
    listing.add_argument("--limit", type=positive_int, metavar="N", help="page size (API default 50, max 200)")
    listing.add_argument("--cursor", help="the next_cursor of the previous page")
    listing.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    listing.add_argument(
        "--columns", metavar="COLS", help=f"the columns to show, comma-separated: {', '.join(JOB_COLUMN_SET)}"
    )
    listing.set_defaults(func=jobs_list)

    get = subparser(actions, "get", "show a job, every field")
    get.add_argument("job", metavar="JOB", type=non_empty, help="job id or name")
    get.set_defaults(func=jobs_get)

    update = subparser(actions, "update", "change a job: merge the given fields (PATCH), or --replace (PUT)")
    update.add_argument("job", metavar="JOB", type=non_empty, help="job id or name")
    update.add_argument(
        "--replace",
        action="store_true",
        help="send a full definition (PUT): the file, else the stored job, with the flags over it",
    )
    add_if_match_flag(update, "the job")
    add_definition_options(update)
    add_limits_options(update)
    update.set_defaults(func=jobs_update)

    delete = subparser(actions, "delete", "delete a job and its executions")
    delete.add_argument("job", metavar="JOB", type=non_empty, help="job id or name")
    add_if_match_flag(delete, "the job")
    delete.set_defaults(func=jobs_delete)
    _add_pause_parsers(actions, subparser)

    run = subparser(actions, "run", "run a job now, outside its schedule (optionally with overrides for that run)")
    run.add_argument("job", metavar="JOB", type=non_empty, help="job id or name")
    run.add_argument(
        "--body", metavar="TEXT|@FILE", help="the body of this run instead of the target's (@- reads stdin)"
    )
    run.add_argument(
        "--header", dest="headers", action="append", metavar="NAME=VALUE", help="a header for this run (repeatable)"
    )
    add_header_env_flag(run, "a header for this run")
    run.add_argument(
        "--var", dest="vars", action="append", metavar="NAME=VALUE", help="a {{vars.NAME}} of the body (repeatable)"
    )
    run.set_defaults(func=jobs_run)

    backfill = subparser(actions, "backfill", "run the occurrences of a past range, each as itself (at most 10,000)")
    backfill.add_argument("job", metavar="JOB", type=non_empty, help="job id or name")
    backfill.add_argument("--start", required=True, type=since, metavar="WHEN", help="RFC 3339, or a time ago (2d)")
    backfill.add_argument("--end", required=True, type=since, metavar="WHEN", help="RFC 3339, or a time ago (1h)")
    backfill.add_argument("--dry-run", action="store_true", help="list the occurrences, queue nothing")
    backfill.set_defaults(func=jobs_backfill)

    history = subparser(actions, "history", "a job's change log: who changed what, when (newest first)")
    history.add_argument("job", metavar="JOB", type=non_empty, help="job id or name (the id after a delete)")
    add_page_flags(history)
    history.set_defaults(func=jobs_history)


def _add_pause_parsers(actions: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``jobs pause`` and ``jobs resume``: one job, or the caller's jobs with a tag or a name prefix."""
    for name, help_text, func in (
        ("pause", "pause a job's schedule (or every job with --tag or --name-prefix)", jobs_pause),
        ("resume", "resume a job's schedule (or every job with --tag or --name-prefix)", jobs_resume),
    ):
        action = subparser(actions, name, help_text)
        action.add_argument("job", metavar="JOB", type=non_empty, nargs="?", help="job id or name")
        action.add_argument("--tag", help=f"{name} the active/paused jobs with this tag")
        action.add_argument("--name-prefix", metavar="PREFIX", help=f"{name} the jobs whose name starts so")
        add_if_match_flag(action, "the job")
        if name == "pause":
            action.add_argument("--note", help="why the job is paused (shown with the job)")
            action.add_argument(
                "--until",
                type=until,
                metavar="WHEN",
                help="resume by itself then: RFC 3339, or a time from now (30m, 2h, 1d)",
            )
        action.set_defaults(func=func)
