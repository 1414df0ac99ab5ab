"""What the calendars did to a schedule's occurrences, told: where ``on_excluded: shift`` moved an
occurrence from (an execution's ``shifted_from``), and the preview's explanation of the
occurrences it lists, with those the calendars left out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from scheduler.schedules.base import _ONE_US, Schedule, just_before
from scheduler.schedules.calendars import Calendar, excluded_span, floor_in_span


def shifted_from(
    base: Schedule, calendars: Sequence[Calendar], at: datetime, since: datetime | None = None
) -> tuple[datetime, str] | None:
    """Where ``on_excluded: shift`` moved the occurrence ``at`` from: the first occurrence of
    ``base`` (after ``since``) in the excluded span that ends at ``at``, and the calendar that
    excludes it; None when ``at`` was not moved (the preview's ``shifted_from``, and an
    execution's)."""
    span = excluded_span(calendars, at - _ONE_US)
    if span is None or span.end != at:
        return None
    moved = base.next_after(floor_in_span(span.start, since))
    if moved is None or moved >= at:
        return None
    # The calendar that excludes the occurrence itself: a chained span's last calendar (a 26
    # December after another's 25th) may not be the one that excluded it.
    first = excluded_span(calendars, moved)
    return moved, first.by if first is not None else span.by


def explain(
    base: Schedule,
    calendars: Sequence[Calendar],
    on_excluded: str,
    found: Sequence[datetime],
    after: datetime,
    start_at: datetime | None = None,
) -> list[dict[str, Any]]:
    """The preview's items for the occurrences ``found`` (those of ``with_calendars(base, ...)``
    after ``after``): ``{"at"}``, with ``shifted_from`` (the base occurrence it was moved from,
    the first when several were) and ``excluded_by`` (the calendar) for a shifted one; and, with
    ``skip``, the occurrences left out listed between them as ``{"at", "excluded_by"}`` (at most
    as many as ``found``); none before ``start_at``."""
    items: list[dict[str, Any]] = []
    budget = len(found)
    previous = since = after if start_at is None else max(after, just_before(start_at))
    for at in found:
        if on_excluded == "skip":
            raw = base.next_after(previous)
            while raw is not None and raw < at and budget > 0:
                span = excluded_span(calendars, raw)
                if span is None or span.end is None:
                    break
                items.append({"at": raw, "excluded_by": span.by})
                budget -= 1
                raw = base.next_after(raw)
        item: dict[str, Any] = {"at": at}
        shift = shifted_from(base, calendars, at, since) if on_excluded == "shift" else None
        if shift is not None:
            item.update(shifted_from=shift[0], excluded_by=shift[1])
        items.append(item)
        previous = at
    return items
