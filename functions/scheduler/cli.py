"""The ``scheduler`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def _migrate(args: argparse.Namespace) -> int:
    from scheduler.migrations import migrate

    url = args.database_url or os.environ.get("DATABASE_URL")
    if not url:
        print("scheduler migrate: give --database-url or set DATABASE_URL", file=sys.stderr)
        return 2
    applied = migrate(url)
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(f'{v:04d}' for v in applied)}" if applied else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="scheduler", description="A distributed job scheduler.")
    sub = parser.add_subparsers(dest="command", required=True)
    migrate = sub.add_parser("migrate", help="apply the database migrations")
    migrate.add_argument("--database-url", help="Postgres connection URL (default: $DATABASE_URL)")
    migrate.set_defaults(func=_migrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``scheduler`` console script."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
