"""The masking of a long secret with its word (a scan, in linear time) masks what the regular
expression it replaced masked: the word characters on either side of each occurrence, left to
right, matches never overlapping."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.constants import SECRET_MASK
from scheduler.targets.results import _mask_with_words

_WORD_RUN = r"[A-Za-z0-9._~+/=-]*"


@settings(max_examples=3000, deadline=None)
@given(text=st.text(alphabet="ab .é/-\n", max_size=40), secret=st.text(alphabet="ab .-", min_size=1, max_size=5))
def test_the_scan_masks_what_the_regular_expression_did(text, secret):
    expected = re.sub(f"{_WORD_RUN}{re.escape(secret)}{_WORD_RUN}", SECRET_MASK, text)
    assert _mask_with_words(text, secret) == expected
