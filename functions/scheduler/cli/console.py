"""``scheduler console --endpoint URL``: the web console on this machine for a deployed API,
its calls signed with the user's AWS credentials (``scheduler.console.proxy``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from scheduler.cli.common import EXIT_API_ERROR, CommandFailed, UsageError, port


def console_token(wanted: bool, environ: dict[str, str] | None = None) -> str | None:
    """The token every request must carry: ``$SCHEDULER_CONSOLE_TOKEN`` when set, else a new
    one with ``--token``, else None. ``UsageError`` for a token too weak to keep anyone out."""
    from scheduler.console.access import ENV_TOKEN, new_token, token_problem

    given = (os.environ if environ is None else environ).get(ENV_TOKEN)
    if given:
        problem = token_problem(given)
        if problem:
            raise UsageError(f"${ENV_TOKEN} {problem}")
        return given
    return new_token() if wanted else None


def run(args: argparse.Namespace) -> int:
    """Serve the console until Ctrl-C."""
    try:
        from scheduler.console.proxy import bind_refusal, run_console
    except ImportError:
        raise CommandFailed(
            "the web console is not part of this installation (scheduler.console.proxy is missing)", EXIT_API_ERROR
        ) from None
    token = console_token(args.token)
    refused = bind_refusal(args.host, token)
    if refused:
        raise UsageError(refused)
    return int(
        run_console(
            endpoint=args.endpoint,
            port=args.port,
            region=args.console_region or getattr(args, "region", None),
            host=args.host,
            token=token,
        )
        or 0
    )


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
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="local address of the console (default: 127.0.0.1; any other than loopback needs --token)",
    )
    parser.add_argument(
        "--token",
        action="store_true",
        help="require a token on every request: $SCHEDULER_CONSOLE_TOKEN, else a random one; the start-up "
        "line prints the URL that signs a browser in (required with a --host beyond loopback)",
    )
    parser.add_argument(
        "--region",
        dest="console_region",
        metavar="REGION",
        help="the signing region (default: from the endpoint's host name, else the AWS config)",
    )
    parser.set_defaults(func=run)
