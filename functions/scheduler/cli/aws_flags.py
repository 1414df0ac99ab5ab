"""The flags of the AWS targets (``lambda``, ``sqs``, ``sns``, ``eventbridge``) and of the HTTP
auth ``sigv4``, for ``jobs create|update``.

A resource flag names the type (``--queue-url`` makes an ``sqs`` target, ``--function-arn`` a
``lambda`` one ...) unless ``--type`` says it; a flag of another type is a usage error that names
both. ``--body`` is the message of the types that have one: ``target.body`` of HTTP, AMQP and SQS,
``target.message`` of SNS. No flag here carries a secret: AWS targets and ``sigv4`` authenticate as
the role ``--role-arn``, which the scheduler assumes with the job owner as ``ExternalId``.
"""

from __future__ import annotations

import argparse
import re
from typing import Any
from urllib.parse import urlsplit

from scheduler.cli.common import UsageError

AWS_TYPES = ("lambda", "sqs", "sns", "eventbridge")
TARGET_TYPES = ("http", "amqp") + AWS_TYPES
SIGV4_SERVICES = ("execute-api", "lambda")

# flag dest -> (field in the target, the types it belongs to); the first types name a resource
_AWS_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "function_arn": ("function_arn", ("lambda",)),
    "payload": ("payload", ("lambda",)),
    "invocation_type": ("invocation_type", ("lambda",)),
    "queue_url": ("queue_url", ("sqs",)),
    "topic_arn": ("topic_arn", ("sns",)),
    "subject": ("subject", ("sns",)),
    "event_bus_arn": ("event_bus_arn", ("eventbridge",)),
    "source": ("source", ("eventbridge",)),
    "detail_type": ("detail_type", ("eventbridge",)),
    "detail": ("detail", ("eventbridge",)),
    "message_group_id": ("message_group_id", ("sqs", "sns")),
}
# flags of the older target types (dest -> the types that take them)
_OTHER_FLAGS: dict[str, tuple[str, ...]] = {
    "url": ("http", "amqp"),
    "method": ("http",),
    "headers": ("http",),
    "success_codes": ("http",),
    "content_type": ("http", "amqp"),
    "auth": ("http",),
    "amqp_exchange": ("amqp",),
    "routing_key": ("amqp",),
    "body": ("http", "amqp", "sqs", "sns"),
}
_FILE_FLAGS = ("payload", "detail")
_LAMBDA_URL_HOST = re.compile(r"\.lambda-url\.([a-z0-9-]+)\.on\.aws\Z")
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?\Z")


_MESSAGE_FIELD = {"sqs": "body", "sns": "message"}


def _aws_fields(kind: str) -> frozenset[str]:
    own = {field for field, types in _AWS_FIELDS.values() if kind in types}
    return frozenset({"type", "role_arn", "timeout_seconds", *own, *_MESSAGE_FIELD.get(kind, "").split()})


# the fields of each target type (those a change of type keeps from the stored target)
FIELDS_OF: dict[str, frozenset[str]] = {
    "http": frozenset(
        {"type", "url", "method", "headers", "body", "auth", "timeout_seconds", "success_codes", "follow_redirects"}
    ),
    "amqp": frozenset(
        {
            "type",
            "url",
            "exchange",
            "routing_key",
            "body",
            "body_encoding",
            "headers",
            "content_type",
            "timeout_seconds",
        }
    ),
    **{kind: _aws_fields(kind) for kind in AWS_TYPES},
}


