"""Job definitions: read from a JSON or YAML file, and built from flags (``jobs create|update``).

Secrets never come from the command line (argv is visible to every user of the machine in
``ps``): ``--auth`` takes the password, token or header value from ``$SCHEDULER_AUTH_SECRET``,
else from standard input (one line; a prompt without echo on a terminal).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from scheduler.cli.aws_flags import (
    AWS_TYPES,
    FIELDS_OF,
    add_aws_options,
    aws_target_fields,
    check_flags,
    read_text_flag,
    sigv4_auth,
    type_from_flags,
)
from scheduler.cli.common import (
    UsageError,
    add_header_env_flag,
    backoff_seconds,
    int_list,
    positive_float,
    positive_int,
)

AUTH_SECRET_ENV = "SCHEDULER_AUTH_SECRET"
CHAIN_FLAGS = ("on_success", "on_failure", "on_complete")


def read_secret(args: argparse.Namespace) -> str:
    """The secret of ``--auth``: ``$SCHEDULER_AUTH_SECRET``, else one line of standard input."""
    secret = os.environ.get(AUTH_SECRET_ENV)
    if secret is None:
        if getattr(args, "file", None) == "-" or (getattr(args, "body", None) or "") == "@-":
            raise UsageError(f"--auth: standard input already carries the job; set ${AUTH_SECRET_ENV}")
        if sys.stdin.isatty():
            import getpass

            secret = getpass.getpass(f"{args.auth} secret: ")
        else:
            secret = sys.stdin.readline().rstrip("\r\n")
    if not secret:
        raise UsageError(f"--auth {args.auth}: empty secret (set ${AUTH_SECRET_ENV} or give it on stdin)")
    return secret


def _auth(args: argparse.Namespace) -> dict[str, Any]:
    if args.auth == "sigv4":
        return sigv4_auth(args)
    if args.auth == "basic":
        if not args.auth_username:
            raise UsageError("--auth basic needs --auth-username")
        return {"type": "basic", "username": args.auth_username, "password": read_secret(args)}
    if args.auth == "bearer":
        return {"type": "bearer", "token": read_secret(args)}
    if not args.auth_header:
        raise UsageError("--auth header needs --auth-header NAME")
    return {"type": "header", "name": args.auth_header, "value": read_secret(args)}


def name_value(value: str, flag: str = "--header") -> tuple[str, str]:
    """A ``NAME=VALUE`` flag's (``--header``, ``--var``) name, stripped, and its value as given."""
    name, sep, val = value.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"{flag} takes NAME=VALUE, not {value!r}")
    return name.strip(), val


def _list_flags(args: argparse.Namespace) -> dict[str, list[str]]:
    """The repeatable flags given: ``--tag``, ``--exclude-calendar`` and the chains (``--on-success`` ...)."""
    keys = ("tags", "exclude_calendars", *CHAIN_FLAGS)
    return {key: list(getattr(args, key)) for key in keys if getattr(args, key, None)}


def _when_flags(args: argparse.Namespace) -> dict[str, Any]:
    """``--schedule`` (once: ``schedule``; repeated: ``schedules``, their union) and the spread."""
    out: dict[str, Any] = {}
    schedules = getattr(args, "schedule", None)
    if isinstance(schedules, str):
        schedules = [schedules]
    if schedules:
        out.update({"schedule": schedules[0]} if len(schedules) == 1 else {"schedules": list(schedules)})
    spread = {"window_seconds": getattr(args, "spread", None), "mode": getattr(args, "spread_mode", None)}
    if any(value is not None for value in spread.values()):  # alone, --spread-mode patches the mode
        out["spread"] = {key: value for key, value in spread.items() if value is not None}
    return out


def _schedule_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The flags of a job's own fields (not its target's nor its retry's)."""
    out: dict[str, Any] = _when_flags(args)
    for key in (
        "name",
        "description",
        "run_at",
        "timezone",
        "start_at",
        "end_at",
        "missed_runs",
        "after_completion",
        "on_excluded",
    ):
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    out.update(_list_flags(args))
    return out


