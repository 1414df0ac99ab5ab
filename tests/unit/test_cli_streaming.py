"""Printing a page at a time (``scheduler.cli.streaming``): the JSON and YAML written piece by
piece are the bytes of one document of every page, whatever the values and however the pages
split them; a streamed table widens a column from the page that needs it; an output cut short
ends with ``%INCOMPLETE``, which ``apply`` refuses."""

from __future__ import annotations

import io
import json
import random
import string

import pytest

from scheduler.cli.common import UsageError
from scheduler.cli.manifests import read_documents
from scheduler.cli.output import format_table
from scheduler.cli.reading import yaml_loader, yaml_text
from scheduler.cli.streaming import INCOMPLETE, Rows, TableLines, emit, json_close, json_items, listing_pieces

# Values that print differently from one place to another if anything does: quotes, escapes,
# line breaks (U+2028, NEL, CRLF), emoji, YAML indicators, long lines that YAML folds, nesting.
TRICKY = [
    "",
    " leading and trailing ",
    'quote " and \\ backslash',
    "line\nbreak\r\nand\ttab",
    "nel \x85 and ls \u2028 ps \u2029",
    "ünïcødé 😀 € 中文",
    "- starts like a list item",
    "key: value # not a comment",
    "*alias &anchor !tag %directive @at `tick`",
    "yes",
    "null",
    "0x1F",
    "1e3",
    "2026-01-01T00:00:00Z",
    "x" * 200,
    " ".join(["word"] * 60),
    {"nested": {"deeper": [1, 2.5, None, True, {"k": "v"}, []], "empty": {}}},
    [["a", "b"], [], [{}]],
    -(10**15),
    0.1,
    None,
    False,
]


def _rows(rnd: random.Random, count: int) -> list[dict]:
    """Rows as an answer's JSON gives them: no object shared by two (which YAML would write once,
    with an anchor, and a page could not)."""
    rows = [
        {
            "name": "".join(rnd.choice(string.ascii_letters) for _ in range(rnd.randint(1, 30))),
            "a": rnd.choice(TRICKY),
            "b": {"c": rnd.choice(TRICKY), "d": [rnd.choice(TRICKY) for _ in range(rnd.randint(0, 3))]},
        }
        for _ in range(count)
    ]
    return json.loads(json.dumps(rows))


def _pages(rows: list[dict], sizes: list[int]) -> list[dict]:
    pages, start = [], 0
    for size in sizes:
        pages.append({"jobs": rows[start : start + size], "next_cursor": "more"})
        start += size
    return pages


@pytest.mark.parametrize("seed", range(40))
def test_json_and_yaml_listings_are_the_bytes_of_one_document(seed):
    rnd = random.Random(seed)
    sizes = [rnd.randint(0, 4) for _ in range(rnd.randint(0, 5))]  # empty pages among them
    rows = _rows(rnd, sum(sizes))
    pages = _pages(rows, sizes)
    whole = {"jobs": rows, "next_cursor": None}
    assert "".join(listing_pieces("json", "jobs", pages, Rows((), list), "")) == (
        json.dumps(whole, indent=2, ensure_ascii=False) + "\n"
    )
    assert "".join(listing_pieces("yaml", "jobs", pages, Rows((), list), "")) == yaml_text(whole).rstrip() + "\n"


def test_a_json_list_written_in_pieces_is_json_dumps_of_the_list():
    rows = _rows(random.Random(7), 9)
    text = json_items(rows[:4], 0, True) + json_items([], 0, False) + json_items(rows[4:], 0, False)
    assert text + json_close(0, False) == json.dumps(rows, indent=2, ensure_ascii=False)
    assert json_close(0, True) == json.dumps([], indent=2)


def test_a_streamed_table_is_format_table_while_the_first_page_holds_the_widest_cells():
    headers = ("NAME", "STATE")
    pages = [[["a-long-name", "active"], ["b", None]], [["c", "paused"]]]
    lines = TableLines(headers)
    assert "".join(lines.page(rows) for rows in pages) == format_table(headers, pages[0] + pages[1]) + "\n"


def test_a_streamed_table_widens_a_column_from_the_page_that_needs_it():
    lines = TableLines(("NAME", "STATE"))
    first = lines.page([["a", "active"]])
    later = lines.page([["a-much-longer-name", "paused"], ["b", "active"]])
    assert first == "NAME  STATE\na     active\n"
    assert later == "a-much-longer-name  paused\nb                   active\n"


def test_an_empty_streamed_table_is_the_table_of_no_rows():
    rows = Rows(("NAME",), lambda job: [job["name"]])
    pages = [{"jobs": [], "next_cursor": "x"}, {"jobs": [], "next_cursor": None}]
    assert "".join(listing_pieces("table", "jobs", pages, rows, "no jobs")) == "no jobs\n"


def _failing(pieces: list[str], error: BaseException):
    yield from pieces
    raise error


def test_an_output_cut_short_ends_with_the_incomplete_line_at_the_start_of_a_line():
    out = io.StringIO()
    with pytest.raises(RuntimeError):
        emit(_failing(['{\n  "jobs": [\n    {"a": 1}'], RuntimeError("page 7")), out)
    text = out.getvalue()
    assert text.endswith("\n" + INCOMPLETE + " output: the listing failed before its end (the error is on stderr)\n")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C too
        emit(_failing(["a\n"], KeyboardInterrupt()), out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0] == "a" and lines[1].startswith(INCOMPLETE + " ")


def test_a_reader_gone_gets_no_incomplete_line():
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    with pytest.raises(BrokenPipeError):
        emit(iter(["a\n"]), Closed())


def test_yaml_readers_refuse_an_output_cut_short(tmp_path):
    import yaml

    cut = "---\nname: a\nschedule: '@daily'\n" + INCOMPLETE + " output: the listing failed\n"
    with pytest.raises(yaml.YAMLError):
        list(yaml.safe_load_all(cut))
    path = tmp_path / "cut.yaml"
    path.write_text(cut, encoding="utf-8")
    with pytest.raises(UsageError, match="the output of an export that failed midway"):
        read_documents([str(path)])


def test_the_alias_guard_holds_for_each_document_of_a_stream():
    import yaml

    bomb = ['a0: &a0 ["lol"]'] + [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 10)}]" for i in range(1, 10)]
    text = "name: fine\n---\nname: bomb\n" + "\n".join(bomb) + "\n"
    with pytest.raises(yaml.YAMLError, match="aliases expand it past"):
        list(yaml.load_all(text, Loader=yaml_loader()))
    small = "---\n".join(f"name: n{i}\nx: &x [1, 2]\ny: *x\n" for i in range(50))
    assert len(list(yaml.load_all(small, Loader=yaml_loader()))) == 50
