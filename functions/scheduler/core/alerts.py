"""The records of alerting: a job with alert rules as a sweep reads it, its alert state held
while its rules decide, the decision, an alert delivery (queued, sent, recorded), and an owner's
rule set for every job with a tag."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.core.constants import AWS_SHORT_FIELD_LIMITS
from scheduler.core.domain import JobState


@dataclass(frozen=True)
class AlertJobRow:
    """A job with alert rules: its identity, its rules as stored, its run state, and the owner's
    rule sets of its tags (``{"name", "alerts"}`` each, by name)."""

    id: str
    owner: str
    name: str
    alerts: tuple[Mapping[str, Any], ...]
    state: JobState
    next_run_at: datetime | None
    tag_rules: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class HeldAlertState:
    """A job's alert state as held by a sweep (``seen``: the last finished execution read, by
    its key), the job as it is now, and the database's now."""

    job: AlertJobRow
    now: datetime
    seen_started_at: datetime | None = None
    seen_seq: int | None = None
    failures_in_row: int = 0
    incident_id: str | None = None
    incident_opened_at: datetime | None = None
    fired: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlertDecision:
    """What the rules decided: the job's new alert state (the columns of ``alert_states``) and
    the alerts to queue (the columns of ``alert_deliveries`` the decision gives)."""

    state: Mapping[str, Any]
    alerts: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class AlertDelivery:
    """One alert and its delivery (a row of ``alert_deliveries``)."""

    id: str
    owner: str
    job_id: str
    job_name: str
    rule_on: str
    threshold: float | None
    event: str  # fired | recovered
    incident_id: str
    execution_id: str | None
    target: Mapping[str, Any]
    vars: Mapping[str, Any]
    created_at: datetime
    status: str  # pending | delivered | failed
    attempts: int
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    last_error: str | None = None
    http_status: int | None = None
    rule_name: str | None = None  # the rule set by tag that fired it (None: the job's own rules)


@dataclass(frozen=True)
class AlertRuleRecord:
    """An owner's rule set (a row of ``alert_rules``): ``alerts`` apply to every job of the
    owner that carries ``tag``; its targets' secrets sealed."""

    owner: str
    name: str
    tag: str
    alerts: tuple[Mapping[str, Any], ...]
    version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AlertRuleRecord:
        """The record of a row of ``alert_rules``."""
        return cls(
            owner=row["owner"],
            name=row["name"],
            tag=row["tag"],
            alerts=tuple(row["alerts"] or ()),
            version=row["version"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


# The placeholders of an alert's target ({{name}}), the delivery's own among them (job_id,
# execution_id: the alert's id, scheduled_at, attempt): rendered in one pass, so that a value
# (a target's error quoted in the message) is sent as it is, never rendered again.
ALERT_PLACEHOLDERS = (
    "job_id",
    "execution_id",
    "scheduled_at",
    "attempt",
    "job_name",
    "alert",
    "event",
    "threshold",
    "incident_id",
    "status",
    "http_status",
    "error",
    "started_at",
    "failures",
    "lateness_seconds",
    "message",
    "console_url",
    "alert_id",
    "rule",
)
_PLACEHOLDER = re.compile(r"\{\{\s*(" + "|".join(ALERT_PLACEHOLDERS) + r")\s*\}\}")
# A target's fields that are never rendered (where it goes, how it signs in).
_NOT_RENDERED = frozenset({"type", "url", "auth", "method", "queue_url", "topic_arn", "event_bus_arn", "role_arn"})
DEFAULT_ALERT_BODY = '{"text": "{{message}}\\n{{console_url}}"}'
# The short fields of AWS targets, at most (characters), and the characters each takes: a job's
# are checked at write time as they render (schema.aws_models); an alert's render its message and
# its error, of any length and any characters, so they are fitted when rendered: an alert cut
# short is better than one its service refuses.
_SHORT_FIELDS = AWS_SHORT_FIELD_LIMITS
_UNFIT = {
    "subject": re.compile(r"[^\x20-\x7e]"),  # printable ASCII (SNS)
    "message_group_id": re.compile(r"[^\x21-\x7e]"),  # printable ASCII, no blank (SQS, SNS FIFO)
    "source": re.compile(r"[\x00-\x1f\x7f]"),
    "detail_type": re.compile(r"[\x00-\x1f\x7f]"),
}


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def slack_escaped(text: str) -> str:
    """``text`` as Slack's message text shows it literally: ``&``, ``<`` and ``>`` escaped (no
    ``<!channel>`` mention, no ``<url|label>`` link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_text(text: str, variables: Mapping[str, Any]) -> str:
    """``text`` with the alert's placeholders replaced. In a text that is JSON (it starts with
    ``{`` or ``[``, not a placeholder's ``{{``), each value is escaped for a JSON string, so an
    error with quotes keeps a Slack body valid."""
    if "{{" not in text:
        return text
    start = text.lstrip()
    as_json = start[:1] in ("{", "[") and not start.startswith("{{")

    def value(match: re.Match[str]) -> str:
        found = _text(variables.get(match.group(1)))
        return json.dumps(found)[1:-1] if as_json else found

    return _PLACEHOLDER.sub(value, text)


def render_alert_target(target: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, Any]:
    """The alert's target with its text fields rendered (headers' values too), an AWS target's
    short fields fitted to what its service takes (``_SHORT_FIELDS``); an HTTP target without a
    body gets the Slack-compatible ``DEFAULT_ALERT_BODY`` (as JSON)."""
    rendered: dict[str, Any] = {}
    for name, value in target.items():
        if name in _NOT_RENDERED:
            rendered[name] = value
        elif isinstance(value, str):
            rendered[name] = render_text(value, variables)
        elif name == "headers" and isinstance(value, Mapping):
            rendered[name] = {k: render_text(v, variables) if isinstance(v, str) else v for k, v in value.items()}
        else:
            rendered[name] = value
    for name, limit in _SHORT_FIELDS.items():
        if isinstance(rendered.get(name), str) and target.get("type") != "http":
            fitted = _UNFIT[name].sub("_" if name == "message_group_id" else " ", rendered[name]).strip()
            rendered[name] = fitted[:limit] or "-"
    if target.get("type") == "http" and not target.get("body") and target.get("method", "POST") not in ("GET", "HEAD"):
        # Slack reads <...> in a text as a mention or a link: a target's answer quoted in the
        # message (its reason phrase, its error) must not ping a channel or disguise a link.
        message = slack_escaped(_text(variables.get("message")))
        rendered["body"] = render_text(DEFAULT_ALERT_BODY, {**variables, "message": message})
        headers = dict(rendered.get("headers") or {})
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        rendered["headers"] = headers
    return rendered