def definition_flags(args: argparse.Namespace, kind: str | None = None) -> dict[str, Any]:
    """The part of a job definition given by flags, nested as in the job JSON; ``kind`` is the
    target's type when known (``--body`` is the ``message`` of an SNS target)."""
    out = _schedule_flags(args)
    target: dict[str, Any] = {}
    for flag, key in (
        ("url", "url"),
        ("method", "method"),
        ("amqp_exchange", "exchange"),
        ("routing_key", "routing_key"),
        ("target_timeout", "timeout_seconds"),
        ("success_codes", "success_codes"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            target[key] = value.upper() if key == "method" else value
    if getattr(args, "body", None) is not None:
        target["message" if kind == "sns" else "body"] = read_text_flag("--body", args.body)
    if getattr(args, "headers", None):
        target["headers"] = dict(name_value(h) for h in args.headers)
    content_type = getattr(args, "content_type", None)
    if content_type is not None:
        if kind == "amqp":
            target["content_type"] = content_type
        else:
            target.setdefault("headers", {})["Content-Type"] = content_type
    if getattr(args, "auth", None):
        target["auth"] = _auth(args)
    target.update(aws_target_fields(args, kind))
    if target:
        out["target"] = target
    for name, part in (("retry", _retry_flags(args)), ("limits", _limits_flags(args))):
        if part:
            out[name] = part
    return out


def _retry_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The job's ``retry`` given by flags."""
    retry: dict[str, Any] = {}
    for flag, key in (
        ("max_attempts", "max_attempts"),
        ("min_backoff", "min_backoff_seconds"),
        ("max_backoff", "max_backoff_seconds"),
        ("max_age", "max_age_seconds"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            retry[key] = int(value) if isinstance(value, float) and value.is_integer() else value
    return retry


def _limits_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The job's ``limits`` given by flags (``--limit-key``, ``--max-in-flight``, ``--per-second``)."""
    given = (("key", "limit_key"), ("max_in_flight", "max_in_flight"), ("per_second", "per_second"))
    found = {key: getattr(args, flag, None) for key, flag in given}
    if isinstance(found["per_second"], float) and found["per_second"].is_integer():
        found["per_second"] = int(found["per_second"])
    return {key: value for key, value in found.items() if value is not None}


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def full_definition(base: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """A complete definition (create, ``update --replace``): the flags over ``base``.

    ``--schedule`` (once: ``schedule``; repeated: ``schedules``) drops the file's other one and its
    ``run_at``, and ``--run-at`` both schedule fields; the target's type is
    the one the flags name (``--type``, an AWS resource flag, ``--amqp-exchange``/``--routing-key``),
    else the file's, else ``http``; a file's target of another type is dropped when either type
    is an AWS one (their fields differ).
    """
    named = type_from_flags(args)
    base_target: dict[str, Any] = base["target"] if isinstance(base.get("target"), dict) else {}
    base_kind = base_target.get("type") or (
        "amqp" if ("exchange" in base_target or "routing_key" in base_target) else "http" if base_target else None
    )
    kind = named or base_kind or "http"
    check_flags(args, kind)
    if named and base_kind and named != base_kind and {named, base_kind} & set(AWS_TYPES):
        base = {k: v for k, v in base.items() if k != "target"}
    flags = definition_flags(args, kind)
    spec = deep_merge(base, flags)
    for given in _WHEN_FIELDS:
        if given in flags:
            for other in _WHEN_FIELDS:
                if other != given:
                    spec.pop(other, None)
    if "run_at" in flags and "spread" not in flags:  # a one-off has no spread
        spec.pop("spread", None)
    if isinstance(spec.get("target"), dict):
        target = spec["target"] = dict(spec["target"])
        target["type"] = kind
    return spec


def patch_definition(
    base: dict[str, Any], args: argparse.Namespace, stored: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A JSON merge patch (``update`` without ``--replace``): the flags over the file's patch.

    ``--schedule`` sends ``null`` for the other two of ``schedule``, ``schedules`` and ``run_at``
    (and so does ``--run-at``, and for ``spread`` too) so that a job can switch between them; the AMQP flags set ``target.type`` to ``amqp``,
    ``--method`` sets it to ``http``, ``--type`` and the AWS resource flags to theirs. ``stored``
    is the stored target when the caller fetched it (see :func:`needs_stored_target`): a change
    of type then sends ``null`` for each stored field that the new type has no field for.
    """
    named = type_from_flags(args)
    base_target: dict[str, Any] = base["target"] if isinstance(base.get("target"), dict) else {}
    kind = named or base_target.get("type") or (stored or {}).get("type")
    check_flags(args, kind)
    flags = definition_flags(args, kind)
    patch = deep_merge(base, flags)
    for given in _WHEN_FIELDS:
        if given in flags:
            for other in _WHEN_FIELDS:
                if other != given:
                    patch[other] = None
    if "run_at" in flags and "spread" not in flags:  # a one-off has no spread: the job's goes
        patch["spread"] = None
    target = flags.get("target") or {}
    if named:
        patch.setdefault("target", {})["type"] = named
    elif "method" in target:
        patch["target"]["type"] = "http"
    new_type = (patch.get("target") or {}).get("type") if isinstance(patch.get("target"), dict) else None
    if stored and new_type and new_type != stored.get("type"):
        for key in stored:
            if key not in FIELDS_OF.get(new_type, frozenset()):
                patch["target"].setdefault(key, None)
    return patch


def needs_stored_target(base: dict[str, Any], args: argparse.Namespace) -> bool:
    """Whether a patch must know the stored target: ``--type`` or an AWS resource flag may change
    the type (stale fields must go), or ``--body`` is given without a type to say whether it is
    ``body`` or an SNS ``message``."""
    base_target: dict[str, Any] = base["target"] if isinstance(base.get("target"), dict) else {}
    named = type_from_flags(args)
    if getattr(args, "target_type", None) or named in AWS_TYPES:
        return True
    return getattr(args, "body", None) is not None and not (
        named or base_target.get("type") or getattr(args, "method", None)
    )


def _add_list_options(group: Any) -> None:
    """The repeatable flags: ``--tag``; ``--on-success``, ``--on-failure``, ``--on-complete``
    (the jobs an execution's end runs)."""
    group.add_argument("--tag", dest="tags", action="append", metavar="TAG", help="a tag (repeatable)")
    for outcome, ending in (("success", "succeeds"), ("failure", "fails for good"), ("complete", "ends either way")):
        group.add_argument(
            f"--on-{outcome}",
            dest=f"on_{outcome}",
            action="append",
            metavar="JOB",
            help=f"run this job of yours (name or id) when an execution {ending} (repeatable)",
        )


# The fields of which a job has exactly one.
_WHEN_FIELDS = ("schedule", "schedules", "run_at")


def add_spread_options(group: Any) -> None:
    """``--spread SECONDS`` and ``--spread-mode`` (jobs and the preview)."""
    group.add_argument(
        "--spread",
        type=positive_int,
        metavar="SECONDS",
        help="fire each occurrence at an offset inside this window after it (at most 86400)",
    )
    group.add_argument(
        "--spread-mode",
        choices=("stable", "random"),
        help="stable (default): one offset for the job, from its id; random: one per occurrence",
    )


def _add_when_options(group: Any) -> None:
    """``--schedule`` (repeatable) or ``--run-at``, ``--timezone`` and the spread."""
    when = group.add_mutually_exclusive_group()
    when.add_argument(
        "--schedule",
        action="append",
        metavar="EXPR",
        help="cron, @hourly-style macro, '@every 90s', cron(...), rate(...), at(...); "
        "repeat it for several expressions (the job fires at each: their union)",
    )
    when.add_argument("--run-at", metavar="TIMESTAMP", help="a one-off job: RFC 3339 timestamp with offset")
    group.add_argument("--timezone", metavar="IANA_NAME", help="time zone of the schedule (default UTC)")
    add_spread_options(group)


def add_calendar_flags(group: Any) -> None:
    """``--exclude-calendar NAME`` (repeatable) and ``--on-excluded skip|shift``."""
    group.add_argument(
        "--exclude-calendar",
        dest="exclude_calendars",
        action="append",
        metavar="NAME",
        help="leave out the days of this calendar of yours (repeatable; see scheduler calendars)",
    )
    group.add_argument(
        "--on-excluded",
        choices=("skip", "shift"),
        help="an excluded occurrence is skipped (default) or shifted to the first allowed time after",
    )


def add_definition_options(parser: argparse.ArgumentParser) -> None:
    """The flags of a job definition (``jobs create`` and ``jobs update``)."""
    group = parser.add_argument_group("job definition (flags override the file's values)")
    group.add_argument("-f", "--file", metavar="FILE", help="a job definition in JSON or YAML (- for stdin)")
    group.add_argument("--name", help="the job's name, unique per owner")
    group.add_argument("--description", help="free text")
    _add_when_options(group)
    group.add_argument("--start-at", metavar="TIMESTAMP", help="no occurrence before this time")
    group.add_argument("--end-at", metavar="TIMESTAMP", help="no occurrence after this time")
    group.add_argument(
        "--missed-runs",
        choices=("skip", "run_once", "run_all"),
        help="what to do with occurrences missed while paused or down (default run_once)",
    )
    group.add_argument(
        "--after-completion",
        choices=("keep", "delete"),
        help="a completed job is kept (default) or deleted with its history",
    )
    _add_list_options(group)
    add_calendar_flags(group)
    target = parser.add_argument_group("target")
    target.add_argument("--url", help="HTTP target URL (or the AMQP broker URL of an AMQP target)")
    target.add_argument(
        "--method",
        type=str.upper,
        choices=("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"),
        help="HTTP method (default POST)",
    )
    target.add_argument(
        "--header", dest="headers", action="append", metavar="NAME=VALUE", help="a target header (repeatable)"
    )
    add_header_env_flag(target, "a target header")
    target.add_argument(
        "--body",
        help="the target body (HTTP, AMQP, SQS; the message of SNS), or @FILE for a "
        "file's contents (@- for stdin); {{scheduled_at}}-style placeholders "
        "are replaced",
    )
    target.add_argument(
        "--content-type",
        metavar="TYPE",
        help="the body's media type (HTTP: the Content-Type header; AMQP: content_type)",
    )
    target.add_argument(
        "--timeout",
        dest="target_timeout",
        type=positive_int,
        metavar="SECONDS",
        help="how long a delivery may take (default 30)",
    )
    target.add_argument(
        "--success-codes",
        type=int_list,
        metavar="CODES",
        help="HTTP statuses that count as success, comma-separated (default: any 2xx)",
    )
    target.add_argument(
        "--auth",
        choices=("basic", "bearer", "header", "sigv4"),
        help=f"HTTP auth; the password, token or header value is read from ${AUTH_SECRET_ENV} "
        "or standard input, never from the command line; sigv4 signs as --role-arn",
    )
    target.add_argument("--auth-username", metavar="USER", help="--auth basic: the user name")
    target.add_argument("--auth-header", metavar="NAME", help="--auth header: the header's name")
    target.add_argument("--amqp-exchange", metavar="EXCHANGE", help="AMQP target: the exchange")
    target.add_argument("--routing-key", metavar="KEY", help="AMQP target: the routing key")
    add_aws_options(target)
    _add_retry_options(parser)


def _add_retry_options(parser: argparse.ArgumentParser) -> None:
    """The retry policy's flags (``retry``), as the API takes them."""
    retry = parser.add_argument_group("retries")
    retry.add_argument("--max-attempts", type=positive_int, metavar="N", help="attempts per occurrence (default 3)")
    retry.add_argument(
        "--min-backoff",
        type=backoff_seconds,
        metavar="SECONDS",
        help="wait before the first retry (default 1; 0 to 86400)",
    )
    retry.add_argument(
        "--max-backoff",
        type=backoff_seconds,
        metavar="SECONDS",
        help="longest wait between retries (default 300; 0 to 86400)",
    )
    retry.add_argument(
        "--max-age", type=positive_int, metavar="SECONDS", help="no retry this long after the scheduled time"
    )


def add_limits_options(parser: argparse.ArgumentParser) -> None:
    """The flags of a job's per-target ``limits``."""
    limits = parser.add_argument_group("per-target limits (held across every runner)")
    limits.add_argument("--max-in-flight", type=positive_int, metavar="N", help="at most N deliveries at once")
    limits.add_argument("--per-second", type=positive_float, metavar="N", help="at most N deliveries started a second")
    limits.add_argument(
        "--limit-key", metavar="KEY", help="the key the limits count under (default: the target's origin)"
    )
