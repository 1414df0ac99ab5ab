"""The shared types of delivery: what a delivery attempt is (``Delivery``, from the domain),
how it ended (``Outcome``, the domain's), what a deployment may reach (``TargetPolicy``), and the
helpers every target module uses to build results and keep secrets out of them.
"""

from __future__ import annotations

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
    (trusted: not subject to the guard).
    """

    allow_private: bool = False
    allow_list: tuple[str, ...] = ()
    default_broker_url: str | None = None


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
_WORD_CHARS = r"[A-Za-z0-9._~+/=-]"
_MIN_TAIL = 4


def _forms(secrets: Any) -> set[str]:
    """Each secret as it may come back in an answer: as given, JSON-escaped (``/`` as ``\\/``,
    quotes, non-ASCII) and percent-encoded."""
    forms: set[str] = set()
    for secret in secrets or ():
        if isinstance(secret, str) and secret:
            forms.update(
                (secret, json.dumps(secret)[1:-1], json.dumps(secret)[1:-1].replace("/", "\\/"), quote(secret, safe=""))
            )
    return forms


def redact(text: str | None, secrets: Any) -> str | None:
    """``text`` with each secret masked as a whole value (``***``), longest first.

    A secret of ``MIN_EMBEDDED_SECRET`` characters or more is masked wherever it occurs, with
    the rest of the word around it, so no part of it and no hint of where it starts or ends is
    left. A shorter one is masked only where it is not part of a longer word.
    """
    if not text:
        return text
    for secret in sorted(_forms(secrets), key=len, reverse=True):
        escaped = re.escape(secret)
        if len(secret) >= MIN_EMBEDDED_SECRET:
            pattern = f"{_WORD_CHARS}*{escaped}{_WORD_CHARS}*"
        else:
            pattern = f"(?<![A-Za-z0-9]){escaped}(?![A-Za-z0-9])"
        text = re.sub(pattern, SECRET_MASK, text)
    return text


def redact_and_cut(text: str | None, secrets: Any, limit_bytes: int) -> str | None:
    """``text`` redacted (``redact``), then cut to at most ``limit_bytes`` UTF-8 bytes.

    Redaction comes first, so a cut can never leave the start of a secret behind. The text's
    own end may stop inside a secret (a body cut off at the deadline): a tail of at least four
    characters that begins a secret is masked too.
    """
    text = redact(text, secrets)
    if not text:
        return text
    raw = text.encode("utf-8")
    if len(raw) > limit_bytes:
        text = raw[:limit_bytes].decode("utf-8", "ignore")
    for secret in {s for s in _forms(secrets) if len(s) >= MIN_EMBEDDED_SECRET}:
        for size in range(min(len(secret) - 1, len(text)), _MIN_TAIL - 1, -1):
            if text.endswith(secret[:size]):
                text = text[:-size] + SECRET_MASK
                break
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
