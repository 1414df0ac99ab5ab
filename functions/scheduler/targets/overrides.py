"""A manual run's overrides applied to its target, for that delivery only (issue 33, item 5):
the body (an AWS target's payload, message or detail) and headers merged over the target's
(names compared without case, the override's value winning). The body's ``{{vars.NAME}}``
placeholders are rendered with the others, in one pass (``templates.render``, given the vars in
the ``Delivery``), so a var's value is never rendered again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.core.constants import OVERRIDE_BODY_FIELDS
from scheduler.targets.views import SECRET_HEADER_NAMES


def apply_overrides(target: Mapping[str, Any], overrides: Mapping[str, Any], secret_headers: Mapping[str, str]) -> dict:
    """``target`` (secrets in plaintext) with ``overrides`` (``RunOverrides.deliver``) applied;
    ``secret_headers``: the override's credential headers, decrypted."""
    out = dict(target)
    field = OVERRIDE_BODY_FIELDS.get(str(out.get("type")))
    if field is None:
        return out
    if overrides.get("body") is not None:
        out[field] = overrides["body"]
    headers = {**(overrides.get("headers") or {}), **secret_headers}
    if headers:
        lowered = {name.lower() for name in headers}
        kept = {name: value for name, value in (out.get("headers") or {}).items() if name.lower() not in lowered}
        out["headers"] = {**kept, **headers}
    if secret_headers:  # scrubbed from the answer's excerpt and errors, kept from other origins
        out[SECRET_HEADER_NAMES] = sorted(secret_headers)
    return out
