"""Per-target limits: a job's ``limits`` read once (``TargetLimit``), and the key they count
under, by default the origin of the target (the same API, whichever job calls it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

# The URL or ARN naming where a target of each type delivers.
_WHERE = {
    "http": "url",
    "amqp": "url",
    "sqs": "queue_url",
    "sns": "topic_arn",
    "eventbridge": "event_bus_arn",
    "lambda": "function_arn",
}


def origin(target: Mapping[str, Any] | None) -> str:
    """The default key of a target's limits: an URL's ``scheme://host[:port]`` (no credentials,
    no path), an AWS target's ARN or queue URL, the deployment's broker for an AMQP target
    without one."""
    target = target or {}
    kind = str(target.get("type") or "http")
    where = target.get(_WHERE.get(kind, "url"))
    if not isinstance(where, str) or not where:
        return f"{kind}:default"
    if where.startswith("arn:"):
        return where
    parts = urlsplit(where)
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme.lower()}://{host}{port}"


@dataclass(frozen=True)
class TargetLimit:
    """A job's limits: at most ``max_in_flight`` deliveries to ``key`` at once and at most
    ``per_second`` started in any second, across every runner (None: that bound is not set)."""

    key: str
    max_in_flight: int | None
    per_second: float | None
    # Whose key it is: one owner's jobs share a key's slots, another owner's key of the same
    # name is another key (else one tenant could hold another's deliveries, or time them).
    owner: str = ""

    @classmethod
    def of(
        cls, limits: Mapping[str, Any] | None, target: Mapping[str, Any] | None, owner: str = ""
    ) -> TargetLimit | None:
        """The limits of a job of ``owner`` (None for a job without)."""
        if not limits:
            return None
        per_second = limits.get("per_second")
        return cls(
            key=str(limits.get("key") or origin(target)),
            max_in_flight=limits.get("max_in_flight"),
            per_second=None if per_second is None else float(per_second),
            owner=owner,
        )

    @property
    def slot_key(self) -> str:
        """The key its slots are counted under: the owner's, then the key (a key is one line)."""
        return f"{self.owner}\n{self.key}" if self.owner else self.key

    def describe(self) -> str:
        """Why a delivery waits, in words (an execution's ``waited_for``)."""
        bounds = []
        if self.max_in_flight is not None:
            bounds.append(f"max_in_flight {self.max_in_flight}")
        if self.per_second is not None:
            bounds.append(f"per_second {self.per_second:g}")
        return f"limits of {self.key} ({', '.join(bounds)})"


@dataclass(frozen=True)
class SlotHandBack:
    """A deployed executor's limited delivery whose key stayed full, handed back rather than
    waited for in its Lambda: its start undone (the running execution ``execution_id``, started
    at ``started_at``, removed and its attempt not counted), the lease held by ``lock_token``
    shortened to a pause, after which a fan-out claims the job again. ``waited_seconds``: how long
    this delivery waited before it gave up; ``waited_for``: why (``TargetLimit.describe``)."""

    job_id: str
    lock_token: str
    execution_id: str
    started_at: datetime
    waited_seconds: float
    waited_for: str
