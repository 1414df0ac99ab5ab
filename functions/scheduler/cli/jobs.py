"""``scheduler jobs create|list|get|update|delete|pause|resume|run``: a client of the API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.aws_flags import check_stdin_once
from scheduler.cli.columns import JOB_COLUMN_SET, JOB_DEFAULT, choose
from scheduler.cli.common import EXIT_OK, JOB_STATES, UsageError, positive_int
from scheduler.cli.definitions import (
    READ_ONLY_FIELDS,
    add_definition_options,
    full_definition,
    needs_stored_target,
    patch_definition,
    read_definition,
)
from scheduler.cli.hints import check_complete
from scheduler.cli.output import format_changes, format_job_details, format_jobs, print_data


def show_job(args: argparse.Namespace, job: dict[str, Any], details: bool = False) -> None:
    """A job as ``-o`` asks: JSON, YAML, a table row or (``details``) field by field."""
    if not print_data(args.output, job):
        print(format_job_details(job) if details else format_jobs([job]))


def print_listing(
    args: argparse.Namespace,
    key: str,
    format_rows: Callable[[list[dict[str, Any]]], str],
    one_page: Callable[[], dict[str, Any]],
    every_page: Callable[[], Iterable[dict[str, Any]]],
) -> int:
    """Print a listing: one page, or with ``--all`` every page as one; the API's JSON (or YAML)
    with ``-o``, else a table (and, on stderr, how to get the next page)."""
    if args.all:
        page = {key: [row for each in every_page() for row in each.get(key) or []], "next_cursor": None}
    else:
        page = one_page()
    if print_data(args.output, page):
        return EXIT_OK
    print(format_rows(page.get(key) or []))
    if page.get("next_cursor"):
        print(f"(more {key}: --all, or --cursor {page['next_cursor']})", file=sys.stderr)
    return EXIT_OK


@client_command
def jobs_create(args: argparse.Namespace, client: Any) -> int:
    """``jobs create``."""
    check_stdin_once(args)
    base = read_definition(args.file) if args.file else {}
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
        lambda rows: format_jobs(rows, columns),
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
    base = read_definition(args.file) if args.file else None
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
    client.delete_job(job_id)
    if args.output == "table":
        print(f"deleted job {job_id}" + (f" ({args.job})" if args.job.lower() != job_id else ""))
    return EXIT_OK


@client_command
def jobs_pause(args: argparse.Namespace, client: Any) -> int:
    """``jobs pause``."""
    show_job(args, client.pause_job(client.resolve_job_id(args.job)))
    return EXIT_OK


@client_command
def jobs_resume(args: argparse.Namespace, client: Any) -> int:
    """``jobs resume``."""
    show_job(args, client.resume_job(client.resolve_job_id(args.job)))
    return EXIT_OK


@client_command
def jobs_run(args: argparse.Namespace, client: Any) -> int:
    """``jobs run``: queue a run now."""
    job_id = client.resolve_job_id(args.job)
    answer = client.run_job(job_id)
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
        format_changes,
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
    get.add_argument("job", metavar="JOB", help="job id or name")
    get.set_defaults(func=jobs_get)

    update = subparser(actions, "update", "change a job: merge the given fields (PATCH), or --replace (PUT)")
    update.add_argument("job", metavar="JOB", help="job id or name")
    update.add_argument(
        "--replace",
        action="store_true",
        help="send a full definition (PUT): the file, else the stored job, with the flags over it",
    )
    update.add_argument("--if-match", metavar="VERSION", help="only if the job is still at this version (else exit 4)")
    add_definition_options(update)
    update.set_defaults(func=jobs_update)

    history = subparser(actions, "history", "a job's change log: who changed what, when (newest first)")
    history.add_argument("job", metavar="JOB", help="job id or name (the id after a delete)")
    history.add_argument("--limit", type=positive_int, metavar="N", help="page size (API default 50, max 200)")
    history.add_argument("--cursor", help="the next_cursor of the previous page")
    history.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    history.set_defaults(func=jobs_history)

    for name, help_text, func in (
        ("delete", "delete a job and its executions", jobs_delete),
        ("pause", "pause a job's schedule", jobs_pause),
        ("resume", "resume a job's schedule", jobs_resume),
        ("run", "run a job now, outside its schedule", jobs_run),
    ):
        action = subparser(actions, name, help_text)
        action.add_argument("job", metavar="JOB", help="job id or name")
        action.set_defaults(func=func)
