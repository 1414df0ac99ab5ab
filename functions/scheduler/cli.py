"""The ``scheduler`` command line.

- ``scheduler local``: the API and the runner in one process (``scheduler.local.serve``).
- ``scheduler migrate``: apply the database migrations.
- ``scheduler jobs create|list|get|update|delete|pause|resume|run`` and
  ``scheduler executions JOB``: a client of the HTTP API (``scheduler.client``), SigV4-signed
  when the endpoint is AWS. ``docs/cli.md`` is the reference.

Exit codes (``EXIT_*``): 0 ok; 1 the API refused the request (4xx other than below) or no AWS
credentials to sign with; 2 usage error (bad option, unreadable job file); 3 not found (404, or
no job with that name); 4 conflict (409 name taken, 412 stale ``--if-match``); 5 server error
(5xx) or the API cannot be reached.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_SERVER = 5

EXIT_CODES_HELP = """\
exit codes:
  0  ok
  1  the API refused the request (4xx other than below), or no AWS credentials to sign with
  2  usage error (bad option, unreadable job file)
  3  not found (404, or no job with that name)
  4  conflict (409: name taken; 412: --if-match version is stale)
  5  server error (5xx), or the API cannot be reached
"""

JOB_STATES = ("active", "paused", "completed")
EXECUTION_STATUSES = ("running", "succeeded", "failed", "timed_out", "lost")
# Fields of a job answer that are not part of its definition: dropped from job files, so that
# the output of `jobs get --json` can be edited and sent back.
READ_ONLY_FIELDS = ("id", "owner", "state", "version", "next_run_at", "last_run_at", "created_at",
                    "updated_at", "stats")
ERROR_WIDTH = 60


class UsageError(Exception):
    """A mistake in the command line or its input: exit 2."""


# -- migrate and local -------------------------------------------------------------------------


def _migrate(args: argparse.Namespace) -> int:
    from scheduler.migrations import migrate

    url = args.database_url or os.environ.get("DATABASE_URL")
    if not url:
        print("scheduler migrate: give --database-url or set DATABASE_URL", file=sys.stderr)
        return 2
    applied = migrate(url)
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(f'{v:04d}' for v in applied)}" if applied else ""))
    return 0


def _local(args: argparse.Namespace) -> int:
    """``scheduler local``: implemented by ``scheduler.local.serve``."""
    from scheduler.local import serve

    return serve(args)


# -- output ------------------------------------------------------------------------------------


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    return " ".join(str(value).split())


def truncate(text: Any, width: int = ERROR_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters (``...`` marks a cut)."""
    cell = _cell(text)
    return cell if len(cell) <= width else cell[: width - 3] + "..."


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain text table: left-aligned columns two spaces apart, ``-`` for empty cells."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


JOB_COLUMNS = ("ID", "NAME", "STATE", "SCHEDULE", "NEXT RUN", "LAST STATUS")
EXECUTION_COLUMNS = ("ID", "SCHEDULED AT", "ATTEMPT", "TRIGGER", "STATUS", "HTTP", "DURATION MS", "ERROR")


def job_row(job: dict[str, Any]) -> list[Any]:
    """A job's cells: id, name, state, schedule (or run_at), next_run_at, last_status."""
    stats = job.get("stats") or {}
    return [job.get("id"), job.get("name"), job.get("state"), job.get("schedule") or job.get("run_at"),
            job.get("next_run_at"), stats.get("last_status")]


def execution_row(execution: dict[str, Any]) -> list[Any]:
    """An execution's cells, its error cut to one short line."""
    return [execution.get("id"), execution.get("scheduled_at"), execution.get("attempt"),
            execution.get("trigger"), execution.get("status"), execution.get("http_status"),
            execution.get("duration_ms"), truncate(execution.get("error"))]


def format_jobs(jobs: list[dict[str, Any]]) -> str:
    """The table of jobs."""
    return format_table(JOB_COLUMNS, (job_row(j) for j in jobs)) if jobs else "no jobs"


