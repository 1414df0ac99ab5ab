"""The ``deliver()`` dispatcher: one execution to its target.

The executor calls :func:`deliver` with the job's ``target`` (a plain dict of the API contract,
secrets already decrypted), the identity of the delivery and the deployment's
:class:`TargetPolicy`. It gets back a :class:`DeliveryResult` that says what happened and whether
another attempt is worth it; ``deliver`` never raises for a failure of the target.
"""

from __future__ import annotations

import math
from typing import Callable

from scheduler import templates
from scheduler.targets.delivery import (DEFAULT_TIMEOUT_SECONDS, FAILED, TIMED_OUT, Delivery, DeliveryResult,
                                        TargetPolicy, permanent)

def deliver(
    target: dict,
    delivery: Delivery,
    policy: TargetPolicy,
    *,
    timeout_cap: float | None = None,
) -> DeliveryResult:
    """Render placeholders in the body, then deliver to an http or amqp target.

    Never raises for a target's failure (returns a failed DeliveryResult); ``timeout_cap`` bounds
    the time further (the executor passes its remaining Lambda time). The time spent is bounded
    by ``min(target.timeout_seconds, timeout_cap)`` (plus a few milliseconds of bookkeeping).
    """
    try:
        if not isinstance(target, dict):
            return permanent("invalid target: not an object")
        kind = target.get("type")
        if kind not in ("http", "amqp"):
            return permanent(f"invalid target: unknown type {kind!r}" if isinstance(kind, str)
                             else "invalid target: missing type")
        budget, problem = _budget(target, timeout_cap)
        if problem is not None:
            return permanent(problem)
        if budget <= 0:
            return DeliveryResult(TIMED_OUT, True, error="no time left for the delivery")
        target = _rendered(target, delivery)
        return _deliverer(kind)(target, delivery, policy, budget=budget)
    except Exception as exc:  # the contract: never raise for a delivery
        return DeliveryResult(FAILED, True, error=f"internal error while delivering: {type(exc).__name__}")


_DELIVERERS: dict[str, Callable[..., DeliveryResult]] = {}


def _deliverer(kind: str) -> Callable[..., DeliveryResult]:
    """The function delivering ``kind`` targets. Each target module is imported on its first
    delivery (an executor of HTTP jobs never loads pika), then kept in a dict."""
    found = _DELIVERERS.get(kind)
    if found is None:
        if kind == "http":
            from scheduler.targets.http import deliver_http as found
        else:
            from scheduler.targets.amqp import deliver_amqp as found
        _DELIVERERS[kind] = found
    return found


def _budget(target: dict, timeout_cap: float | None) -> tuple[float, str | None]:
    raw = target.get("timeout_seconds")
    if raw is None:
        timeout = DEFAULT_TIMEOUT_SECONDS
    elif isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw <= 0:
        return 0.0, "invalid target: timeout_seconds must be a positive number"
    else:
        timeout = float(raw)
    if timeout_cap is not None:
        timeout = min(timeout, float(timeout_cap))
    return timeout, None


def _rendered(target: dict, delivery: Delivery) -> dict:
    """A copy of ``target`` whose text body has its placeholders rendered (binary bodies kept)."""
    body = target.get("body")
    if not isinstance(body, str):
        return target
    if target.get("type") == "amqp" and (target.get("body_encoding") or "utf-8").lower() == "base64":
        return target
    return {**target, "body": templates.render(body, delivery)}
