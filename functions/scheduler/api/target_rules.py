"""The rules a job's targets answer to beyond their model, shared by the job and the alert rule
set routes: the deployment's broker and reach to AWS, for a job's target and each alert rule's,
and the alert rules' secrets sealed as stored (a ``"***"`` keeping the one stored)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api.errors import BadRequest
from scheduler.core.constants import AWS_TARGET_TYPES
from scheduler.core.errors import MaskedSecretError
from scheduler.core.urls import default_broker_open_to
from scheduler.secrets import SecretBox, seal_target_secrets, stored_rule


def require_broker(data: dict[str, Any], settings: Any, owner: str | None) -> None:
    """An AMQP target without a url needs the deployment's default broker, open to ``owner``
    (its operator may list who may use it): else a 400 on target.url."""
    target = data.get("target") or {}
    if target.get("type") != "amqp" or target.get("url"):
        return
    if not getattr(settings, "default_broker_url", None):
        raise BadRequest("target.url", "is required: this deployment has no default broker")
    if not default_broker_open_to(tuple(getattr(settings, "default_broker_owners", ())), owner):
        raise BadRequest(
            "target.url", "is required: this deployment's broker is not open to you (give your broker's url)"
        )


def require_reachable_target(data: dict[str, Any], settings: Any) -> None:
    """Where the executor cannot reach AWS (``SCHEDULER_AWS_TARGETS=false``: no NAT gateway), an
    AWS target, or an HTTP target signed as a role (its role is assumed through STS), is a 400
    naming the field, rather than deliveries that time out."""
    if getattr(settings, "aws_targets", True):
        return
    target = data.get("target") or {}
    reason = "this deployment's executor has no route to AWS (deployed with nat_gateways=0)"
    if target.get("type") in AWS_TARGET_TYPES:
        raise BadRequest("target.type", f"{target['type']} targets are not available: {reason}")
    if (target.get("auth") or {}).get("type") == "sigv4":
        raise BadRequest("target.auth.type", f"sigv4 (a role assumed through STS) is not available: {reason}")


def seal_alerts(alerts: Any, box: SecretBox, stored: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The alert rules as stored: each target's secrets sealed, a ``"***"`` keeping the one
    stored for the same rule of ``stored`` (``stored_rule``: matched by its target, not by its
    place alone, so a reordered or shortened list never hands one hook's secret to another;
    None: no rules)."""
    if not alerts:
        return None
    before = list(stored or ())
    sealed = []
    for i, alert in enumerate(alerts):
        match = stored_rule(alert, i, before)
        kept = dict(match["target"]) if match is not None else None
        try:
            target = seal_target_secrets(alert["target"], box, kept)
        except MaskedSecretError as exc:
            raise MaskedSecretError(f"alerts.{i}.{exc.field}", exc.message) from None
        sealed.append({**alert, "target": target})
    return sealed


def require_alert_targets(data: dict[str, Any], settings: Any, owner: str | None) -> None:
    """The broker and reachability rules of a job target, for each alert rule's target too."""
    for i, alert in enumerate(data.get("alerts") or ()):
        try:
            require_broker({"target": alert["target"]}, settings, owner)
            require_reachable_target({"target": alert["target"]}, settings)
        except BadRequest as exc:
            [detail] = exc.details
            raise BadRequest(f"alerts.{i}.{detail['field']}", detail["message"]) from None
