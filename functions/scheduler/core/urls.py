"""The syntax rules of target URLs: what the API accepts and the delivery relies on.

They judge the text only (scheme, host, port, no blanks); names are not resolved and addresses
are not judged here: the SSRF guard of the delivery (``scheduler.targets.ssrf``) does that at
connect time. A host name is judged as the deliveries will encode it (:func:`host_as_sent`),
so a URL accepted here is sent to the host it reads as.
"""

from __future__ import annotations

import fnmatch
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


# Characters that IDNA 2003 and UTS 46 read as a dot between labels, and the URL parser of the
# HTTP delivery (urllib3) does not: a host written with them is refused, not guessed at.
_OTHER_DOTS = frozenset("\u3002\uff0e\uff61")  # ideographic, fullwidth, halfwidth ideographic full stop


def _check_host(host: str | None) -> str | None:
    if not host:
        return "url has no host"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    return host_as_sent(host)[1]


def host_as_sent(host: str) -> tuple[str, str | None]:
    """The ASCII name a delivery connects to for ``host`` (a URL's host name), and the problem
    that makes it unsendable, if any (then the name is "").

    Both deliveries must send to the host as written: the HTTP delivery prepares URLs with
    urllib3, which encodes each non-ASCII label by IDNA 2008 without any mapping (lower-cased
    first); the AMQP delivery hands the name to ``socket`` and ``ssl``, which encode it by
    Python's IDNA 2003 codec (nameprep). So a name is accepted when its labels are separated by
    ``.``, each label is ASCII (letters, digits, ``-``, ``_``) or a valid IDNA 2008 label as
    written, and IDNA 2003 encodes that label to the same A-label. Refused therefore: U+3002
    and the fullwidth dots; labels that are only valid once mapped (enclosed or fullwidth
    letters, ligatures, soft hyphens, zero-width characters: UTS 46 would turn them into another
    name); symbols IDNA 2008 disallows; and ``ß``, ``ς`` and the joiners, which IDNA 2003 and
    2008 encode differently (write the ``xn--`` form). An IP address is not a name: check it
    with ``ipaddress`` first.
    """
    invalid = "url host is not a valid host name"
    for ch in host:
        if ch in _OTHER_DOTS:
            return "", f"{invalid}: U+{ord(ch):04X} is not '.' (separate the labels with '.')"
    name, dot = (host[:-1], ".") if host.endswith(".") else (host, "")
    labels = []
    for label in name.split("."):
        if label.isascii():
            if not label or not all(ch.isalnum() or ch in "-_" for ch in label):
                return "", invalid
            labels.append(label.lower())
            continue
        a_label, problem = _a_label(label)
        if problem:
            return "", f"{invalid}: {problem}"
        labels.append(a_label)
    if any(len(label) > 63 for label in labels) or len(".".join(labels)) > 253:
        return "", invalid
    return ".".join(labels) + dot, None


def _a_label(label: str) -> tuple[str, str | None]:
    """The A-label (``xn--...``) of a non-ASCII label, or why the deliveries cannot send it."""
    import idna  # only names that are not ASCII need it (requests' own dependency, pinned as ours)

    lowered = label.lower()
    try:
        idna2008 = idna.encode(lowered, strict=True, std3_rules=True).decode("ascii")
    except idna.IDNAError as exc:
        return "", f"a label is not valid IDNA 2008 as written ({exc}); write the name as registered"
    try:
        idna2003 = lowered.encode("idna").decode("ascii").lower()
    except UnicodeError:
        idna2003 = ""
    if idna2003 != idna2008:
        return "", f"a label reads differently in IDNA 2003 and 2008; write it in its A-label form ({idna2008})"
    return idna2008, None


def default_broker_open_to(patterns: tuple[str, ...], owner: str | None) -> bool:
    """Whether a job of ``owner`` may use the deployment's default broker: there are no
    ``patterns`` (anyone may), or ``owner`` matches one, part by part: an ARN's partition,
    service, region and account each against the pattern's (``*`` any text within the part),
    then its resource (the rest, where ``*`` is any text). A ``*`` never reaches across a ``:``
    into the account: an IAM path may hold ``:``, and ``arn:aws:iam::2:user/::1:/x`` is not of
    account 1."""
    if not patterns:
        return True
    if owner is None:
        return False
    parts = owner.split(":", 5)
    return any(_arn_matches(parts, pattern.split(":", 5)) for pattern in patterns)


def _arn_matches(parts: list[str], pattern: list[str]) -> bool:
    return len(parts) == len(pattern) and all(fnmatch.fnmatchcase(part, p) for part, p in zip(parts, pattern))
