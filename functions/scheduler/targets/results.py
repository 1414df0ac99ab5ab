"""The shared types of delivery: what a delivery attempt is (``Delivery``, from the domain),
how it ended (``Outcome``, the domain's), what a deployment may reach (``TargetPolicy``), and the
helpers every target module uses to build results and keep secrets out of them.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from scheduler.core.constants import SECRET_MASK
from scheduler.core.domain import (  # noqa: F401 (re-exported)
    HEADER_ATTEMPT,
    HEADER_EXECUTION_ID,
    HEADER_IDEMPOTENCY_KEY,
    HEADER_JOB_ID,
    HEADER_SCHEDULED_AT,
    Delivery,
    ExecutionStatus,
    Outcome,
)
from scheduler.core.urls import default_broker_open_to

#: Bytes of a response body kept in ``Outcome.response_excerpt`` (and the most ever read).
EXCERPT_LIMIT = 4096

SUCCEEDED = ExecutionStatus.SUCCEEDED
FAILED = ExecutionStatus.FAILED
TIMED_OUT = ExecutionStatus.TIMED_OUT


@dataclass(frozen=True)
class TargetPolicy:
    """What targets a deployment may reach.

    ``allow_private``: local mode; loopback, private and other non-public addresses allowed.
    ``allow_list``: hostnames (exact, or ``*.example.com`` for subdomains) or CIDRs/addresses
    that bypass the SSRF guard. ``default_broker_url``: the broker of AMQP targets without a url
    (trusted: not subject to the guard), open to the owners ``default_broker_owners`` match
    (patterns, ``*`` any text; none: every owner).
    """

    allow_private: bool = False
    allow_list: tuple[str, ...] = ()
    default_broker_url: str | None = None
    default_broker_owners: tuple[str, ...] = ()

    def default_broker_open_to(self, owner: str | None) -> bool:
        """Whether a job of ``owner`` may use the default broker."""
        return default_broker_open_to(self.default_broker_owners, owner)


def permanent(error: str, **fields: Any) -> Outcome:
    """A failure that another attempt cannot fix."""
    return Outcome(FAILED, False, error=error, **fields)


def transient(error: str, **fields: Any) -> Outcome:
    """A failure worth another attempt."""
    return Outcome(FAILED, True, error=error, **fields)


def timed_out(error: str, **fields: Any) -> Outcome:
    """The delivery ran out of time (always worth another attempt)."""
    return Outcome(TIMED_OUT, True, error=error, **fields)


# -- redaction of texts (response excerpts, error texts) ----------------------------------------

#: A secret at least this long is masked even inside a longer word (with all of that word);
#: a shorter one only where it stands as a whole value, or masking it would spell it out
#: (a password ``p`` turned ``password`` into ``***assword``).
MIN_EMBEDDED_SECRET = 8
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/=-")
_MIN_TAIL = 4


def _forms(secrets: Any, text: str) -> set[str]:
    """Each secret as it may come back in ``text``: as given; JSON-escaped (non-ASCII escaped or
    not, ``/`` as ``\\/`` or not, and ``&<>`` as ``\\u0026`` as Go writes them);
    percent-encoded (every reserved character, or all but ``/``; a space as ``%20`` or ``+``;
    hex digits in either case); HTML-escaped (``'`` and ``"`` as named or numeric references, or
    not escaped); and as the other encoding reads its bytes (its UTF-8 read as Latin-1, as a
    status line's reason is; its Latin-1 read as UTF-8, as an excerpt is, where a header went
    out in Latin-1). A family is made only when ``text`` holds its mark (a backslash, ``%`` or
    ``+``, ``&``, a character beyond ASCII): nearly every answer needs the secrets as given only."""
    url_marked = "%" in text or "+" in text  # "a b" as a query writes it: "a+b"
    marks = (("\\" in text, _json_forms), (url_marked, _url_forms), ("&" in text, _html_forms))
    other_encoding = not text.isascii()
    forms: set[str] = set()
    for secret in secrets or ():
        if isinstance(secret, str) and secret:
            forms.add(secret)
            for marked, family in marks:
                if marked:
                    forms.update(family(secret))
            if other_encoding:
                forms.add(secret.encode("utf-8").decode("latin-1"))
                try:
                    forms.add(secret.encode("latin-1").decode("utf-8", "replace"))
                except UnicodeEncodeError:
                    pass
    return forms


_GO_JSON = str.maketrans({"&": "\\u0026", "<": "\\u003c", ">": "\\u003e"})


def _json_forms(secret: str) -> set[str]:
    found: set[str] = set()
    for ascii_only in (True, False):
        escaped = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
        for form in (escaped, escaped.replace("/", "\\/")):
            found.update((form, form.translate(_GO_JSON)))
    return found


def _url_forms(secret: str) -> set[str]:
    # One quote, the others derived: in its output "%" starts a three-character escape only, so
    # "%2F" and "%20" are exactly the escaped "/" and " ".
    strict = quote(secret, safe="")
    found = {strict, strict.replace("%2F", "/")}
    found |= {form.replace("%20", "+") for form in found}
    return found | {_lower_escapes(form) for form in found if "%" in form}


def _lower_escapes(encoded: str) -> str:
    """A percent-encoded text with its escapes' hex digits in lower case (``%2f``)."""
    first, *rest = encoded.split("%")
    return "%".join([first, *(part[:2].lower() + part[2:] for part in rest)])


