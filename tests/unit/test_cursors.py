"""Opaque keyset cursors: round trip, tamper detection, scope binding, key choice."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api.cursors import CursorCodec, InvalidCursor, cursor_key, scope_of
from scheduler.secrets import LocalSecretBox
from scheduler.settings import Settings

CODEC = CursorCodec(b"k" * 32)
SCOPE = scope_of("jobs", "arn:aws:iam::1:user/alice", state=None, tag="billing", name_prefix=None)


def test_round_trip_and_opaque():
    cursor = CODEC.encode(SCOPE, {"after_name": "nightly-report"})
    assert CODEC.decode(cursor, SCOPE) == {"after_name": "nightly-report"}
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_tampered_cursor_refused():
    cursor = CODEC.encode(SCOPE, {"after_name": "b"})
    body, mac = cursor.split(".")
    forged_body = base64.urlsafe_b64encode(json.dumps({"after_name": "z"}).encode()).rstrip(b"=").decode()
    for bad in (
        f"{forged_body}.{mac}",
        cursor[:-1],
        cursor + "A",
        body,
        "",
        ".",
        "a.b.c",
        "%%%.%%%",
        cursor.replace(".", ".."),
    ):
        with pytest.raises(InvalidCursor):
            CODEC.decode(bad, SCOPE)


def test_cursor_bound_to_its_query_and_key():
    cursor = CODEC.encode(SCOPE, {"after_name": "b"})
    for other_scope in (
        scope_of("jobs", "arn:aws:iam::1:user/bob", state=None, tag="billing", name_prefix=None),
        scope_of("jobs", "arn:aws:iam::1:user/alice", state="active", tag="billing", name_prefix=None),
        scope_of("executions", "arn:aws:iam::1:user/alice", job_id="x", status=None),
    ):
        with pytest.raises(InvalidCursor):
            CODEC.decode(cursor, other_scope)
    with pytest.raises(InvalidCursor):
        CursorCodec(b"j" * 32).decode(cursor, SCOPE)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text):
    try:
        assert isinstance(CODEC.decode(text, SCOPE), dict)
    except InvalidCursor:
        pass


def test_cursor_key_choice(tmp_path):
    box = LocalSecretBox(tmp_path / "k")
    configured = cursor_key(Settings(cursor_secret="s3cret"), box)
    assert configured == cursor_key(Settings(cursor_secret="s3cret"), None) != cursor_key(Settings(), box)
    assert cursor_key(Settings(), box) == cursor_key(Settings(), LocalSecretBox(tmp_path / "k"))  # stable per install
    assert cursor_key(Settings(), object()) != cursor_key(Settings(), object())  # random per process
