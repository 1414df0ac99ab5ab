"""Redaction of texts that are kept (response excerpts, error texts) and the write-time rules
on secrets (issue 13); the same rules through the real server are in tests/security."""

from __future__ import annotations

import pytest

from scheduler.core.urls import check_broker_url_syntax
from scheduler.targets.results import redact as redact_secrets
from scheduler.targets.results import redact_and_cut

TOKEN = "tok-0123456789abcdef"


def test_whole_values_only_for_short_secrets():
    assert redact_secrets("Bad password", ["p"]) == "Bad password"
    assert redact_secrets("password p rejected", ["p"]) == "password *** rejected"
    assert redact_secrets("user:p@host", ["p"]) == "user:***@host"


def test_long_secrets_are_masked_with_their_word():
    assert redact_secrets(f"Authorization: Bearer {TOKEN}", [TOKEN]) == "Authorization: Bearer ***"
    assert redact_secrets(f"x=ab{TOKEN}cd&y=1", [TOKEN]) == "***&y=1"  # no edge of it left
    assert redact_secrets(f'"{TOKEN}"', [TOKEN, None, ""]) == '"***"'


@pytest.mark.parametrize("offset", range(0, 40, 3))
def test_redaction_comes_before_the_cut(offset):
    text = "x" * (100 - offset) + "Bearer " + TOKEN + "y" * 50
    out = redact_and_cut(text, [TOKEN], 100)
    assert len(out.encode()) <= 100
    assert all(TOKEN[i : i + 4] not in out for i in range(len(TOKEN) - 3))


def test_a_text_ending_inside_a_secret_has_that_start_masked():
    assert redact_and_cut("abc Bearer " + TOKEN[:10], [TOKEN], 4096) == "abc Bearer ***"
    assert redact_and_cut("abc tok", [TOKEN], 4096) == "abc tok"  # three characters: not a secret's start


def test_cut_keeps_utf8_whole():
    assert redact_and_cut("é" * 10, [], 5) == "éé"


@pytest.mark.parametrize(
    "url, ok",
    [
        ("amqp://u:p@h/v", True),
        ("amqp://h", True),
        ("amqp://u@h/", True),
        ("amqp://u:p%2F%23%40%3A@h/", True),
        ("amqps://u:***@h:5671/", True),
        ("amqp://u:p@[::1]:5672/", True),
        ("amqp://guest:1234/SECRET@host/", False),
        ("amqp://u:a:b@h/", False),
        ("amqp://u:a@b@h/", False),
        ("amqp://u:p@h/v@x", False),
        ("amqp://u:p@h/?q=@", False),
        ("amqp://u:p\\x@h/", False),
    ],
)
def test_broker_url_credentials_parse_to_one_user_and_host(url, ok):
    assert (check_broker_url_syntax(url) is None) == ok


def test_a_secret_echoed_json_escaped_or_percent_encoded_is_masked_too():
    """An answer may carry the token as a JSON string (``/`` as ``\\/``) or in a URL's query."""
    token = "abc/def+ghi=123/xyz"
    for echoed in ('{"auth": "Bearer abc\\/def+ghi=123\\/xyz"}', "next=abc%2Fdef%2Bghi%3D123%2Fxyz&x=1"):
        redacted = redact_secrets(echoed, [token])
        assert "abc" not in redacted and "xyz" not in redacted and "***" in redacted, redacted
    cut = redact_and_cut("x" * 10 + "abc%2Fdef%2Bghi%3D1", [token], 1000)  # a tail starting the encoded form
    assert cut.endswith("***") and "%2F" not in cut


def test_a_secret_echoed_in_another_encoding_or_escaping_is_masked_too():
    """A reason phrase is read as Latin-1 (a UTF-8 secret comes back as mojibake); an excerpt as
    UTF-8 (a Latin-1 header's bytes come back with replacement characters); ``quote`` keeps
    ``/`` by default; an HTML page escapes ``&`` and ``<``."""
    cases = [
        ("pässwörd-geheim", "HTTP 500 denied " + "pässwörd-geheim".encode().decode("latin-1")),
        ("tökenGeheim12345", "Authorization: Bearer " + b"t\xf6kenGeheim12345".decode("utf-8", "replace")),
        ("tok/en+with&<chars>==", "next=tok/en%2Bwith%26%3Cchars%3E%3D%3D&x=1"),
        ("tok/en+with&<chars>==", "<p>tok/en+with&amp;&lt;chars&gt;==</p>"),
    ]
    for secret, echoed in cases:
        redacted = redact_secrets(echoed, [secret])
        assert "***" in redacted and "Geheim" not in redacted and "chars" not in redacted, (echoed, redacted)


def test_masking_a_long_secret_takes_linear_time_against_a_long_run_of_word_characters():
    """The masking runs after the delivery's deadline: it must not grow with the square of the
    text (a word-character run before the secret once made the regular expression backtrack:
    about 0.85 s of CPU for one 8 KiB secret and a 4 KiB excerpt). Counted in steps, not timed:
    the text is scanned a bounded number of times whatever its length."""
    import scheduler.targets.results as results

    secret = "Bearer " + "\u00ff" * 8170 + "00000000"
    assert redact_secrets("a" * 12_000 + secret + " tail", [secret]) == "*** tail"
    assert redact_secrets("a" * 12_000, [secret]) == "a" * 12_000

    class Counting(str):
        calls = 0

        def find(self, *args):  # every search of the text goes through here
            Counting.calls += 1
            return super().find(*args)

    many = Counting(" ".join(["prefix" + "x" * 50 + "s3cr3t-value"] * 200))
    assert results._mask_with_words(many, "s3cr3t-value").count("***") == 200
    assert Counting.calls == 201  # one search a hit, and the last that finds none


def test_more_spellings_of_a_secret_are_masked():
    """Template engines and other languages' encoders: numeric HTML references (Jinja2, Go, PHP),
    Go's JSON (``&<>`` as ``\\u0026``...), JSON that keeps non-ASCII as it is, a space as ``+``
    in a query, escapes in lower case."""
    secret = "O'Brien&Sons <2026> é\""
    for echoed in (
        "<p>O&#39;Brien&amp;Sons &lt;2026&gt; é&#34;</p>",
        "<p>O&#039;Brien&amp;Sons &lt;2026&gt; é&quot;</p>",
        '{"p": "O\'Brien\\u0026Sons \\u003c2026\\u003e é\\""}',
        "q=O%27Brien%26Sons+%3C2026%3E+%C3%A9%22",
        "q=o%27brien".replace("o%27brien", "O%27Brien%26Sons%20%3c2026%3e%20%c3%a9%22"),
    ):
        redacted = redact_secrets(echoed, [secret])
        assert "Brien" not in redacted and "2026" not in redacted, (echoed, redacted)
    # A space as "+", with no "%" in the answer.
    assert redact_secrets("q=my+long+phrase&x=1", ["my long phrase"]) == "***&x=1"


def test_a_tail_that_starts_a_secret_is_masked_in_bounded_steps():
    """A text ending in many places where a secret's first characters occur: at most a bounded
    number of them is compared, then the tail is masked from the next one (more, never less)."""
    secret = "ab" * 4000
    text = "x " + "ab" * 1000 + "a!"  # the secret's start occurs 1,000 times in the tail; none ends it
    out = redact_and_cut(text, [secret], 100_000)
    assert out.startswith("x ") and out.endswith("***") and len(out) < len(text)
    assert redact_and_cut("x " + "ab" * 3, [secret], 1000) == "x ***"  # the longest start, masked
