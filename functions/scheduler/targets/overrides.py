"""A manual run's overrides applied to its target, for that delivery only (issue 33, item 5):
the body (an AWS target's payload, message or detail), headers merged over the target's (names
compared without case, the override's value winning), and the body's ``{{vars.NAME}}``
placeholders. A placeholder of a var not given is left as written, as unknown placeholders are."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The field an override's body replaces, by target type.
BODY_FIELDS = {
    "http": "body",
    "amqp": "body",
    "lambda": "payload",
    "sqs": "body",
    "sns": "message",
    "eventbridge": "detail",
}

_VAR = re.compile(r"\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def apply_overrides(target: Mapping[str, Any], overrides: Mapping[str, Any], secret_headers: Mapping[str, str]) -> dict:
    """``target`` (secrets in plaintext) with ``overrides`` (``RunOverrides.deliver``) applied;
    ``secret_headers``: the override's credential headers, decrypted."""
    out = dict(target)
    field = BODY_FIELDS.get(str(out.get("type")))
    if field is None:
        return out
    if overrides.get("body") is not None:
        out[field] = overrides["body"]
    headers = {**(overrides.get("headers") or {}), **secret_headers}
    if headers:
        lowered = {name.lower() for name in headers}
        kept = {name: value for name, value in (out.get("headers") or {}).items() if name.lower() not in lowered}
        out["headers"] = {**kept, **headers}
    values = overrides.get("vars") or {}
    if values and isinstance(out.get(field), str):
        out[field] = render_vars(out[field], values)
    return out


def render_vars(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{{vars.NAME}}`` of a var given replaced by its value (one pass)."""
    if "{{" not in text:
        return text
    return _VAR.sub(lambda match: values.get(match.group(1), match.group(0)), text)
