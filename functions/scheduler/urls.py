"""The syntax rules of target URLs: what the API accepts and the delivery relies on.

They judge the text only (scheme, host, port, no blanks); names are not resolved and addresses
are not judged here: the SSRF guard of the delivery (``scheduler.targets.ssrf``) does that at
connect time.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048


def check_url_syntax(url: object) -> str | None:
    """Check the URL of an http target; return an error message, or None when it is acceptable.

    Rules: a string of at most 2048 characters without blanks or control characters, scheme
    ``http`` or ``https``, a host, a valid port, no credentials (``user:pass@``: use
    ``target.auth``). Names are not resolved here.
    """
    if isinstance(url, str) and len(url) <= MAX_URL_LENGTH:
        return _checked_url(url)  # a warm executor sees the same few URLs again and again
    return _check_url_syntax(url)


@functools.lru_cache(maxsize=1024)
def _checked_url(url: str) -> str | None:
    return _check_url_syntax(url)


def _check_url_syntax(url: object) -> str | None:
    parts, problem = _split_url(url, ("http", "https"))
    if problem:
        return problem
    if "@" in parts.netloc:
        return "url must not contain credentials (use target.auth)"
    return _check_host(parts.hostname)


def check_broker_url_syntax(url: object) -> str | None:
    """Check the URL of an amqp target (``amqp://`` or ``amqps://``, credentials allowed).

    The credentials must parse to one user and one host: a ``@`` only once, in the authority,
    and the user and password made of RFC 3986 userinfo characters (``/ ? # @ :`` in a
    password percent-encoded). Otherwise a password holding ``/`` or ``#`` reads as a host
    and a port, and is neither found nor encrypted.
    """
    parts, problem = _split_url(url, ("amqp", "amqps"))
    if problem:
        return problem
    text = str(url)
    authority = text.split("//", 1)[1] if "//" in text else ""
    authority = re.split(r"[/?#]", authority, maxsplit=1)[0]
    if text.count("@") > (1 if "@" in authority else 0):
        return "url credentials must be one user and one password: percent-encode / ? # @ in them"
    if "@" in authority:
        userinfo = authority.rpartition("@")[0]
        if userinfo.count(":") > 1 or not _USERINFO_RE.fullmatch(userinfo):
            return "url credentials must be one user and one password: percent-encode : / ? # @ in them"
    return _check_host(parts.hostname)


# RFC 3986 userinfo: unreserved, percent-encoded, sub-delims and ":".
_USERINFO_RE = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*")


def _split_url(url: object, schemes: tuple[str, str]) -> tuple[Any, str | None]:
    """The URL's parts, or the first problem with its text, port or scheme."""
    if not isinstance(url, str) or not url.strip():
        return None, "url is required"
    if len(url) > MAX_URL_LENGTH:
        return None, f"url is longer than {MAX_URL_LENGTH} characters"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return None, "url must not contain blanks or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        # The message of urllib may quote the URL, password included: keep ours generic.
        return None, "url is not valid (bad host or port)"
    if parts.scheme.lower() not in schemes:
        return None, f"url scheme must be {schemes[0]} or {schemes[1]}"
    return parts, None


def _check_host(host: str | None) -> str | None:
    if not host:
        return "url has no host"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    try:
        encoded = host.rstrip(".").encode("idna").decode("ascii")
    except UnicodeError:
        return "url host is not a valid host name"
    labels = encoded.split(".")
    if any(not label or len(label) > 63 for label in labels) or len(encoded) > 253:
        return "url host is not a valid host name"
    if not all(ch.isalnum() or ch in "-_" for label in labels for ch in label):
        return "url host is not a valid host name"
    return None