def format_executions(executions: list[dict[str, Any]]) -> str:
    """The table of executions."""
    return format_table(EXECUTION_COLUMNS, (execution_row(e) for e in executions)) if executions else "no executions"


def _target_summary(target: dict[str, Any]) -> str:
    if target.get("type") == "amqp":
        parts = [f"amqp exchange={target.get('exchange') or '(default)'}",
                 f"routing_key={target.get('routing_key') or ''}"]
        if target.get("url"):
            parts.append(f"broker={target['url']}")
        return " ".join(parts)
    return f"{target.get('method') or 'POST'} {target.get('url') or '-'}"


def format_job_details(job: dict[str, Any]) -> str:
    """One job, field by field (``jobs get``)."""
    stats = job.get("stats") or {}
    retry = job.get("retry") or {}
    when = (f"{job['schedule']} ({job.get('timezone') or 'UTC'})" if job.get("schedule")
            else f"once at {job.get('run_at')}")
    rows: list[tuple[str, Any]] = [
        ("id", job.get("id")),
        ("name", job.get("name")),
        ("description", job.get("description")),
        ("state", f"{job.get('state')} (version {job.get('version')})"),
        ("schedule", when),
        ("start at", job.get("start_at")),
        ("end at", job.get("end_at")),
        ("next run", job.get("next_run_at")),
        ("last run", job.get("last_run_at")),
        ("last status", stats.get("last_status")),
        ("last error", stats.get("last_error")),
        ("runs", f"{stats.get('run_count', 0)} ({stats.get('failure_count', 0)} failed)"),
        ("target", _target_summary(job.get("target") or {})),
        ("retry", f"up to {retry.get('max_attempts', '-')} attempts" if retry else None),
        ("missed runs", job.get("missed_runs")),
        ("tags", ", ".join(job.get("tags") or [])),
        ("created", job.get("created_at")),
        ("updated", job.get("updated_at")),
    ]
    width = max(len(k) for k, _ in rows) + 1
    return "\n".join(f"{(k + ':').ljust(width)}  {_cell(v)}" for k, v in rows)


def print_api_error(exc: Any, stream: Any = None) -> None:
    """``error: 400 bad_request: <message>``, then one ``  field: message`` line per detail."""
    stream = stream or sys.stderr
    print(f"error: {exc.status} {exc.code}: {exc.message}", file=stream)
    for detail in exc.details:
        field, message = detail.get("field"), detail.get("message")
        print(f"  {field}: {message}" if field else f"  {message}", file=stream)


def exit_code_for_status(status: int) -> int:
    """The exit code of an API error status (see ``EXIT_CODES_HELP``)."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (409, 412):
        return EXIT_CONFLICT
    if status >= 500:
        return EXIT_SERVER
    return EXIT_API_ERROR


# -- job definitions ---------------------------------------------------------------------------


def _yaml_loader() -> Any:
    """PyYAML's safe loader without implicit timestamps: ``run_at: 2026-12-01T10:00:00Z`` stays
    the string it was written as."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


def parse_definition(text: str, source: str = "-") -> dict[str, Any]:
    """A job definition from JSON or YAML text (JSON when it is valid JSON or the file ends in
    ``.json``); it must be a mapping."""
    data: Any
    stripped = text.strip()
    if source.lower().endswith(".json") or stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if source.lower().endswith(".json"):
                raise UsageError(f"{source}: not valid JSON: {exc}") from None
            data = _parse_yaml(text, source)
    else:
        data = _parse_yaml(text, source)
    if data is None:
        raise UsageError(f"{source}: empty job definition")
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a job definition must be a mapping (JSON object), not {type(data).__name__}")
    return {k: v for k, v in data.items() if k not in READ_ONLY_FIELDS}


