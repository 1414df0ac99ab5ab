"""Running a client command: the API client of the global options, and the API's errors turned
into one message on stderr and an exit code."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

from scheduler.cli.common import EXIT_API_ERROR, EXIT_NOT_FOUND, EXIT_SERVER, UsageError
from scheduler.cli.hints import endpoint_hint, flag_hints
from scheduler.cli.output import exit_code_for_status, print_api_error


def make_client(args: argparse.Namespace) -> Any:
    """The API client of the global options."""
    from scheduler.client import SchedulerClient

    try:
        return SchedulerClient(
            args.endpoint,
            region=args.region,
            profile=args.profile,
            sigv4=args.sigv4,
            timeout=args.http_timeout,
            on_retry=say_retry,
        )
    except ValueError as exc:
        raise UsageError(f"--endpoint: {exc}") from None


def say_retry(error: Any, wait_seconds: float, retry: int, retries: int) -> None:
    """A line on stderr before the client sends a request again (a throttle, the database away),
    so that a command waiting through the retries says why."""
    print(
        f"waiting: {error}; sending again in {wait_seconds:g} s (retry {retry} of {retries})",
        file=sys.stderr,
    )


def client_command(func: Callable[[argparse.Namespace, Any], int]) -> Callable[[argparse.Namespace], int]:
    """Run a client command: the API's errors become one message on stderr and an exit code."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        from scheduler.client import ApiCallFailed, ConnectionFailed, ExecutionNotFound, JobNotFound, NoCredentials

        try:
            return func(args, make_client(args))
        except ApiCallFailed as exc:
            print_api_error(exc)
            for hint in flag_hints(exc) if getattr(args, "flag_hints", True) else ():
                print(f"  hint: {hint}", file=sys.stderr)
            wrong_endpoint = endpoint_hint(exc, getattr(args, "endpoint", None))
            if wrong_endpoint is not None:
                print(f"  hint: {wrong_endpoint}", file=sys.stderr)
            # No route answering a path the CLI knows: the endpoint is not the API (exit 5), not
            # a missing resource (3), so a script's "absent" branch is never taken for it.
            if exc.code == "invalid_response" or wrong_endpoint is not None:
                return EXIT_SERVER
            return exit_code_for_status(exc.status)
        except (JobNotFound, ExecutionNotFound) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
        except ConnectionFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_SERVER
        except NoCredentials as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_API_ERROR
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # An answer of the right overall shape with a field of the wrong type (another
            # service, or a proxy that rewrote it) breaks the rendering: said, never a traceback.
            print(
                f"error: 200 invalid_response: the answer cannot be shown ({type(exc).__name__}: {exc})",
                file=sys.stderr,
            )
            return EXIT_SERVER

    return run
