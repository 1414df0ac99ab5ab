"""What a change did to a job: the diff of its writable fields, its secrets masked, and the
cycle check of its chains. Pure functions of ``scheduler.service``'s change hook."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.core.constants import SECRET_MASK
from scheduler.core.timeutil import format_time

if TYPE_CHECKING:
    from scheduler.core.domain import Job, Outcome

# A stored secret is a token "enc:v1:<base64url>" (scheduler.secrets), percent-encoded inside an
# AMQP URL. Every one found in a diff's value is masked, wherever it is (a field to come included).
_TOKEN = re.compile(r"enc(?::|%3A)v1(?::|%3A)[A-Za-z0-9_\-=%]+", re.IGNORECASE)

# The actor of the changes the scheduler makes itself (a pause's "by" too): a resume at the
# pause's "until", a pause by the runner, a delete after completion (after_completion: delete).
SCHEDULER_ACTOR = "scheduler"


def _masked(value: Any) -> Any:
    """A JSON value of a diff: times as RFC 3339, tuples as lists, every secret token ``***``."""
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, str):
        return _TOKEN.sub(SECRET_MASK, value)
    if isinstance(value, (list, tuple)):
        return [_masked(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _masked(v) for k, v in value.items()}
    return value


def _flat(spec: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """The leaves of a spec by dotted path (objects are walked, lists are leaves)."""
    leaves: dict[str, Any] = {}
    for key, value in (spec or {}).items():
        path = f"{prefix}{key}"
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, Mapping) and value:
            leaves.update(_flat(value, f"{path}."))
        elif value is not None and value != () and value != [] and value != {}:
            leaves[path] = value
    return leaves


def spec_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"path": {"from": old, "to": new}}`` for each leaf that differs (None: absent), secrets
    masked. A secret that changed shows as ``{"from": "***", "to": "***", "secret": true}``: that
    it changed, never what it is."""
    old, new = _flat(before), _flat(after)
    diff: dict[str, Any] = {}
    for path in sorted(old.keys() | new.keys()):
        was, now = old.get(path), new.get(path)
        if was == now:
            continue
        entry = {"from": _masked(was), "to": _masked(now)}
        if _TOKEN.search(repr(was)) or _TOKEN.search(repr(now)):
            entry["secret"] = True
        diff[path] = entry
    return diff


def find_cycle(start: str, links: Mapping[str, tuple[str, ...]]) -> list[str] | None:
    """A path ``start -> ... -> start`` in the graph ``links`` (node -> the nodes it leads to),
    or None when no cycle goes through ``start``."""
    path: list[str] = []
    seen: set[str] = set()

    def walk(node: str) -> bool:
        path.append(node)
        for nxt in links.get(node, ()):
            if nxt == start:
                path.append(start)
                return True
            if nxt not in seen:
                seen.add(nxt)
                if walk(nxt):
                    return True
        path.pop()
        return False

    return path if walk(start) else None


def cause_of(job: Job, outcome: Outcome, execution_id: str | None) -> dict[str, Any]:
    """The outcome a chained run knows of the execution that caused it (``{{cause.*}}``)."""
    return {
        "execution_id": execution_id,
        "job_id": job.id,
        "job_name": job.name,
        "status": str(outcome.status),
        "http_status": outcome.http_status,
        "response_excerpt": outcome.response_excerpt,
        "error": outcome.error,
    }