def _html_forms(secret: str) -> set[str]:
    plain = html.escape(secret, quote=False)
    if "'" not in plain and '"' not in plain:
        return {plain}
    return {
        plain.replace("'", single).replace('"', double)
        for single in ("&#x27;", "&#39;", "&#039;", "'")
        for double in ("&quot;", "&#34;", "&#034;", '"')
    }


def redact(text: str | None, secrets: Any) -> str | None:
    """``text`` with each secret masked as a whole value (``***``), longest first.

    A secret of ``MIN_EMBEDDED_SECRET`` characters or more is masked wherever it occurs, with
    the rest of the word around it, so no part of it and no hint of where it starts or ends is
    left. A shorter one is masked only where it is not part of a longer word.
    """
    if not text:
        return text
    return _redacted(text, _forms(secrets, text))


def _redacted(text: str, forms: set[str]) -> str:
    for secret in sorted(forms, key=len, reverse=True):
        if len(secret) >= MIN_EMBEDDED_SECRET:
            text = _mask_with_words(text, secret)
        else:
            text = re.sub(f"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", SECRET_MASK, text)
    return text


def _mask_with_words(text: str, secret: str) -> str:
    """``text`` with each occurrence of ``secret`` masked together with the word characters on
    either side of it. In linear time: a regular expression with a word-character run before the
    secret backtracks over every run of them, quadratic in the text's length (0.85 s of CPU for
    one 8 KiB secret against a 4 KiB excerpt), after the delivery's deadline."""
    found = text.find(secret)
    if found < 0:
        return text
    parts: list[str] = []
    done = 0  # text[:done] is in parts already
    while found >= 0:
        start, end = found, found + len(secret)
        while start > done and text[start - 1] in _WORD:
            start -= 1
        while end < len(text) and text[end] in _WORD:
            end += 1
        parts += (text[done:start], SECRET_MASK)
        done = end
        found = text.find(secret, end)
    parts.append(text[done:])
    return "".join(parts)


def redact_and_cut(text: str | None, secrets: Any, limit_bytes: int) -> str | None:
    """``text`` redacted (``redact``), then cut to at most ``limit_bytes`` UTF-8 bytes.

    Redaction comes first, so a cut can never leave the start of a secret behind. The text's
    own end may stop inside a secret (a body cut off at the deadline): a tail of at least four
    characters that begins a secret is masked too.
    """
    if not text:
        return text
    forms = _forms(secrets, text)
    text = _redacted(text, forms)
    raw = text.encode("utf-8")
    if len(raw) > limit_bytes:
        text = raw[:limit_bytes].decode("utf-8", "ignore")
    for secret in {form for form in forms if len(form) >= MIN_EMBEDDED_SECRET}:
        text = _mask_cut_start(text, secret)
    return text


#: Places where a secret's first characters occur in a text's tail that are compared with the
#: secret before the rest of the tail is masked unread: a bound on the work of a text and a
#: secret made of one character repeated (each place a comparison of the whole tail).
_MAX_TAIL_PLACES = 32


def _mask_cut_start(text: str, secret: str) -> str:
    """``text`` with its end masked if it is the start of ``secret`` (at least ``_MIN_TAIL``
    characters of it): the longest such end, found from the places where the secret's first
    characters occur in the last ``len(secret) - 1`` characters, leftmost first. Past
    ``_MAX_TAIL_PLACES`` places the tail is masked from the next one on (masking more than the
    secret, never less)."""
    base = len(text) - min(len(secret) - 1, len(text))
    head = secret[:_MIN_TAIL]
    place, tried = text.find(head, base), 0
    while place >= 0:
        if tried == _MAX_TAIL_PLACES or secret.startswith(text[place:]):
            return text[:place] + SECRET_MASK
        tried += 1
        place = text.find(head, place + 1)
    return text


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it: ``reason`` and ``exception`` attributes, exceptions passed as
    arguments (pika, requests), ``__cause__`` and ``__context__``; breadth first, no repeats."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop(0)
        if any(current is known for known in seen):
            continue
        seen.append(current)
        for attribute in ("reason", "exception"):  # urllib3 errors; pika's connector errors
            linked = getattr(current, attribute, None)
            if isinstance(linked, BaseException):
                todo.append(linked)
        todo.extend(arg for arg in getattr(current, "args", ()) if isinstance(arg, BaseException))
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return seen
