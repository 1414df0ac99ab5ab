"""Placeholder rendering for delivery bodies.

A job's body may name the identity of the delivery it travels in, so that the target can
log or deduplicate it without reading the headers::

    {"at": "{{scheduled_at}}", "job": "{{ job_id }}", "try": {{attempt}}}

Recognised placeholders: ``{{job_id}}``, ``{{execution_id}}``, ``{{scheduled_at}}`` (RFC 3339
in UTC, as in the ``X-Scheduler-Scheduled-At`` header) and ``{{attempt}}`` (1-based). Blanks
inside the braces are tolerated (``{{ job_id }}``). Anything else between double braces is
left exactly as written, so bodies that use a template language of their own survive.

A chained run (trigger ``chain``) also knows the execution that caused it:
``{{cause.execution_id}}``, ``{{cause.job_id}}``, ``{{cause.job_name}}``, ``{{cause.status}}``,
``{{cause.http_status}}`` (empty when the target gave none), ``{{cause.response_excerpt}}`` and
``{{cause.error}}`` (empty when none). Those texts come from a target, so they are inserted
escaped as the inside of a JSON string (``"`` as ``\\"``, a newline as ``\\n``): a body such as
``{"previous": "{{cause.response_excerpt}}"}`` stays valid JSON.

A manual run's ``vars`` fill its body's ``{{vars.NAME}}`` (a var not given is left as written),
in the same pass.

Rendering is a single pass: a value that happens to contain ``{{attempt}}`` is not rendered
again. Values are inserted verbatim, without JSON or XML escaping (the values never contain
quotes, backslashes or angle brackets: UUIDs, timestamps and integers).

Only text bodies are rendered: an AMQP body with ``body_encoding: base64`` is binary and is
sent exactly as decoded.
"""

from __future__ import annotations

import json
import re

from scheduler.core.domain import Delivery
from scheduler.core.timeutil import format_time

PLACEHOLDERS = ("job_id", "execution_id", "scheduled_at", "attempt")
CAUSE_PLACEHOLDERS = ("execution_id", "job_id", "job_name", "status", "http_status", "response_excerpt", "error")

_PATTERN = re.compile(r"\{\{\s*(" + "|".join(PLACEHOLDERS) + r")\s*\}\}")
_CAUSE_PATTERN = re.compile(
    r"\{\{\s*(" + "|".join(PLACEHOLDERS) + r"|cause\.(?:" + "|".join(CAUSE_PLACEHOLDERS) + r"))\s*\}\}"
)

# Every placeholder, a manual run's vars included (a var not given is left as written).
_WITH_VARS_PATTERN = re.compile(
    r"\{\{\s*("
    + "|".join(PLACEHOLDERS)
    + r"|cause\.(?:"
    + "|".join(CAUSE_PLACEHOLDERS)
    + r")|vars\.[A-Za-z_][A-Za-z0-9_]*)\s*\}\}"
)


def _json_inside(value: object) -> str:
    """``value`` as text escaped for the inside of a JSON string (empty for None)."""
    return "" if value is None else json.dumps(str(value), ensure_ascii=False)[1:-1]


def values(delivery: Delivery) -> dict[str, str]:
    """The text each placeholder stands for in ``delivery``."""
    table = {
        "job_id": str(delivery.job_id),
        "execution_id": str(delivery.execution_id),
        "scheduled_at": format_time(delivery.scheduled_at) or "",
        "attempt": str(delivery.attempt),
    }
    if delivery.cause is not None:
        for name in CAUSE_PLACEHOLDERS:
            table[f"cause.{name}"] = _json_inside(delivery.cause.get(name))
    return table


def render(text: str, delivery: Delivery, *, with_vars: bool = False) -> str:
    """Replace the known ``{{placeholder}}`` markers of ``text`` with the values of ``delivery``
    (and, ``with_vars``, its manual run's ``{{vars.NAME}}``: the body's only).

    Unknown placeholders are left untouched; the text is scanned once (no recursive rendering).
    """
    if not text or "{{" not in text:
        return text
    table = values(delivery)
    if with_vars and delivery.vars:
        table.update({f"vars.{name}": value for name, value in delivery.vars.items()})
        return _WITH_VARS_PATTERN.sub(lambda match: table.get(match.group(1), match.group(0)), text)
    if delivery.cause is None:
        return _PATTERN.sub(lambda match: table[match.group(1)], text)
    return _CAUSE_PATTERN.sub(lambda match: table[match.group(1)], text)
