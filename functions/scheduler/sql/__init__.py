"""The SQL of the scheduler: numbered migrations and a file of named queries.

``QUERIES`` maps each ``-- name: <name>`` block of ``queries.sql`` to its text. A block may
include a ``-- fragment: <name>`` block of the same file with ``{{ name }}`` (a part shared by
two queries, never run on its own); a fragment may include another.
"""

from __future__ import annotations

import re
from importlib import resources

_BLOCK = re.compile(r"^--\s*(name|fragment):\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def parse_named_queries(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` blocks into ``{name: sql}``, with the ``{{ f }}`` of each
    replaced by the ``-- fragment: f`` block, itself expanded (duplicate or unknown names, and a
    fragment that includes itself, are an error)."""
    blocks: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    parts = _BLOCK.split(text)
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3]):
        if name in blocks["name"] or name in blocks["fragment"]:
            raise ValueError(f"query {name!r} is defined twice")
        blocks[kind][name] = body.strip().rstrip(";").strip()

    def expand(body: str, seen: tuple[str, ...] = ()) -> str:
        def include(match: re.Match) -> str:
            name = match.group(1)
            fragment = blocks["fragment"].get(name)
            if fragment is None:
                raise ValueError(f"no fragment {name!r}")
            if name in seen:
                raise ValueError(f"fragment {name!r} includes itself")
            return expand(fragment, (*seen, name))

        return _INCLUDE.sub(include, body)

    return {name: expand(body) for name, body in blocks["name"].items()}


# A string literal (to its closing quote, or to the end of an unclosed one: a doubled quote is
# two literals side by side, which keeps what is between) or a comment to the end of its line.
_LITERAL_OR_COMMENT = re.compile(r"'[^']*'?|--[^\n]*")


def strip_sql_comments(sql: str) -> str:
    """Drop ``--`` comments (outside string literals) and blank lines."""
    # One regular expression, not a walk over every character: every handler parses the named
    # queries at import, and the walk was 8 ms of each cold start.
    kept = _LITERAL_OR_COMMENT.sub(lambda match: "" if match[0].startswith("--") else match[0], sql)
    return "\n".join(line.rstrip() for line in kept.splitlines() if line.strip())


def compact_sql(sql: str) -> str:
    """``sql`` without comments, blank lines and indentation (no string literal of the named
    queries spans lines: a test checks it)."""
    return "\n".join(line.strip() for line in strip_sql_comments(sql).splitlines())


def _load() -> dict[str, str]:
    # Comments and indentation are stripped: psycopg caches its conversion of a query only under
    # 4 KiB, and the commented claim (later, the job update) is longer than that, so it was
    # converted again on every call.
    text = resources.files(__package__).joinpath("queries.sql").read_text("utf-8")
    return {name: compact_sql(sql) for name, sql in parse_named_queries(text).items()}


QUERIES: dict[str, str] = _load()


def migration_files() -> list[tuple[int, str, str]]:
    """The migrations as ``(version, name, sql)``, in order. Files are ``NNNN_name.sql``."""
    found = []
    folder = resources.files(__package__).joinpath("migrations")
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    # Each number once, from 0001; a gap is allowed, as numbers are reserved for work in parallel
    # (issue 34's alerts took 0017 while 0013-0016 were being written on other branches).
    if len(set(versions)) != len(versions) or (versions and versions[0] != 1):
        raise ValueError(f"migrations must be numbered from 0001, each number once: {versions}")
    return found
