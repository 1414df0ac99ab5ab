"""What every command group shares: exit codes, the usage error, argument types, the API client
options and the wrapper that turns the client's errors into one line and an exit code."""

from __future__ import annotations

import argparse
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Any

EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_SERVER = 5
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0  ok
  1  the API refused the request (4xx other than below), or no AWS credentials to sign with
  2  usage error (bad option, unreadable job file)
  3  not found (404, or no job with that name)
  4  conflict (409: name taken; 412: --if-match version is stale)
  5  server error (5xx), the API cannot be reached, or the endpoint is not a scheduler API
"""

JOB_STATES = ("active", "paused", "completed")
EXECUTION_STATUSES = ("running", "succeeded", "failed", "timed_out", "lost", "skipped")
OUTPUT_FORMATS = ("table", "json", "yaml")


class UsageError(Exception):
    """A mistake in the command line or its input: exit 2."""


class CommandFailed(Exception):
    """A command cannot go on: ``message`` is printed once (``scheduler CMD: error: ...``) and the
    process exits with ``exit_code``, without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_API_ERROR):
        super().__init__(message)
        self.exit_code = exit_code


# -- argument types ------------------------------------------------------------------------------


def whole_number(text: str) -> int:
    """An ``int`` argument."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def positive_int(text: str) -> int:
    """An ``int`` argument of at least 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def runner_count(text: str) -> int:
    """``--runners``: a whole number, 0 (the API alone, nothing claimed) or more."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def port(text: str) -> int:
    """A TCP port; 0 asks for any free one (the banner shows which)."""
    value = whole_number(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


# The largest number a positive_float takes: a year of seconds is past any timeout, interval or
# backoff (and past it, waits overflow the platform's clock).
MAX_FLOAT_ARGUMENT = 365 * 86400.0


def positive_float(text: str) -> float:
    """A finite ``float`` argument above 0, at most ``MAX_FLOAT_ARGUMENT`` (nan, which compares
    false with everything, and inf are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= MAX_FLOAT_ARGUMENT:  # nan fails both comparisons
        raise argparse.ArgumentTypeError(f"must be a positive number up to {MAX_FLOAT_ARGUMENT:g}, got {text!r}")
    return value


# The API's limit of a retry's backoff (``schema.models.MAX_BACKOFF_SECONDS``, held equal by a
# unit test): the CLI does not load the API's models (pydantic) to parse its flags.
MAX_BACKOFF_SECONDS = 86_400


def backoff_seconds(text: str) -> float:
    """A retry's backoff in seconds: 0 (retry at once) to a day, as the API takes it."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= MAX_BACKOFF_SECONDS:  # nan fails both comparisons
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_BACKOFF_SECONDS:,} seconds (a day), got {text!r}")
    return value


class HeaderFromEnvironment(argparse.Action):
    """``--header-env NAME=VAR``: the header ``NAME`` with the value of the environment variable
    ``VAR``, added to ``--header``'s (``dest``): a credential never on the command line, where
    any user of the machine can read a process's arguments."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        name, sep, variable = str(values).partition("=")
        if not sep or not name.strip() or not variable.strip():
            parser.error(
                f"--header-env takes NAME=VARIABLE (the environment variable holding the value), not {values!r}"
            )
        value = os.environ.get(variable.strip())
        if value is None:
            parser.error(f"--header-env {name.strip()}: the environment variable {variable.strip()} is not set")
        headers = list(getattr(namespace, self.dest, None) or [])
        headers.append(f"{name.strip()}={value}")
        setattr(namespace, self.dest, headers)


def add_header_env_flag(parser: Any, what: str) -> None:
    """``--header-env NAME=VARIABLE`` (repeatable) beside ``--header`` (dest ``headers``)."""
    parser.add_argument(
        "--header-env",
        dest="headers",
        action=HeaderFromEnvironment,
        metavar="NAME=VARIABLE",
        help=f"{what} whose value is the environment variable's (a credential: never on the command line)",
    )


def non_empty(text: str) -> str:
    """A text argument that says something (a job's id or name, a version)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def add_if_match_flag(parser: argparse.ArgumentParser, what: str, *, creates: bool = True) -> None:
    """``--if-match VERSION``: the change only applies to ``what`` while it is at that version
    (else exit 4); ``creates=False`` says that, given, it never creates one."""
    never = "; never creates one" if not creates else ""
    parser.add_argument(
        "--if-match",
        metavar="VERSION",
        type=non_empty,
        help=f"only if {what} is still at this version (else exit 4){never}",
    )


def http_status(text: str) -> int:
    """An HTTP status code, 100 to 599."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 100 <= value <= 599:
        raise argparse.ArgumentTypeError(f"an HTTP status is 100 to 599, got {value}")
    return value


def int_list(text: str) -> list[int]:
    """A comma-separated list of whole numbers (``200,201,204``)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None


_RELATIVE = re.compile(r"^(?:(\d+)([smhdw]))+\Z")
_RELATIVE_PART = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since(text: str) -> str:
    """An instant for ``--since``: RFC 3339 as given (the API checks it), or a time ago relative
    to now, ``10m``, ``2h``, ``1d``, ``1h30m`` (units s, m, h, d, w), as RFC 3339 in UTC."""
    value = text.strip()
    if not _RELATIVE.match(value.lower()):
        if re.match(r"^\d+\s*[a-zA-Z]+\Z", value):
            raise argparse.ArgumentTypeError(
                f"{text!r}: a time ago is a number and a unit s, m, h, d or w (10m, 2h, 1d), or give RFC 3339"
            )
        return value
    return _relative(text, value, -1)


def until(text: str) -> str:
    """An instant for ``--until``: RFC 3339 as given (the API checks it), or a time from now,
    ``30m``, ``2h``, ``1d``, ``1h30m`` (units s, m, h, d, w), as RFC 3339 in UTC."""
    value = text.strip()
    if not _RELATIVE.match(value.lower()):
        return since(value)  # RFC 3339 as given, or the same refusal of a malformed duration
    return _relative(text, value, 1)


def _relative(text: str, value: str, sign: int) -> str:
    """``value`` (a duration such as ``1h30m``) before (``sign`` -1) or after now, in RFC 3339;
    a usage error past the years a date can have."""
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _RELATIVE_PART.findall(value.lower()))
    try:
        moment = datetime.now(UTC) + sign * timedelta(seconds=seconds)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} reaches past the years a date can have (1 to 9999)") from None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


# -- the API client ------------------------------------------------------------------------------


def add_client_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The API client's options: on the top-level parser (with their defaults) and again on each
    client subcommand (without defaults, so that ``scheduler jobs list --json`` works as well as
    ``scheduler --json jobs list``)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("API client options")
    group.add_argument(
        "--endpoint",
        metavar="URL",
        default=default(None),
        help="the API's base URL, with its stage if any (default: $SCHEDULER_ENDPOINT, else http://127.0.0.1:8080)",
    )
    group.add_argument(
        "--region",
        default=default(None),
        help="the SigV4 signing region (default: from an execute-api host name, else $AWS_REGION, else the AWS config)",
    )
    group.add_argument("--profile", default=default(None), help="the AWS profile to sign with (default: $AWS_PROFILE)")
    group.add_argument(
        "--sigv4",
        action=argparse.BooleanOptionalAction,
        default=default(None),
        help="sign requests with SigV4 (default: only when the endpoint is *.amazonaws.com)",
    )
    group.add_argument(
        "-o",
        "--output",
        choices=OUTPUT_FORMATS,
        default=default("table"),
        help="table (default), or the API's JSON as is (json), or the same as YAML (yaml)",
    )
    group.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const="json",
        default=default("table"),
        help="the same as -o json",
    )
    group.add_argument(
        "--http-timeout",
        dest="http_timeout",
        type=positive_float,
        metavar="SECONDS",
        default=default(30.0),
        help="HTTP timeout of each API call (default: 30)",
    )
