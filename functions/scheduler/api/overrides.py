"""A manual run's overrides (``POST /v1/jobs/{id}/run`` with a body): checked against the job's
target, and split into what the delivery uses and what the execution records.

Header values of credential-like names are secrets: the delivery's copy holds them as secret-box
tokens (``secret_headers``, decrypted by the executor for that delivery only), the execution's
shows ``"***"``, as a target's own secrets are stored and answered."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from scheduler.api.errors import BadRequest
from scheduler.core.constants import OVERRIDE_BODY_FIELDS, SECRET_MASK, is_secret_header
from scheduler.core.domain import Job, RunOverrides
from scheduler.core.json_text import load_strict_json
from scheduler.schema.actions import RunRequest
from scheduler.schema.aws_models import body_limit, rendered_size, sqs_character_problem
from scheduler.schema.messages import amqp_headers_problem
from scheduler.schema.models import MAX_BODY_LENGTH
from scheduler.secrets import SecretBox

# Targets whose body must stay JSON (a Lambda payload, an EventBridge detail).
_JSON_BODIES = ("lambda", "eventbridge")
_HEADER_TARGETS = ("http", "amqp")
# A manual run's {{vars.NAME}} placeholder (as the delivery renders it).
_VAR = re.compile(r"\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def run_overrides(request: RunRequest, job: Job, box: SecretBox) -> RunOverrides:
    """The overrides of ``request`` for ``job``'s target: 400 naming the field when the target
    cannot take one (headers of an AWS target, a body of a GET, a payload that is not JSON)."""
    target = dict(job.target or {})
    kind = str(target.get("type"))
    if request.body is not None:
        _check_body(request.body, target)
    if request.vars:
        _check_rendered_size(request, target)
    if request.headers and kind not in _HEADER_TARGETS:
        raise BadRequest("headers", f"a {kind} target takes no headers")
    if request.headers and kind == "amqp":
        _check_amqp_headers(request.headers, target)
    deliver: dict[str, Any] = {}
    shown: dict[str, Any] = {}
    if request.body is not None:
        deliver["body"] = shown["body"] = request.body
    if request.headers:
        plain = {name: value for name, value in request.headers.items() if not is_secret_header(name)}
        secret = {name: value for name, value in request.headers.items() if is_secret_header(name)}
        deliver["headers"] = plain
        deliver["secret_headers"] = {name: box.encrypt(value) for name, value in secret.items()}
        shown["headers"] = {**plain, **{name: SECRET_MASK for name in secret}}
    if request.vars:
        deliver["vars"] = shown["vars"] = dict(request.vars)
    return RunOverrides(deliver=deliver, shown=shown)


def _check_amqp_headers(headers: dict[str, str], target: dict[str, Any]) -> None:
    """A run's headers merged over an AMQP target's fit one message (``amqp_headers_problem``).
    A stored secret header is counted at its sealed size, which is more than its value: the API
    cannot open it (only the runner can)."""
    overridden = {name.lower() for name in headers}  # names compared without case, as delivered
    own = (target.get("headers") or {}).items()
    merged = {str(k): v for k, v in own if isinstance(v, str) and str(k).lower() not in overridden}
    merged.update(headers)
    if problem := amqp_headers_problem(merged):
        raise BadRequest("headers", problem + " with the target's own")


def _check_rendered_size(request: RunRequest, target: dict[str, Any]) -> None:
    """The body the vars render into (the run's, else the target's) is refused (400 on ``vars``)
    past what the target takes: a var used many times made a body of megabytes from a request of
    kilobytes."""
    text = (
        request.body if request.body is not None else target.get(OVERRIDE_BODY_FIELDS.get(str(target.get("type")), ""))
    )
    if not isinstance(text, str) or "{{" not in text:
        return
    values = request.vars or {}
    rendered = _VAR.sub(lambda match: values.get(match.group(1), match.group(0)), text)
    limit = body_limit(target)
    if limit is None:
        size, limit, unit = len(rendered), MAX_BODY_LENGTH, "characters"
    else:
        size, unit = rendered_size(rendered), "bytes"
    if size > limit:
        raise BadRequest("vars", f"render the body to {size} {unit}; the target takes at most {limit}")


def _check_body(body: str, target: dict[str, Any]) -> None:
    kind = target.get("type")
    if kind == "http" and target.get("method") in ("GET", "HEAD"):
        raise BadRequest("body", f"a {target['method']} request carries no body")
    if kind in _JSON_BODIES:
        try:
            value = load_strict_json(body)
        except ValueError:
            raise BadRequest("body", f"must be JSON for a {kind} target") from None
        if kind == "eventbridge" and not isinstance(value, dict):
            raise BadRequest("body", "must be a JSON object for an eventbridge target (the event's detail)")
    if kind == "sqs" and (problem := sqs_character_problem(body)):
        raise BadRequest("body", problem)
    if kind == "amqp" and target.get("body_encoding") == "base64":
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest("body", "is not valid base64 (the target's body_encoding)") from None
