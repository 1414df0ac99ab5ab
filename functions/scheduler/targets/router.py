"""The ``deliver()`` dispatcher: one execution to its target.

The executor calls :func:`deliver` with the job's ``target`` (a plain dict of the API contract,
secrets already decrypted), the identity of the delivery and the deployment's
:class:`TargetPolicy`. The dict is read once, into its typed view (``targets.views``), which the
target modules receive. It gets back a :class:`Outcome` that says what happened and whether
another attempt is worth it; ``deliver`` never raises for a failure of the target.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from scheduler.core.constants import OVERRIDE_BODY_FIELDS
from scheduler.targets import templates
from scheduler.targets.aws_views import AWS_TYPES, TEXT_FIELDS
from scheduler.targets.results import FAILED, TIMED_OUT, Delivery, Outcome, TargetPolicy, permanent
from scheduler.targets.views import AmqpView, HttpView, InvalidTarget, TargetView, view_of


def deliver(
    target: Any,
    delivery: Delivery,
    policy: TargetPolicy,
    *,
    timeout_cap: float | None = None,
    rendered: bool = False,
) -> Outcome:
    """Render placeholders in the body (every text field of an AWS target), then deliver to an
    http, amqp, lambda, sqs, sns or eventbridge target. ``rendered``: the target's text was
    rendered already (an alert's, in one pass with its own placeholders): sent as it is.

    Never raises for a target's failure (returns a failed Outcome); ``timeout_cap`` bounds
    the time further (the executor passes its remaining Lambda time). The time spent is bounded
    by ``min(target.timeout_seconds, timeout_cap)`` (plus a few milliseconds of bookkeeping).
    """
    try:
        try:
            view = view_of(target)
        except InvalidTarget as exc:
            return permanent(f"invalid target: {exc}")
        budget = view.timeout_seconds if timeout_cap is None else min(view.timeout_seconds, float(timeout_cap))
        if budget <= 0:
            return Outcome(TIMED_OUT, True, error="no time left for the delivery")
        return _deliverer(view.type)(view if rendered else _rendered(view, delivery), delivery, policy, budget=budget)
    except Exception as exc:  # the contract: never raise for a delivery
        return Outcome(FAILED, True, error=f"internal error while delivering: {type(exc).__name__}")


Deliverer = Callable[..., Outcome]
_DELIVERERS: dict[str, Deliverer] = {}


def _deliverer(kind: str) -> Callable[..., Outcome]:
    """The function delivering ``kind`` targets. Each target module is imported on its first
    delivery (an executor of HTTP jobs never loads pika), then kept in a dict."""
    known = _DELIVERERS.get(kind)
    if known is not None:
        return known
    found: Deliverer
    if kind == "http":
        from scheduler.targets.http import deliver_http as found
    elif kind in AWS_TYPES:
        from scheduler.targets.aws import deliver_aws as found
    else:
        from scheduler.targets.amqp import deliver_amqp as found
    _DELIVERERS[kind] = found
    return found


def preload(kinds: tuple[str, ...] = ("http",)) -> None:
    """Import the delivery of each target type in ``kinds`` now. A long-running runner (local
    mode) calls it at start: imported on the first delivery instead, the module takes about
    0.1 s to load, and every other delivery of that first burst waits on the import."""
    for kind in kinds:
        _deliverer(kind)


def _rendered(view: TargetView, delivery: Delivery) -> TargetView:
    """The view with its text body's placeholders rendered (a binary body is kept); an AWS
    target's every text field."""
    if not isinstance(view, (HttpView, AmqpView)):  # an AWS target: each of its text fields
        body = OVERRIDE_BODY_FIELDS.get(view.type)
        changes: dict[str, Any] = {
            name: templates.render(value, delivery, with_vars=name == body)
            for name in TEXT_FIELDS[view.type]
            if isinstance(value := getattr(view, name), str)
        }
        return dataclasses.replace(view, **changes) if changes else view
    if view.body is None or (isinstance(view, AmqpView) and view.body_encoding == "base64"):
        return view
    rendered = templates.render(view.body, delivery, with_vars=True)
    return view if rendered == view.body else dataclasses.replace(view, body=rendered)
