"""``scheduler local`` and ``scheduler migrate``: the commands that run the scheduler itself
rather than call its API."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli.common import EXIT_API_ERROR, CommandFailed, UsageError, port, runner_count


def local_options(args: argparse.Namespace) -> Any:
    """The typed options of ``scheduler local`` from its flags."""
    from scheduler.local.runtime import LocalOptions

    return LocalOptions(
        host=args.host,
        port=args.port,
        database_url=args.database_url,
        data_dir=args.data_dir,
        auth=args.auth,
        credentials_file=args.credentials,
        precision=args.precision,
        runners=args.runners,
        guard_targets=args.guard_targets,
        # ``scheduler --region R local``: the client option before the command says it too
        region=args.local_region or getattr(args, "region", None) or "us-east-1",
        allow_unauthenticated=args.allow_unauthenticated,
    )


def run_local(args: argparse.Namespace) -> int:
    """``scheduler local``: ``scheduler.local.runtime.serve`` with the options of the flags."""
    from scheduler.local.runtime import LocalError, OptionError, serve

    try:
        return serve(local_options(args))
    except OptionError as exc:
        raise UsageError(str(exc)) from None
    except LocalError as exc:
        raise CommandFailed(str(exc)) from None


def run_migrate(args: argparse.Namespace) -> int:
    """``scheduler migrate``: apply the migrations to ``--database-url`` (else the environment's)."""
    from scheduler.core import constants as c
    from scheduler.local.runtime import LocalError, OptionError, migrate_or_explain, resolve_database_url
    from scheduler.store.migrations import migrate

    try:
        url, _ = resolve_database_url(args.database_url)
    except OptionError as exc:
        raise UsageError(str(exc)) from None
    if not url:
        raise UsageError(f"give --database-url or set {c.ENV_DATABASE_URL} (or DATABASE_URL)")
    try:
        applied = migrate_or_explain(migrate, url)
    except LocalError as exc:
        raise CommandFailed(str(exc), EXIT_API_ERROR) from None
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(f'{v:04d}' for v in applied)}" if applied else ""))
    return 0


def add_parsers(sub: Any) -> None:
    """``scheduler local`` and ``scheduler migrate``."""
    local = sub.add_parser(
        "local",
        help="run the API and the runner in one process",
        description="Run the API and the runner in one process (Ctrl-C stops it).",
    )
    local.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    local.add_argument("--port", type=port, default=8080, help="port to listen on (default: 8080; 0: any free port)")
    local.add_argument(
        "--database-url",
        metavar="URL",
        help="Postgres URL (default: $SCHEDULER_DATABASE_URL, else $DATABASE_URL, else an embedded Postgres)",
    )
    local.add_argument(
        "--data-dir",
        default=".scheduler",
        metavar="DIR",
        help="embedded Postgres data and the local secret key (default: .scheduler)",
    )
    local.add_argument(
        "--auth",
        choices=("none", "sigv4"),
        default=None,
        help="none: unsigned, every caller is the local principal; sigv4: verify SigV4 signatures "
        "against --credentials (default: sigv4 when --credentials is given, else none)",
    )
    local.add_argument(
        "--credentials",
        metavar="FILE",
        help="access keys and their principals, for --auth sigv4, which it implies (JSON or INI; docs/cli.md)",
    )
    local.add_argument(
        "--region",
        dest="local_region",
        default=None,
        metavar="REGION",
        help="--auth sigv4: the region signatures must be made for (default: us-east-1)",
    )
    local.add_argument(
        "--precision",
        choices=("second", "minute"),
        default=None,
        help="fan-out precision (default: $SCHEDULER_PRECISION, else second)",
    )
    local.add_argument(
        "--runners",
        type=runner_count,
        default=1,
        metavar="N",
        help="runner processes claiming and delivering jobs (default: 1; one delivers several thousand "
        "jobs a second to a fast target on one core: use more for bursts on a multi-core machine; 0: "
        "the API and the alerts only, another process runs the jobs)",
    )
    local.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve --auth none on a --host other than loopback (refused without it: whoever reaches "
        "the API could make this machine call its network)",
    )
    local.add_argument(
        "--guard-targets",
        action="store_true",
        help="switch the SSRF guard on: refuse private and loopback targets, as a deployment "
        "does (default: allowed in local mode)",
    )
    local.set_defaults(func=run_local)

    migrate = sub.add_parser(
        "migrate", help="apply the database migrations", description="Apply the database migrations."
    )
    migrate.add_argument(
        "--database-url",
        metavar="URL",
        help="Postgres connection URL (default: $SCHEDULER_DATABASE_URL, else $DATABASE_URL)",
    )
    migrate.set_defaults(func=run_migrate)
