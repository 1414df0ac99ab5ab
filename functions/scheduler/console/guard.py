"""The safety checks of a server on the user's own machine (``scheduler local``, ``scheduler
console``), as WSGI middleware in front of everything it serves.

A web page from anywhere can make the user's browser send requests to ``127.0.0.1``; three
checks keep such a page from using the scheduler:

- **Host** (DNS rebinding: a hostile name that resolves to 127.0.0.1 makes the page same-origin
  with the server): the ``Host`` must be a loopback name (``localhost``, ``*.localhost``) or
  address, or the address the server is bound to. A server bound to every interface
  (``0.0.0.0``, ``::``) also accepts any IP address and this machine's own host name: a
  rebinding attack needs a name it controls, never an address.
- **Content type**: a state-changing call (``POST``, ``PUT``, ``PATCH``, ``DELETE``) that has a
  content type must send JSON. A cross-site HTML form can only send form or plain-text
  content, and a JSON content type from another site needs a CORS preflight, which this server
  never grants.
- **Origin**: a state-changing call whose ``Origin`` (or ``Sec-Fetch-Site``) says it comes from
  another site is refused, which also covers body-less writes such as ``/run``. With
  ``every_method`` (``scheduler console``, whose every call spends the user's identity and the
  stage's throttle) reads are checked too, and ``Sec-Fetch-Site: same-site`` (a page on another
  port of this host) is refused as well: only ``same-origin``, ``none`` (typed in the address
  bar, a bookmark) or no such header (not a browser) pass.

Refusals carry the API's error envelope naming the header at fault (403, or 415 for the content
type).
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from scheduler.core.constants import ANSWER_HEADERS

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
#: The hosts that bind every address (no address a client can name).
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def host_name(host_header: str) -> str:
    """The host of a ``Host`` header, without its port, brackets or trailing dot, in lower case.
    A header that is not ``host[:port]`` (a port that is not digits: ``127.0.0.1:80@evil.com``)
    is answered whole, which names no host the policy allows."""
    value = host_header.strip().lower()
    if value.startswith("["):
        address, _, rest = value[1:].partition("]")
        return address if rest == "" or _is_port(rest) else value
    if value.count(":") == 1:
        name, _, port = value.partition(":")
        if not port.isdigit() or not port.isascii():
            return value
        value = name
    return value.rstrip(".")


def _is_port(text: str) -> bool:
    """``:digits`` after a bracketed address."""
    return text[:1] == ":" and text[1:].isdigit() and text.isascii()


class HostPolicy:
    """Which ``Host`` names a server bound to ``bound_host`` answers to."""

    def __init__(self, bound_host: str, extra_names: Iterable[str] = ()):
        self.bound = host_name(bound_host) if bound_host else ""
        self.wildcard = self.bound in WILDCARD_HOSTS
        self.names = {n.lower() for n in extra_names} | {self.bound}
        if self.wildcard:
            self.names |= {socket.gethostname().lower(), socket.getfqdn().lower()}

    def allows(self, host_header: str | None) -> bool:
        """Whether a request with this ``Host`` header may be served."""
        if not host_header:
            return False  # HTTP/1.1 requires it; a browser always sends one
        name = host_name(host_header)
        if name in LOOPBACK_NAMES or name.endswith(".localhost") or name in self.names:
            return True
        address = _ip(name)
        if address is None:
            return False
        if address.is_loopback or self.wildcard:
            return True
        bound = _ip(self.bound)
        return bound is not None and bound == address


def _same_origin(origin: str, host_header: str) -> bool:
    parts = urlsplit(origin)
    return (
        parts.scheme in ("http", "https") and bool(parts.netloc) and parts.netloc.lower() == host_header.strip().lower()
    )


def _refuse(start_response: Callable, status: str, code: str, field: str, message: str) -> list[bytes]:
    body = json.dumps(
        {"error": {"code": code, "message": message, "details": [{"field": field, "message": message}]}}
    ).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *ANSWER_HEADERS.items()],
    )
    return [body]


def _cross_site(environ: dict[str, Any], host: str, *, every_method: bool) -> tuple[str, str] | None:
    """The header that says the request comes from another site, and why it is refused; None if none does."""
    message = (
        "requests from another site are refused" if every_method else "cross-site requests may not change anything"
    )
    origin = environ.get("HTTP_ORIGIN")
    if origin is not None and not _same_origin(origin, host):
        return "Origin", message
    site = str(environ.get("HTTP_SEC_FETCH_SITE", "")).lower()
    if site == "cross-site" or (every_method and site == "same-site"):
        return "Sec-Fetch-Site", message
    return None


def refusal(
    environ: dict[str, Any], policy: HostPolicy, *, every_method: bool = False
) -> tuple[str, str, str, str] | None:
    """Why this request must be refused (status, code, header, message), or None to serve it.
    The origin is checked on writes only, or on every method with ``every_method``."""
    host = environ.get("HTTP_HOST") or ""
    if not policy.allows(host):
        return ("403 Forbidden", "forbidden", "Host", "this server answers only to its own address or a loopback name")
    write = str(environ.get("REQUEST_METHOD", "GET")).upper() in WRITE_METHODS
    if write or every_method:
        foreign = _cross_site(environ, host, every_method=every_method)
        if foreign is not None:
            return ("403 Forbidden", "forbidden", *foreign)
    if not write:
        return None
    content_type = environ.get("CONTENT_TYPE")
    if content_type:
        media = content_type.split(";", 1)[0].strip().lower()
        if not (media == "application/json" or (media.startswith("application/") and media.endswith("+json"))):
            return "415 Unsupported Media Type", "unsupported_media_type", "Content-Type", "must be application/json"
    return None


def guard(app: Callable, *, bound_host: str, extra_names: Iterable[str] = (), every_method: bool = False) -> Callable:
    """``app`` behind the Host, content-type and Origin checks of a server bound to ``bound_host``
    (the Origin on every method with ``every_method``, else on writes)."""
    policy = HostPolicy(bound_host, extra_names)

    def guarded(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        why = refusal(environ, policy, every_method=every_method)
        if why is not None:
            return _refuse(start_response, *why)
        return app(environ, start_response)

    return guarded