def flag_name(dest: str) -> str:
    """The command-line spelling of an argparse ``dest``."""
    return {"headers": "--header", "amqp_exchange": "--amqp-exchange"}.get(dest, "--" + dest.replace("_", "-"))


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the flag ``dest`` was given."""
    value = getattr(args, dest, None)
    return value is not None and value != []


def type_from_flags(args: argparse.Namespace) -> str | None:
    """The target type the flags name: ``--type``, else the one type every given AWS flag (or
    AMQP flag) belongs to, else None (the file's or the stored type stands)."""
    if getattr(args, "target_type", None):
        return args.target_type
    candidates: set[str] | None = None
    first = ""
    for dest, (_field, types) in _AWS_FIELDS.items():
        if given(args, dest):
            if candidates is not None and not candidates & set(types):
                raise UsageError(
                    f"{flag_name(first)} and {flag_name(dest)} are flags of different target types "
                    f"({'/'.join(sorted(candidates))}, {'/'.join(types)})"
                )
            candidates, first = (set(types), dest) if candidates is None else (candidates & set(types), first)
    if candidates is not None and len(candidates) == 1:
        return next(iter(candidates))
    if given(args, "amqp_exchange") or given(args, "routing_key"):
        return "amqp"
    return None


def check_flags(args: argparse.Namespace, kind: str | None) -> None:
    """A usage error for a flag that the target type ``kind`` has no field for."""
    if kind is None:
        return
    table = {dest: types for dest, (_f, types) in _AWS_FIELDS.items()}
    table["role_arn"] = AWS_TYPES + ("http",)
    if kind in AWS_TYPES:  # the older types' flags among themselves are as lenient as before
        table.update(_OTHER_FLAGS)
    for dest, types in table.items():
        if given(args, dest) and kind not in types:
            names = " or ".join(types)
            raise UsageError(f"{flag_name(dest)} is a flag of {names} targets, not of {kind}")
    if kind == "http" and given(args, "role_arn") and getattr(args, "auth", None) != "sigv4":
        raise UsageError("--role-arn on an http target needs --auth sigv4")
    for dest in ("sigv4_service", "sigv4_region"):
        if given(args, dest) and getattr(args, "auth", None) != "sigv4":
            raise UsageError(f"{flag_name(dest)} needs --auth sigv4")


def read_text_flag(flag: str, value: str) -> str:
    """The text of a flag that takes ``@FILE`` (``@-``: standard input)."""
    if not value.startswith("@"):
        return value
    import sys
    from pathlib import Path

    path = value[1:]
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {path} is not UTF-8 text") from None


def check_stdin_once(args: argparse.Namespace) -> None:
    """A usage error when two flags would read standard input (before either reads it)."""
    readers = [
        name
        for name, dest, stdin in (
            ("-f -", "file", "-"),
            ("--body @-", "body", "@-"),
            ("--payload @-", "payload", "@-"),
            ("--detail @-", "detail", "@-"),
        )
        if getattr(args, dest, None) == stdin
    ]
    if len(readers) > 1:
        raise UsageError(f"{' and '.join(readers)}: standard input can be read once")


def aws_target_fields(args: argparse.Namespace, kind: str | None) -> dict[str, Any]:
    """The target fields of the AWS flags (``--role-arn`` only for an AWS type, or when the type
    is not known here: an update of a stored AWS target)."""
    out: dict[str, Any] = {}
    for dest, (field, _types) in _AWS_FIELDS.items():
        if given(args, dest):
            value = getattr(args, dest)
            out[field] = read_text_flag(flag_name(dest), value) if dest in _FILE_FLAGS else value
    if given(args, "role_arn") and kind != "http":
        out["role_arn"] = args.role_arn
    return out


def sigv4_auth(args: argparse.Namespace) -> dict[str, Any]:
    """``--auth sigv4``: service and region from the flags, else from an API Gateway or Lambda
    function URL host name in ``--url``; the role from ``--role-arn``."""
    service, region = getattr(args, "sigv4_service", None), getattr(args, "sigv4_region", None)
    host = (urlsplit(getattr(args, "url", None) or "").hostname or "").lower().rstrip(".")
    for known, pattern in (("execute-api", _EXECUTE_API_HOST), ("lambda", _LAMBDA_URL_HOST)):
        match = pattern.search(host)
        if match:
            service, region = service or known, region or match.group(1)
    if not service:
        raise UsageError(
            "--auth sigv4 needs --sigv4-service execute-api|lambda (or an execute-api or lambda-url --url)"
        )
    if not region:
        raise UsageError("--auth sigv4 needs --sigv4-region REGION (or an execute-api or lambda-url --url)")
    if not given(args, "role_arn"):
        raise UsageError("--auth sigv4 needs --role-arn ARN (the role the scheduler signs as)")
    return {"type": "sigv4", "service": service, "region": region, "role_arn": args.role_arn}


def target_summary(target: dict[str, Any], width: int | None = None) -> str:
    """A target in a few words: ``sqs my-queue``, ``lambda my-function``, ``POST https://...``
    (with ``width``, a long URL is cut so that the whole fits, its method and auth kept)."""
    kind = target.get("type") or "http"
    if kind == "sqs":
        return f"sqs {str(target.get('queue_url') or '-').rstrip('/').rsplit('/', 1)[-1]}"
    if kind == "lambda":
        arn = str(target.get("function_arn") or "-")
        name = arn.split(":function:", 1)[-1]
        return f"lambda {name}" + (" (sync)" if target.get("invocation_type") == "RequestResponse" else "")
    if kind == "sns":
        return f"sns {str(target.get('topic_arn') or '-').rsplit(':', 1)[-1]}"
    if kind == "eventbridge":
        bus = str(target.get("event_bus_arn") or "-").split(":event-bus/", 1)[-1]
        return f"eventbridge {bus} {target.get('detail_type') or ''}".rstrip()
    if kind == "amqp":
        return f"amqp {target.get('exchange') or '(default)'} {target.get('routing_key') or ''}".rstrip()
    auth = target.get("auth") or {}
    signed = f" (sigv4 {auth.get('service')})" if isinstance(auth, dict) and auth.get("type") == "sigv4" else ""
    method, url = target.get("method") or "POST", str(target.get("url") or "-")
    room = None if width is None else max(width - len(method) - len(signed) - 1, 8)
    if room is not None and len(url) > room:
        url = url[: room - 3] + "..."
    return f"{method} {url}{signed}"


def add_aws_options(target: Any) -> None:
    """The AWS flags, in the ``target`` argument group."""
    target.add_argument(
        "--type",
        dest="target_type",
        choices=TARGET_TYPES,
        help="the target type (default: the one the other flags name, else the file's, else http)",
    )
    target.add_argument(
        "--role-arn",
        metavar="ARN",
        help="lambda/sqs/sns/eventbridge target, or --auth sigv4: the IAM role the scheduler "
        "assumes (with your principal as ExternalId) to call AWS",
    )
    target.add_argument(
        "--function-arn", metavar="ARN", help="lambda target: the function (ARN, with a qualifier if any)"
    )
    target.add_argument(
        "--payload",
        metavar="JSON",
        help="lambda target: the JSON payload, or @FILE (@- for stdin); placeholders are replaced",
    )
    target.add_argument(
        "--invocation-type",
        choices=("Event", "RequestResponse"),
        help="lambda target: Event (asynchronous, default) or RequestResponse (wait for the answer)",
    )
    target.add_argument(
        "--queue-url",
        metavar="URL",
        help="sqs target: the queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE); --body is the message",
    )
    target.add_argument(
        "--message-group-id", metavar="ID", help="sqs or sns target: the message group of a FIFO queue or topic"
    )
    target.add_argument("--topic-arn", metavar="ARN", help="sns target: the topic; --body is the message")
    target.add_argument("--subject", help="sns target: the subject (for e-mail subscriptions)")
    target.add_argument("--event-bus-arn", metavar="ARN", help="eventbridge target: the event bus")
    target.add_argument("--source", help="eventbridge target: the event's source (not aws.*)")
    target.add_argument("--detail-type", metavar="TEXT", help="eventbridge target: the event's detail-type")
    target.add_argument(
        "--detail",
        metavar="JSON",
        help="eventbridge target: the event's detail, a JSON object, or @FILE (@- for stdin)",
    )
    target.add_argument(
        "--sigv4-service",
        choices=SIGV4_SERVICES,
        help="--auth sigv4: the service to sign for (default: from an execute-api or lambda-url --url)",
    )
    target.add_argument(
        "--sigv4-region",
        metavar="REGION",
        help="--auth sigv4: the region to sign for (default: from the --url host name)",
    )
