"""Time formatting shared by the API answers and the delivery headers."""

from __future__ import annotations

from datetime import UTC, datetime

UTC = UTC


def format_time(value: datetime | None) -> str | None:
    """RFC 3339 in UTC with a ``Z``: whole seconds when the value has none, else microseconds."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("naive datetime")
    value = value.astimezone(UTC)
    spec = "seconds" if value.microsecond == 0 else "microseconds"
    return value.isoformat(timespec=spec).replace("+00:00", "Z")


def idempotency_key(job_id: str, scheduled_at: datetime) -> str:
    """The deduplication key of one occurrence: ``<job id>:<scheduled_at>`` (contract)."""
    return f"{job_id}:{format_time(scheduled_at)}"


def parse_time(value: str) -> datetime:
    """An aware datetime of an ISO 8601 text with an offset (what ``isoformat`` wrote)."""
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"an instant needs an offset: {value!r}")
    return parsed
