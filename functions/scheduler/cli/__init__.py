"""The ``scheduler`` command line, one module per command group.

- ``scheduler local`` / ``scheduler migrate`` (``server``): run the scheduler itself.
- ``scheduler jobs ...`` (``jobs``), ``scheduler executions`` (``executions``),
  ``scheduler calendars ...`` (``calendars``), ``scheduler alerts`` (``alerts``),
  ``scheduler alert-rules ...`` (``alert_rules``) and
  ``scheduler preview`` (``preview``): clients of the HTTP API (``scheduler.client``),
  SigV4-signed when the endpoint is AWS.
- ``scheduler console`` (``console``), ``scheduler echo`` (``echo``), ``scheduler completion``
  (``completion``).

``docs/cli.md`` is the reference. Every failure is one line on stderr (``scheduler CMD: error:
...`` for usage and start-up errors, ``error: ...`` for the API's answers) and an exit code
(``common.EXIT_*``), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from scheduler.cli import (
    alert_rules,
    alerts,
    apply,
    calendars,
    completion,
    console,
    echo,
    executions,
    jobs,
    preview,
    server,
)
from scheduler.cli.columns import ERROR_WIDTH, truncate
from scheduler.cli.common import (
    EXIT_API_ERROR,
    EXIT_CODES_HELP,
    EXIT_CONFLICT,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SERVER,
    EXIT_USAGE,
    CommandFailed,
    UsageError,
    add_client_options,
)
from scheduler.cli.output import format_table
from scheduler.cli.reading import READ_ONLY_FIELDS, parse_definition
from scheduler.local.logs import configure_logging

__all__ = [
    "ERROR_WIDTH",
    "EXIT_API_ERROR",
    "EXIT_CONFLICT",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_SERVER",
    "EXIT_USAGE",
    "READ_ONLY_FIELDS",
    "UsageError",
    "build_parser",
    "configure_logging",
    "format_table",
    "main",
    "parse_definition",
    "truncate",
]


def version() -> str:
    """The installed package's version (``scheduler --version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("scheduler")
    except PackageNotFoundError:  # run from a checkout that was not installed
        return "0+unknown"


class Parser(argparse.ArgumentParser):
    """An argument parser whose error is two short lines, the command's usage in brief and the
    error (``usage: scheduler jobs create [options] NAME`` and ``scheduler jobs create: error:
    ...``), not the whole usage block of its options (``-h`` shows them). Its subcommands'
    parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        positionals = [action for action in self._actions if not action.option_strings]
        formatter = self._get_formatter()
        formatter.add_usage(None, positionals, [], prefix="")
        brief = " ".join(formatter.format_help().split()).removeprefix(self.prog).strip()
        usage = " ".join(part for part in (self.prog, "[options]", brief) if part)
        self.exit(EXIT_USAGE, f"usage: {usage} (see {self.prog} -h)\n{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = Parser(
        prog="scheduler",
        description="A distributed job scheduler.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"scheduler {version()}", help="print the version")
    add_client_options(parser, suppress=False)
    client_options = argparse.ArgumentParser(add_help=False)
    add_client_options(client_options, suppress=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def subparser(container: Any, name: str, help_text: str) -> argparse.ArgumentParser:
        return container.add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=[client_options],
            epilog=EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    server.add_parsers(sub)
    jobs.add_parsers(sub, subparser)
    executions.add_parsers(sub, subparser)
    alerts.add_parsers(sub, subparser)
    alert_rules.add_parsers(sub, subparser)
    preview.add_parsers(sub, subparser)
    calendars.add_parsers(sub, subparser)
    apply.add_parsers(sub, subparser)
    console.add_parsers(sub)
    echo.add_parsers(sub)
    completion.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``scheduler`` console script."""
    configure_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.root_parser = parser
    prog = " ".join(p for p in ("scheduler", args.command, getattr(args, "action", None)) if p)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CommandFailed as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of the output went away (| head): it had what it wanted. Standard output
        # now goes nowhere, so that the interpreter's last flush has nothing to complain about.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
