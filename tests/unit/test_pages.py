"""A page of a listing in name order reads its rows in steps: the same pages and cursors as when
it read ``limit + 1`` rows at once and cut them to the size budget, from as few rows as the page
needs (plus one), not 200 rows of 256 KiB each to answer 3."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api import pages
from scheduler.api.cursors import CursorCodec

CODEC = CursorCodec(b"k" * 32)
SCOPE = "jobs-of-alice"
BUDGET = 1_000  # the page's budget in these tests (2.5 MB in the API), items of 1 to 1,500 bytes


@dataclass(frozen=True)
class Row:
    name: str
    size: int


def to_json(row: Row) -> dict[str, Any]:
    return {"name": row.name, "body": "x" * row.size}


class Listing:
    """The rows in name order, read as a store reads them: ``count`` rows after a name. Counts the
    rows handed out and the reads."""

    def __init__(self, sizes: list[int]):
        self.rows = [Row(f"job-{i:04}", size) for i, size in enumerate(sizes)]
        self.read = self.calls = 0

    def fetch(self, after_name: str | None, count: int) -> list[Row]:
        assert count >= 1
        found = [row for row in self.rows if after_name is None or row.name > after_name][:count]
        self.read += len(found)
        self.calls += 1
        return found


def reference_page(rows: list[Row], after_name: str | None, limit: int) -> tuple[list[str], str | None]:
    """The page as it was cut before (``limit + 1`` rows read at once): its names and the name
    its cursor holds (None on the last page)."""
    found = [row for row in rows if after_name is None or row.name > after_name][: limit + 1]
    items: list[Row] = []
    spent = 0
    for row in found[:limit]:
        spent += len(json.dumps(to_json(row)))
        if items and spent > BUDGET:
            break
        items.append(row)
    more = len(found) > len(items)
    return [row.name for row in items], (found[len(items) - 1].name if more else None)


def page(listing: Listing, cursor: str | None, limit: int) -> tuple[list[str], str | None]:
    answer = pages.name_ordered_page(CODEC, cursor, SCOPE, "jobs", limit, listing.fetch, to_json)
    assert isinstance(answer.body, dict)
    return [item["name"] for item in answer.body["jobs"]], answer.body["next_cursor"]


def after_name_of(cursor: str | None) -> str | None:
    return None if cursor is None else CODEC.decode(cursor, SCOPE)["after_name"]


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(1, 1_500), max_size=60), limit=st.integers(1, 25))
def test_pages_are_the_ones_cut_before_and_read_at_most_about_twice_their_rows(sizes, limit):
    """Paging through: every page equals the one read at once, every row is listed once, and a
    page reads no more than twice its rows plus the first read's (small rows ahead of big ones)."""
    listing = Listing(sizes)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pages, "PAGE_BUDGET_BYTES", BUDGET)
        names: list[str] = []
        cursor = None
        while True:
            listing.read = 0
            got, cursor_after = page(listing, cursor, limit)
            assert (got, after_name_of(cursor_after)) == reference_page(listing.rows, after_name_of(cursor), limit)
            assert got or not names, "a page after the first holds at least one item"
            assert listing.read <= 2 * len(got) + pages.FIRST_READ_ROWS
            names += got
            cursor = cursor_after
            if cursor is None:
                break
    assert names == [row.name for row in listing.rows]


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 1_500), count=st.integers(0, 60), limit=st.integers(1, 25))
def test_rows_of_like_size_are_read_up_to_the_page_and_the_one_after(size, count, limit):
    """Past the first read (a few rows), rows of like size are read as the budget left has room
    for: the page's rows and the one that tells whether more follow."""
    listing = Listing([size] * count)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pages, "PAGE_BUDGET_BYTES", BUDGET)
        got, cursor = page(listing, None, limit)
    assert listing.read <= max(len(got) + 1, pages.FIRST_READ_ROWS)
    assert (cursor is not None) == (len(got) < count)


def test_a_page_of_200_big_jobs_reads_the_few_it_answers():
    """The case measured: 200 jobs whose JSON is about 650 KB each, ``limit=200``. The page
    holds 3 and read the first few rows (it read 201, 130 MB, for each page)."""
    listing = Listing([650_000] * 200)
    got, cursor = page(listing, None, 200)
    assert len(got) == 3 and cursor is not None
    assert listing.read == pages.FIRST_READ_ROWS and listing.calls == 1


def test_a_page_of_small_rows_takes_a_few_reads():
    listing = Listing([300] * 250)
    got, cursor = page(listing, None, 200)
    assert len(got) == 200 and after_name_of(cursor) == "job-0199"
    assert listing.read == 201 and listing.calls <= 8
    listing.read = listing.calls = 0
    rest, last = page(listing, cursor, 200)
    assert rest == [f"job-{i:04}" for i in range(200, 250)] and last is None
    assert listing.read == 50


def test_a_row_past_the_budget_alone_is_a_page_of_its_own():
    listing = Listing([100, 3_000_000, 100])
    first, cursor = page(listing, None, 50)
    assert first == ["job-0000"]
    second, cursor = page(listing, cursor, 50)
    assert second == ["job-0001"]
    third, cursor = page(listing, cursor, 50)
    assert third == ["job-0002"] and cursor is None
