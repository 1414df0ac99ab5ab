"""Placeholder rendering for delivery bodies.

A job's body may name the identity of the delivery it travels in, so that the target can
log or deduplicate it without reading the headers::

    {"at": "{{scheduled_at}}", "job": "{{ job_id }}", "try": {{attempt}}}

Recognised placeholders: ``{{job_id}}``, ``{{execution_id}}``, ``{{scheduled_at}}`` (RFC 3339
in UTC, as in the ``X-Scheduler-Scheduled-At`` header) and ``{{attempt}}`` (1-based). Blanks
inside the braces are tolerated (``{{ job_id }}``). Anything else between double braces is
left exactly as written, so bodies that use a template language of their own survive.

Rendering is a single pass: a value that happens to contain ``{{attempt}}`` is not rendered
again. Values are inserted verbatim, without JSON or XML escaping (the values never contain
quotes, backslashes or angle brackets: UUIDs, timestamps and integers).

Only text bodies are rendered: an AMQP body with ``body_encoding: base64`` is binary and is
sent exactly as decoded.
"""

from __future__ import annotations

import re

from scheduler.core.domain import Delivery
from scheduler.core.timeutil import format_time

PLACEHOLDERS = ("job_id", "execution_id", "scheduled_at", "attempt")

_PATTERN = re.compile(r"\{\{\s*(" + "|".join(PLACEHOLDERS) + r")\s*\}\}")


def values(delivery: Delivery) -> dict[str, str]:
    """The text each placeholder stands for in ``delivery``."""
    return {
        "job_id": str(delivery.job_id),
        "execution_id": str(delivery.execution_id),
        "scheduled_at": format_time(delivery.scheduled_at) or "",
        "attempt": str(delivery.attempt),
    }


def render(text: str, delivery: Delivery) -> str:
    """Replace the known ``{{placeholder}}`` markers of ``text`` with the values of ``delivery``.

    Unknown placeholders are left untouched; the text is scanned once (no recursive rendering).
    """
    if not text or "{{" not in text:
        return text
    table = values(delivery)
    return _PATTERN.sub(lambda match: table[match.group(1)], text)
