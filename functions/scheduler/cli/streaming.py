"""Printing what comes a page at a time (``--all`` listings, ``export``) as the pages arrive:
each page written and flushed before the next is asked for, so the first line comes after one
page, not after them all, and what is held is a page.

JSON and YAML are the bytes one document of every page would be (``json.dumps(..., indent=2)``,
``yaml_text``), written piece by piece (of items as JSON gives them: no object shared by two,
which one YAML document would write once, with an anchor). A table cannot be: its columns are as
wide as its widest cell, which only the last page knows. A streamed table's columns are as wide
as the widest cell so far (the header and every page before): the same table as before while no
later page holds a wider cell; one that does widens its column from there on.

A listing that fails midway (an error answer, a lost connection, Ctrl-C) ends its output with
the line ``%INCOMPLETE ...`` (no JSON or YAML reader takes it: a ``%`` line is a YAML directive,
which cannot follow a document; JSON's array is left open too) before the error goes on to
stderr and the exit code: a file the output was sent to can never pass for a whole listing
(``apply`` refuses it by name)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.cli.columns import cell
from scheduler.cli.reading import yaml_text

# The first word of the last line of an output cut short (``apply`` refuses such a file).
INCOMPLETE = "%INCOMPLETE"
INCOMPLETE_LINE = f"{INCOMPLETE} output: the listing failed before its end (the error is on stderr)\n"


@dataclass(frozen=True)
class Rows:
    """A listing's table: its headers and a row's cells."""

    headers: Sequence[str]
    cells: Callable[[dict[str, Any]], Sequence[Any]]


def emit(pieces: Iterable[str], stream: Any = None) -> None:
    """Write each piece as it comes, flushed. When the next piece cannot come (its page failed,
    Ctrl-C), the output ends with ``INCOMPLETE_LINE`` and the exception goes on."""
    out = stream or sys.stdout
    last = "\n"
    try:
        for piece in pieces:
            out.write(piece)
            out.flush()
            last = piece[-1:] or last
    except BrokenPipeError:  # the reader went away (| head): nobody to tell
        raise
    except BaseException:
        try:
            out.write(("" if last == "\n" else "\n") + INCOMPLETE_LINE)
            out.flush()
        except OSError:
            pass
        raise


def json_items(items: Iterable[Any], level: int, first: bool) -> str:
    """Items of a JSON array at nesting ``level``, as ``json.dumps(..., indent=2)`` writes them
    there: ``[`` before the first (``first``), ``,`` before the others; no closing bracket."""
    pad = "\n" + "  " * (level + 1)
    parts = []
    for item in items:
        parts.append(("[" if first else ",") + pad + json.dumps(item, indent=2, ensure_ascii=False).replace("\n", pad))
        first = False
    return "".join(parts)


def json_close(level: int, empty: bool) -> str:
    """The end of an array ``json_items`` opened (``[]`` when it had no item)."""
    return "[]" if empty else "\n" + "  " * level + "]"


def listing_pieces(output: str, key: str, pages: Iterable[dict[str, Any]], table: Rows, empty: str) -> Iterator[str]:
    """Every page's ``key`` items as one listing ``{key: [...], "next_cursor": null}``: its JSON,
    its YAML or (``table``) its table; ``empty``: the table of no item."""
    if output == "json":
        return _json_listing(key, pages)
    if output == "yaml":
        return _yaml_listing(key, pages)
    return _table_listing(key, pages, table, empty)


def _json_listing(key: str, pages: Iterable[dict[str, Any]]) -> Iterator[str]:
    head, empty = "{\n  " + json.dumps(key, ensure_ascii=False) + ": ", True
    for page in pages:
        items = page.get(key) or []
        if items:
            yield head + json_items(items, 1, empty)
            head, empty = "", False
    yield head + json_close(1, empty) + ',\n  "next_cursor": null\n}\n'


def _yaml_listing(key: str, pages: Iterable[dict[str, Any]]) -> Iterator[str]:
    head = yaml_text({key: None}).removesuffix(" null\n") + "\n"
    for page in pages:
        items = page.get(key) or []
        if items:
            yield head + yaml_text(items)
            head = ""
    yield (yaml_text({key: []}) if head else "") + "next_cursor: null\n"


class TableLines:
    """The lines of a table written a page at a time: each column as wide as its widest cell so
    far (``format_table``'s table when the first page holds the widest cells)."""

    def __init__(self, headers: Sequence[str]) -> None:
        self.headers = list(headers)
        self.widths = [len(h) for h in headers]
        self.started = False

    def page(self, rows: Iterable[Sequence[Any]]) -> str:
        """The lines of a page's rows (after the header, for the first)."""
        cells = [[cell(v) for v in row] for row in rows]
        self.widths = [max([w] + [len(r[i]) for r in cells]) for i, w in enumerate(self.widths)]
        lines = [] if self.started else [self._line(self.headers)]
        self.started = True
        lines += [self._line(row) for row in cells]
        return "".join(line + "\n" for line in lines)

    def _line(self, cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, self.widths)).rstrip()


def _table_listing(key: str, pages: Iterable[dict[str, Any]], table: Rows, empty: str) -> Iterator[str]:
    lines = TableLines(table.headers)
    for page in pages:
        items = page.get(key) or []
        if items:
            yield lines.page(table.cells(item) for item in items)
    if not lines.started:
        yield empty + "\n"
