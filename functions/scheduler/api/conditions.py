"""Conditional requests (RFC 9110): ``If-Match`` (the version a change is based on: a stale one
answers 412 and nothing is written) on the PUT, PATCH and DELETE of a job, a calendar or a rule
set and on a job's pause and resume; ``If-None-Match: *`` (never over one that exists) on those
PUTs and a job's PATCH. The other routes (a creation, a run now, a backfill, a bulk pause) read
neither (docs/api.md says which do)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Header

from scheduler.api.errors import ApiError, BadRequest

# Optional parameters are typed without None (their default is None), so the OpenAPI document
# says "a string, optional" rather than "a string or null".
IfMatch = Annotated[
    str,
    Header(
        alias="If-Match",
        max_length=64,
        description='The version the change is based on: `3` or `"3"`. A stale one answers 412.',
    ),
]
IfNoneMatch = Annotated[
    str,
    Header(
        alias="If-None-Match",
        max_length=64,
        description="`*`: only if there is none: a request that would change one that exists answers 412.",
    ),
]

_IF_MATCH = re.compile(r'^(?:W/)?"(\d{1,9})"\Z|^(\d{1,9})\Z')


def parse_if_match(value: str | None) -> int | None:
    """The expected version of ``If-Match`` (``3``, ``"3"``, ``W/"3"``); None when absent or ``*``."""
    if value is None:
        return None
    value = value.strip()
    if value == "*":
        return None
    match = _IF_MATCH.match(value)
    if not match:
        raise BadRequest("If-Match", 'must be a version, like 3 or "3"')
    return int(match.group(1) or match.group(2))


def create_only(if_none_match: str | None, if_match: str | None) -> bool:
    """Whether ``If-None-Match`` asks for a create only (``*``, the one form it takes here); given
    with ``If-Match``, the two cannot both hold (400)."""
    if if_none_match is None:
        return False
    if if_none_match.strip() != "*":
        raise BadRequest("If-None-Match", "must be * (only if there is none)")
    if if_match is not None:
        raise BadRequest("If-None-Match", "cannot be given with If-Match")
    return True


def refuse_over_existing(
    if_none_match: str | None, if_match: str | None, read: Callable[[], object], what: str
) -> None:
    """``If-None-Match`` on a request that changes a ``what`` and never creates one (a job's or a
    calendar's replacement): ``*`` holds only when there is none, and then the request answers
    404 as without it (``read`` raises its not-found); there is one, so 412, nothing written."""
    if not create_only(if_none_match, if_match):
        return
    read()
    raise ApiError(
        f"the {what} exists (If-None-Match: *)",
        [{"field": "If-None-Match", "message": f"the {what} exists: this request changes it and never creates one"}],
        status=412,
        code="version_mismatch",
    )