def _parse_yaml(text: str, source: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise UsageError(f"{source}: YAML needs PyYAML (pip install pyyaml); JSON works without it") from None
    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise UsageError(f"{source}: not valid YAML or JSON: {' '.join(str(exc).split())}") from None


def read_definition(path: str) -> dict[str, Any]:
    """The job definition in a file (``-``: standard input)."""
    if path == "-":
        return parse_definition(sys.stdin.read(), "<stdin>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    return parse_definition(text, path)


def _parse_header(value: str) -> tuple[str, str]:
    name, sep, val = value.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"--header takes NAME=VALUE, not {value!r}")
    return name.strip(), val


def definition_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The part of a job definition given by flags, nested as in the job JSON."""
    out: dict[str, Any] = {}
    for flag, key in (("name", "name"), ("description", "description"), ("schedule", "schedule"),
                      ("run_at", "run_at"), ("timezone", "timezone"), ("start_at", "start_at"),
                      ("end_at", "end_at"), ("missed_runs", "missed_runs")):
        value = getattr(args, flag, None)
        if value is not None:
            out[key] = value
    if getattr(args, "tags", None):
        out["tags"] = list(args.tags)
    target: dict[str, Any] = {}
    for flag, key in (("url", "url"), ("method", "method"), ("body", "body"),
                      ("amqp_exchange", "exchange"), ("routing_key", "routing_key")):
        value = getattr(args, flag, None)
        if value is not None:
            target[key] = value.upper() if key == "method" else value
    if getattr(args, "headers", None):
        target["headers"] = dict(_parse_header(h) for h in args.headers)
    if target:
        out["target"] = target
    if getattr(args, "max_attempts", None) is not None:
        out["retry"] = {"max_attempts": args.max_attempts}
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _amqp_flags(args: argparse.Namespace) -> bool:
    return getattr(args, "amqp_exchange", None) is not None or getattr(args, "routing_key", None) is not None


def full_definition(base: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """A complete definition (create, ``update --replace``): the flags over ``base``.

    ``--schedule`` drops a ``run_at`` of the file and the other way round; the target's type is
    ``amqp`` with ``--amqp-exchange``/``--routing-key``, else the file's, else ``http``.
    """
    flags = definition_flags(args)
    spec = deep_merge(base, flags)
    if "schedule" in flags:
        spec.pop("run_at", None)
    if "run_at" in flags:
        spec.pop("schedule", None)
    if isinstance(spec.get("target"), dict):
        target = spec["target"] = dict(spec["target"])
        if _amqp_flags(args):
            target["type"] = "amqp"
        elif "type" not in target:
            target["type"] = "amqp" if ("exchange" in target or "routing_key" in target) else "http"
    return spec


def patch_definition(base: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """A JSON merge patch (``update`` without ``--replace``): the flags over the file's patch.

    ``--schedule`` sends ``"run_at": null`` (and ``--run-at`` ``"schedule": null``) so that a job
    can switch between recurring and one-off; the AMQP flags set ``target.type`` to ``amqp`` and
    ``--method`` sets it to ``http``.
    """
    flags = definition_flags(args)
    patch = deep_merge(base, flags)
    if "schedule" in flags:
        patch["run_at"] = None
    if "run_at" in flags:
        patch["schedule"] = None
    target = flags.get("target") or {}
    if _amqp_flags(args):
        patch["target"]["type"] = "amqp"
    elif "method" in target:
        patch["target"]["type"] = "http"
    return patch


# -- client commands ---------------------------------------------------------------------------


def make_client(args: argparse.Namespace) -> Any:
    """The API client of the global options."""
    from scheduler.client import SchedulerClient

    logging.getLogger("botocore").setLevel(logging.WARNING)  # not "Found credentials in ..." on every call
    try:
        return SchedulerClient(args.endpoint, region=args.region, profile=args.profile, sigv4=args.sigv4,
                               timeout=args.timeout)
    except ValueError as exc:
        raise UsageError(f"--endpoint: {exc}") from None


def client_command(func: Callable[[argparse.Namespace, Any], int]) -> Callable[[argparse.Namespace], int]:
    """Run a client command: the API's errors become messages on stderr and exit codes."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        from scheduler.client import ApiError, ConnectionFailed, JobNotFound, NoCredentials

        try:
            return func(args, make_client(args))
        except ApiError as exc:
            print_api_error(exc)
            return exit_code_for_status(exc.status)
        except JobNotFound as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
        except ConnectionFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_SERVER
        except NoCredentials as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_API_ERROR
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130

    return run


def _show_job(args: argparse.Namespace, job: dict[str, Any], details: bool = False) -> None:
    if args.json:
        _print_json(job)
    else:
        print(format_job_details(job) if details else format_jobs([job]))


@client_command
def _jobs_create(args: argparse.Namespace, client: Any) -> int:
    base = read_definition(args.file) if args.file else {}
    spec = full_definition(base, args)
    if not spec:
        raise UsageError("give a job definition: -f FILE, or --name, --schedule/--run-at and --url")
    _show_job(args, client.create_job(spec))
    return EXIT_OK


def _print_listing(args: argparse.Namespace, key: str, format_rows: Callable[[list[dict[str, Any]]], str],
                   one_page: Callable[[], dict[str, Any]], every_page: Callable[[], Iterable[dict[str, Any]]]) -> int:
    """Print a listing: one page, or with ``--all`` every page as one; the API's JSON with
    ``--json``, else a table (and, on stderr, how to get the next page)."""
    if args.all:
        page = {key: [row for each in every_page() for row in each.get(key) or []], "next_cursor": None}
    else:
        page = one_page()
    if args.json:
        _print_json(page)
        return EXIT_OK
    print(format_rows(page.get(key) or []))
    if page.get("next_cursor"):
        print(f"(more {key}: --all, or --cursor {page['next_cursor']})", file=sys.stderr)
    return EXIT_OK


@client_command
def _jobs_list(args: argparse.Namespace, client: Any) -> int:
    filters = {"state": args.state, "tag": args.tag, "name_prefix": args.name_prefix, "limit": args.limit}
    return _print_listing(args, "jobs", format_jobs, lambda: client.list_jobs(cursor=args.cursor, **filters),
                          lambda: client.iter_job_pages(cursor=args.cursor, **filters))


@client_command
def _jobs_get(args: argparse.Namespace, client: Any) -> int:
    from scheduler.client import is_job_id

    job = client.get_job(args.job.lower()) if is_job_id(args.job) else client.find_job_by_name(args.job)
    _show_job(args, job, details=True)
    return EXIT_OK


@client_command
def _jobs_update(args: argparse.Namespace, client: Any) -> int:
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
        patch = patch_definition(base or {}, args)
        if not patch:
            raise UsageError("nothing to change: give -f FILE or flags such as --schedule, --url")
        job = client.patch_job(job_id, patch, if_match=args.if_match)
    _show_job(args, job)
    return EXIT_OK


@client_command
def _jobs_delete(args: argparse.Namespace, client: Any) -> int:
    job_id = client.resolve_job_id(args.job)
    client.delete_job(job_id)
    if not args.json:
        print(f"deleted job {job_id}" + (f" ({args.job})" if args.job.lower() != job_id else ""))
    return EXIT_OK


@client_command
def _jobs_pause(args: argparse.Namespace, client: Any) -> int:
    _show_job(args, client.pause_job(client.resolve_job_id(args.job)))
    return EXIT_OK


@client_command
def _jobs_resume(args: argparse.Namespace, client: Any) -> int:
    _show_job(args, client.resume_job(client.resolve_job_id(args.job)))
    return EXIT_OK


@client_command
def _jobs_run(args: argparse.Namespace, client: Any) -> int:
    job_id = client.resolve_job_id(args.job)
    answer = client.run_job(job_id)
    if args.json:
        _print_json(answer)
    else:
        answer = answer or {}
        print(f"queued a run of job {answer.get('job_id') or job_id}"
              + (f" (requested at {answer['requested_at']})" if answer.get("requested_at") else ""))
    return EXIT_OK


@client_command
def _executions(args: argparse.Namespace, client: Any) -> int:
    job_id = client.resolve_job_id(args.job)
    filters = {"status": args.status, "limit": args.limit}
    return _print_listing(args, "executions", format_executions,
                          lambda: client.list_executions(job_id, cursor=args.cursor, **filters),
                          lambda: client.iter_execution_pages(job_id, cursor=args.cursor, **filters))


# -- parser ------------------------------------------------------------------------------------


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _port(text: str) -> int:
    """A TCP port; 0 asks for any free one (the banner shows which)."""
    value = _whole_number(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _add_client_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The API client's options: on the top-level parser (with their defaults) and again on each
    client subcommand (without defaults, so that ``scheduler jobs list --json`` works as well as
    ``scheduler --json jobs list``)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("API client options")
    group.add_argument("--endpoint", metavar="URL", default=default(None),
                       help="the API's base URL, with its stage if any (default: $SCHEDULER_ENDPOINT, "
                            "else http://127.0.0.1:8080)")
    group.add_argument("--region", default=default(None),
                       help="the SigV4 signing region (default: from an execute-api host name, else "
                            "$AWS_REGION, else the AWS config)")
    group.add_argument("--profile", default=default(None), help="the AWS profile to sign with (default: $AWS_PROFILE)")
    group.add_argument("--sigv4", action=argparse.BooleanOptionalAction, default=default(None),
                       help="sign requests with SigV4 (default: only when the endpoint is *.amazonaws.com)")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="print the API's JSON as is, for scripts")
    group.add_argument("--timeout", type=_positive_float, metavar="SECONDS", default=default(30.0),
                       help="HTTP timeout (default: 30)")


def _add_definition_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("job definition (flags override the file's values)")
    group.add_argument("-f", "--file", metavar="FILE", help="a job definition in JSON or YAML (- for stdin)")
    group.add_argument("--name")
    group.add_argument("--description")
    when = group.add_mutually_exclusive_group()
    when.add_argument("--schedule", help="cron, @hourly-style macro, '@every 90s', cron(...), rate(...), at(...)")
    when.add_argument("--run-at", metavar="TIMESTAMP", help="a one-off job: RFC 3339 timestamp with offset")
    group.add_argument("--timezone", metavar="IANA_NAME", help="time zone of the schedule (default UTC)")
    group.add_argument("--start-at", metavar="TIMESTAMP", help="no occurrence before this time")
    group.add_argument("--end-at", metavar="TIMESTAMP", help="no occurrence after this time")
    group.add_argument("--missed-runs", choices=("skip", "run_once", "run_all"))
    group.add_argument("--url", help="HTTP target URL (or the AMQP broker URL of an AMQP target)")
    group.add_argument("--method", type=str.upper, choices=("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"),
                       help="HTTP method (default POST)")
    group.add_argument("--header", dest="headers", action="append", metavar="NAME=VALUE",
                       help="a target header (repeatable)")
    group.add_argument("--body", help="the target body ({{scheduled_at}}-style placeholders are replaced)")
    group.add_argument("--tag", dest="tags", action="append", metavar="TAG", help="a tag (repeatable)")
    group.add_argument("--amqp-exchange", metavar="EXCHANGE", help="AMQP target: the exchange")
    group.add_argument("--routing-key", metavar="KEY", help="AMQP target: the routing key")
    group.add_argument("--max-attempts", type=_positive_int, metavar="N", help="attempts per occurrence")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="scheduler", description="A distributed job scheduler.",
                                     epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_client_options(parser, suppress=False)
    client_options = argparse.ArgumentParser(add_help=False)
    _add_client_options(client_options, suppress=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def subparser(container: Any, name: str, help_text: str, *, client: bool = True) -> argparse.ArgumentParser:
        return container.add_parser(name, help=help_text, description=help_text,
                                    parents=[client_options] if client else [],
                                    epilog=EXIT_CODES_HELP if client else None,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)

    local = sub.add_parser("local", help="run the API and the runner in one process")
    local.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    local.add_argument("--port", type=_port, default=8080, help="port to listen on (default: 8080; 0: any free port)")
    local.add_argument("--database-url", help="Postgres URL (default: $DATABASE_URL, else an embedded Postgres)")
    local.add_argument("--data-dir", default=".scheduler", help="embedded Postgres data (default: .scheduler)")
    local.add_argument("--auth", choices=("none", "sigv4"), default="none",
                       help="none: every caller is the local principal; sigv4: verify SigV4 signatures "
                            "against --credentials (default: none)")
    local.add_argument("--credentials", metavar="FILE",
                       help="access keys and their principals, for --auth sigv4 (JSON or INI; docs/cli.md)")
    local.add_argument("--precision", choices=("second", "minute"), default=None,
                       help="fan-out precision (default: $SCHEDULER_PRECISION, else second)")
    local.add_argument("--runners", type=_positive_int, default=1, metavar="N",
                       help="runner processes claiming and delivering jobs (default: 1; one delivers about a "
                            "thousand jobs a second on one core: use more for bursts on a multi-core machine)")
    local.add_argument("--guard-targets", action="store_true",
                       help="refuse private, loopback and link-local targets, as the cloud deployment does")
    local.add_argument("--region", default="us-east-1",
                       help="the region SigV4 signatures must name (--auth sigv4; default: us-east-1)")
    local.set_defaults(func=_local)

    migrate = sub.add_parser("migrate", help="apply the database migrations")
    migrate.add_argument("--database-url", help="Postgres connection URL (default: $DATABASE_URL)")
    migrate.set_defaults(func=_migrate)

    jobs = sub.add_parser("jobs", help="create, list, change and run jobs")
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = subparser(actions, "create", "create a job")
    _add_definition_options(create)
    create.set_defaults(func=_jobs_create)

    listing = subparser(actions, "list", "list jobs (in name order)")
    listing.add_argument("--state", choices=JOB_STATES)
    listing.add_argument("--tag", help="only jobs with this tag")
    listing.add_argument("--name-prefix", metavar="PREFIX", help="only jobs whose name starts so")
    listing.add_argument("--limit", type=_positive_int, metavar="N", help="page size (API default 50, max 200)")
    listing.add_argument("--cursor", help="the next_cursor of the previous page")
    listing.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    listing.set_defaults(func=_jobs_list)

    get = subparser(actions, "get", "show a job")
    get.add_argument("job", metavar="JOB", help="job id or name")
    get.set_defaults(func=_jobs_get)

    update = subparser(actions, "update", "change a job: merge the given fields (PATCH), or --replace (PUT)")
    update.add_argument("job", metavar="JOB", help="job id or name")
    update.add_argument("--replace", action="store_true",
                        help="send a full definition (PUT): the file, else the stored job, with the flags over it")
    update.add_argument("--if-match", metavar="VERSION", help="only if the job is still at this version (else exit 4)")
    _add_definition_options(update)
    update.set_defaults(func=_jobs_update)

    for name, help_text, func in (("delete", "delete a job and its executions", _jobs_delete),
                                  ("pause", "pause a job's schedule", _jobs_pause),
                                  ("resume", "resume a job's schedule", _jobs_resume),
                                  ("run", "run a job now, outside its schedule", _jobs_run)):
        action = subparser(actions, name, help_text)
        action.add_argument("job", metavar="JOB", help="job id or name")
        action.set_defaults(func=func)

    executions = subparser(sub, "executions", "list a job's executions")
    executions.add_argument("job", metavar="JOB", help="job id or name")
    executions.add_argument("--status", choices=EXECUTION_STATUSES)
    executions.add_argument("--limit", type=_positive_int, metavar="N", help="page size")
    executions.add_argument("--cursor", help="the next_cursor of the previous page")
    executions.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    executions.set_defaults(func=_executions)
    return parser


def configure_logging(process: str | None = None) -> None:
    """Log lines to stderr at INFO, without third-party chatter; ``process`` names the process
    in each line (the extra runners of ``scheduler local``)."""
    where = f"[{process}] " if process else ""
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s {where}%(name)s: %(message)s")
    # Third-party chatter (initdb transcripts, pika's tracebacks for failures we report ourselves).
    for noisy in ("pgserver", "pika"):
        logging.getLogger(noisy).setLevel(logging.WARNING if noisy == "pgserver" else logging.CRITICAL)
    warnings.filterwarnings("ignore", module="platformdirs")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``scheduler`` console script."""
    configure_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        prog = " ".join(p for p in ("scheduler", args.command, getattr(args, "action", None)) if p)
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
