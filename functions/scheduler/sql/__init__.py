"""The SQL of the scheduler: numbered migrations and a file of named queries.

``QUERIES`` maps each ``-- name: <name>`` block of ``queries.sql`` to its text.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def parse_named_queries(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` blocks into ``{name: sql}`` (duplicates are an error)."""
    queries: dict[str, str] = {}
    parts = _NAME.split(text)
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body.strip().rstrip(";").strip()
    return queries


def _load() -> dict[str, str]:
    return parse_named_queries(resources.files(__package__).joinpath("queries.sql").read_text("utf-8"))


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
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 0001, 0002, ... without gaps: {versions}")
    return found
