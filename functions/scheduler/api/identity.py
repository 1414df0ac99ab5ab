"""Who is calling: the IAM principal API Gateway authenticated (``requestContext.identity``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler.api.errors import Forbidden

# arn:aws:sts::123456789012:assumed-role/RoleName/session-name
_ASSUMED_ROLE = re.compile(r"^(arn:[^:]+:sts::\d+:assumed-role/[^/]+)/.+\Z")


def owner_from_identity(identity: Mapping[str, Any] | None) -> str | None:
    """The owner of a request: ``userArn``, else ``caller``, ``user`` or ``accountId``.

    An assumed-role ARN stands for its role, not its session: the session name of an ECS task,
    a Lambda function or a CLI login changes from one session to the next, and jobs must not
    get lost with it (``arn:aws:sts::1:assumed-role/Role/s1`` -> ``arn:aws:sts::1:assumed-role/Role``).
    """
    if not identity:
        return None
    for key in ("userArn", "caller", "user", "accountId"):
        value = identity.get(key)
        if isinstance(value, str) and value.strip():
            value = value.strip()
            match = _ASSUMED_ROLE.match(value)
            return match.group(1) if match else value
    return None


def owner_from_event(event: Mapping[str, Any]) -> str | None:
    """The owner of an API Gateway REST proxy event (None when it carries no identity)."""
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    identity = context.get("identity") if isinstance(context, Mapping) else None
    return owner_from_identity(identity if isinstance(identity, Mapping) else None)


def require_owner(event: Mapping[str, Any]) -> str:
    """The owner, or ``Forbidden`` (403) for a request without any identity."""
    owner = owner_from_event(event)
    if owner is None:
        raise Forbidden()
    return owner


def caller_from_event(event: Mapping[str, Any]) -> str:
    """Who made a request, for the change log: the authenticated ARN as given (an assumed role's
    session name kept: it names the person or task behind the role), else the owner;
    ``Forbidden`` without any identity."""
    owner = require_owner(event)
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    identity = context.get("identity") if isinstance(context, Mapping) else None
    arn = identity.get("userArn") if isinstance(identity, Mapping) else None
    return arn.strip() if isinstance(arn, str) and arn.strip() else owner
