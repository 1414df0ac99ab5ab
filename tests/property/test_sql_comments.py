"""``strip_sql_comments`` is one regular expression: held to the walk over every character it
replaced (a quote toggles a literal, ``--`` outside one ends the line's text)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.sql import strip_sql_comments


def _walked(sql: str) -> str:
    out, i, quoted = [], 0, False
    while i < len(sql):
        ch = sql[i]
        if ch == "'":
            quoted = not quoted
        if not quoted and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
            continue
        out.append(ch)
        i += 1
    return "\n".join(line.rstrip() for line in "".join(out).splitlines() if line.strip())


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="ab'-\n\r\x0b \t;x", max_size=40))
def test_comments_are_stripped_as_the_walk_did(sql):
    assert strip_sql_comments(sql) == _walked(sql)


def test_the_named_queries_and_migrations_strip_as_before():
    from importlib import resources

    folder = resources.files("scheduler.sql")
    texts = [folder.joinpath("queries.sql").read_text("utf-8")]
    texts += [
        entry.read_text("utf-8") for entry in folder.joinpath("migrations").iterdir() if entry.name.endswith(".sql")
    ]
    for text in texts:
        assert strip_sql_comments(text) == _walked(text)
