"""Paging of the API's listings: the position a cursor holds, and a page of a listing in name
order (jobs, calendars, alert rule sets) cut to what one answer can carry."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from scheduler.api.cursors import CursorCodec, InvalidCursor
from scheduler.api.errors import BadRequest


def cursor_position(
    cursors: CursorCodec, cursor: str | None, scope: str, key: str, valid: Callable[[Any], bool]
) -> Any:
    """The position ``key`` a page cursor of ``scope`` holds (None without a cursor); a 400 on
    ``cursor`` when it was not issued for this listing or its position is malformed."""
    if cursor is None:
        return None
    try:
        position = cursors.decode(cursor, scope).get(key)
    except InvalidCursor as exc:
        raise BadRequest("cursor", str(exc)) from None
    if not valid(position):
        raise BadRequest("cursor", "malformed cursor")
    return position


# The JSON a page's items may come to: the Lambda's answer (at most 6 MB) holds the page as a
# string, where each quote and backslash of it is escaped again, so at most twice this.
PAGE_BUDGET_BYTES = 2_500_000
# The rows a page reads first. Later reads take no more than the budget left has room for at the
# biggest item seen so far (plus the one that tells whether another follows), and at most as
# many as were read before (so a run of small rows ahead of big ones reads at most about twice
# what the page holds): the rows are read as the page needs them, not all of ``limit`` at once.
FIRST_READ_ROWS = 16


def _page_items(
    fetch: Callable[[str | None, int], Sequence[Any]],
    after_name: str | None,
    limit: int,
    to_json: Callable[[Any], dict[str, Any]],
) -> tuple[list[dict[str, Any]], str | None, bool]:
    """The page's items, the name of its last one and whether more follow, read in steps from
    ``fetch`` and stopped once the page is full (and one more row was seen) or its JSON would pass
    ``PAGE_BUDGET_BYTES`` (the first item is taken whatever its size)."""
    items: list[dict[str, Any]] = []
    last_name: str | None = None
    spent = biggest = read = 0
    while True:
        count = limit - len(items) + 1  # the rest of the page, and one to know whether more follow
        count = min(count, max(FIRST_READ_ROWS, read))
        if biggest:
            count = min(count, max(0, PAGE_BUDGET_BYTES - spent) // biggest + 1)
        rows = fetch(last_name if read else after_name, count)
        read += len(rows)
        for row in rows:
            if len(items) == limit:
                return items, last_name, True
            item = to_json(row)
            size = len(json.dumps(item, default=str))  # as answered: non-ASCII escaped (an emoji is 12 bytes)
            if items and spent + size > PAGE_BUDGET_BYTES:
                return items, last_name, True
            items.append(item)
            last_name, spent, biggest = row.name, spent + size, max(biggest, size)
        if len(rows) < count:
            return items, last_name, False


def name_ordered_page(
    cursors: CursorCodec,
    cursor: str | None,
    scope: str,
    key: str,
    limit: int,
    fetch: Callable[[str | None, int], Sequence[Any]],
    to_json: Callable[[Any], dict[str, Any]],
) -> Response[Any]:
    """A page of a listing in name order, ``{key: [...], "next_cursor": ...}``: ``fetch(after_name,
    count)`` reads the next ``count`` rows after ``after_name``. A page is cut where its items
    come to ``PAGE_BUDGET_BYTES`` of JSON (at least one item), the rest left to the next page: a
    Lambda answers at most 6 MB, and 50 jobs with 256 KiB bodies are more. The rows are read in
    steps (see ``FIRST_READ_ROWS``), so a page of 200 big jobs cut after 3 reads 16 rows,
    not 201; ``next_cursor`` is there when a row was seen past the page."""
    after_name = cursor_position(cursors, cursor, scope, "after_name", lambda value: isinstance(value, str))
    items, last_name, more = _page_items(fetch, after_name, limit, to_json)
    next_cursor = cursors.encode(scope, {"after_name": last_name}) if more else None
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body={key: items, "next_cursor": next_cursor}
    )
