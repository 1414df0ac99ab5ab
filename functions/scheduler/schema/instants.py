"""The contract's instants and job ids as the request models read them: RFC 3339 date-times
with an offset (never a number or another ISO 8601 form), and canonical UUIDs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator

# RFC 3339 section 5.6 date-time: full-date "T" full-time, the offset required ("Z" or +hh:mm);
# "T" and "Z" may be lower case (section 5.6, note on ABNF case). Not ISO 8601's other forms.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)
_RFC3339_EXAMPLE = "2026-12-01T10:00:00Z or 2026-12-01T11:00:00+01:00"
# A job id as the job routes take it (scheduler.store.rows.is_uuid): the canonical 8-4-4-4-12
# form, hex digits in either case; not "urn:uuid:", braces, or missing or extra dashes.
_CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_job_id(value: object) -> bool:
    """Whether ``value`` is a job id in the form every route takes: a UUID in its canonical
    8-4-4-4-12 text form (either case)."""
    return isinstance(value, str) and _CANONICAL_UUID.fullmatch(value) is not None


def parse_time(value: Any) -> datetime:
    """The instant of an RFC 3339 date-time with an offset (the contract's timestamps), aware and
    convertible to UTC; ``ValueError`` for anything else, a ``datetime`` included."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError(f"must be an RFC 3339 date-time with an offset, like {_RFC3339_EXAMPLE}")
    text = value.upper()
    try:
        instant = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError as exc:  # a day, hour or offset out of range
        raise ValueError(f"is not a valid RFC 3339 date-time ({exc})") from None
    return _utc_convertible(instant)


def _utc_convertible(instant: datetime) -> datetime:
    try:
        instant.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is in year 0 in UTC
        raise ValueError("is outside the range of representable instants") from None
    return instant


def _instant_from_json(value: Any) -> Any:
    # JSON gives text, which must be RFC 3339 (a number is not Unix time here); an aware datetime
    # (a model built in Python) is taken as it is, if it converts to UTC.
    if isinstance(value, datetime) and value.tzinfo is not None:
        return _utc_convertible(value)
    return parse_time(value)


#: An instant of the contract (``run_at``, ``start_at``, ``end_at``, a preview's ``after``): an
#: RFC 3339 date-time with an offset (``Z`` or ``+hh:mm``), never a number, a numeric string, a
#: date alone, a naive time or another ISO 8601 form. Its JSON schema is ``format: date-time``.
Instant = Annotated[AwareDatetime, BeforeValidator(_instant_from_json)]
