"""The header check of the HTTP wire (string tests and a cached name check) says what the rule
written as regular expressions says, for any name and value."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.targets.http_wire import _HEADER_NAME, _HEADER_VALUE, InvalidHeader, check_header

# Whitespace, line breaks, NUL and the colon are where the rule lives: drawn often.
EDGES = st.sampled_from([" ", "\t", "\r", "\n", "\x00", ":", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u3000"])
TEXT = st.lists(st.one_of(EDGES, st.characters()), max_size=12).map("".join)


@settings(max_examples=3000, deadline=None)
@given(name=TEXT, value=TEXT)
def test_the_check_is_the_written_rule(name: str, value: str) -> None:
    allowed = _HEADER_NAME.fullmatch(name) is not None and _HEADER_VALUE.fullmatch(value) is not None
    if allowed:
        check_header(name, value)
    else:
        with pytest.raises(InvalidHeader):
            check_header(name, value)
