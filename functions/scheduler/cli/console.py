"""``scheduler console --endpoint URL``: the web console on this machine for a deployed API,
its calls signed with the user's AWS credentials (``scheduler.console.proxy``)."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli.common import EXIT_API_ERROR, CommandFailed, port


def run(args: argparse.Namespace) -> int:
    """Serve the console until Ctrl-C."""
    try:
        from scheduler.console.proxy import run_console
    except ImportError:
        raise CommandFailed(
            "the web console is not part of this installation (scheduler.console.proxy is missing)", EXIT_API_ERROR
        ) from None
    return int(run_console(endpoint=args.endpoint, port=args.port, region=args.console_region, host=args.host) or 0)


def add_parsers(sub: Any) -> None:
    """``scheduler console``."""
    parser = sub.add_parser(
        "console",
        help="serve the web console for a deployed API on this machine",
        description="Serve the web console on this machine; its calls go to --endpoint, "
        "signed with your AWS credentials (the usual chain).",
    )
    parser.add_argument(
        "--endpoint",
        required=True,
        metavar="URL",
        help="the deployed API's base URL, with its stage (https://....execute-api...../prod)",
    )
    parser.add_argument("--port", type=port, default=8081, help="local port of the console (default: 8081)")
    parser.add_argument("--host", default="127.0.0.1", help="local address of the console (default: 127.0.0.1)")
    parser.add_argument(
        "--region",
        dest="console_region",
        metavar="REGION",
        help="the signing region (default: from the endpoint's host name, else the AWS config)",
    )
    parser.set_defaults(func=run)
