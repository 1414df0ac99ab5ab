"""HTTP/1.1 on the wire, for the HTTP target: a request written in one send, its answer read with
the framing of RFC 9112, connections kept alive per origin, each one opened through the SSRF
guard and watched by the delivery's watchdog.

- A connection is opened by :func:`scheduler.targets.ssrf.connect` (one resolution, every
  address checked, the socket connected to a validated one); TLS verifies the certificate
  against certifi's bundle or ``REQUESTS_CA_BUNDLE``, with SNI and the host check on the URL's
  host name. Kept-alive connections are keyed by the job's owner, what the guard looks at (the
  policy), the trust store and the origin: one opened under a lax policy is never reused under
  a strict one, and one owner's connection never carries another owner's request (a peer that
  answers twice, or a request smuggled in a body the server ignored, shifts the answers of the
  later requests on its connection: only that owner's, to that origin, can be shifted).
- The answer is read by :mod:`scheduler.targets.http_answer` (at most ``read_limit`` bytes of
  its body): a connection goes back to the pool only when its answer was read to its end, the
  peer keeps it alive and no byte was buffered past its framing, else it is closed.
- Once connected, a socket blocks: the watchdog's deadline bounds each delivery's sends and
  reads (no per-operation timeout, which costs a poll before each of them).
- A kept-alive connection that reads as ready while idle (the peer closed it, or sent bytes
  nobody asked for) is closed, not used; one that fails before any byte of the answer came is
  replaced by a new connection once (every delivery carries its idempotency key; at-least-once
  is the contract).

Why not requests and urllib3: with a target answering at once, a delivery spent about 0.3 ms of
CPU in them (cookie jars, header dicts copied four times, an e-mail parser for the answer's
headers, retry and timeout objects), about half of a local runner's work per job; this module
does what the HTTP target needs in a fifth of that.
"""

from __future__ import annotations

import os
import re
import select
import socket
import ssl
import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from scheduler.targets import ssrf
from scheduler.targets.http_answer import RECV_BYTES, AnswerReader, ConnectionDropped, InvalidResponse, Response
from scheduler.targets.idle import IdlePool
from scheduler.targets.results import TargetPolicy
from scheduler.targets.watchdog import Watchdog

USER_AGENT = "scheduler/0.1 (job scheduler delivery)"
DEFAULT_HEADERS = (("User-Agent", USER_AGENT), ("Accept", "*/*"), ("Accept-Encoding", "identity"))
# Connections kept alive per pool (an owner's to one origin): as many as local mode's executors
# deliver at once, so a burst to one host reuses its connections instead of opening new ones.
KEEP_ALIVE_PER_HOST = 64
# Pools (an owner's connections to one origin) whose idle connections are kept (the least
# recently used beyond are closed).
KEPT_ORIGINS = 32
# An idle connection older than this is closed rather than reused: servers drop idle ones (60 s
# behind an AWS load balancer, 5 s in many servers), and one dropped as it is used fails.
MAX_IDLE_SECONDS = 30.0

# http.client's rules for what it puts on the wire: a name is anything but ':' and whitespace (no
# CR or LF in it); a value holds no CR, LF or NUL and does not start with whitespace. check_header
# applies them (the value's by string tests: tests/property/test_header_check.py holds it to these).
_HEADER_NAME = re.compile(r"[^:\s][^:\r\n]*")
_HEADER_VALUE = re.compile(r"(?:[^\s\x00][^\r\n\x00]*)?")


class InvalidHeader(ValueError):
    """A header name or value that cannot be sent (a line break in it, say): the job's fault."""


class ConnectTimeout(TimeoutError):
    """Name resolution, the TCP connect or the TLS handshake took the delivery's whole time."""


class Headers(MutableMapping):
    """Header names mapped to values, names compared without case; a name set again keeps its
    place and takes the new spelling and value (as ``requests.structures.CaseInsensitiveDict``)."""

    __slots__ = ("_items",)

    _items: dict[str, tuple[str, str]]

    def __init__(self, items: Any = ()) -> None:
        if isinstance(items, Headers):
            self._items = dict(items._items)
            return
        self._items = {}
        pairs = items.items() if hasattr(items, "items") else items
        for name, value in pairs:
            self[name] = value

    def __setitem__(self, name: str, value: str) -> None:
        self._items[name.lower()] = (name, value)

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()][1]

    def __delitem__(self, name: str) -> None:
        del self._items[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]  # the pairs as spelled, in order
        return list(self._items.values())

    def __repr__(self) -> str:
        return f"Headers({self.items()!r})"


@dataclass
class Request:
    """What is sent: ``url`` absolute and prepared (IDNA host, percent-quoted path), ``headers``
    final (``Host``, ``Content-Length`` and ``Transfer-Encoding`` are the wire's)."""

    method: str
    url: str
    headers: Headers
    body: bytes | None = None


def check_header(name: str, value: str) -> None:
    """``InvalidHeader`` unless ``name: value`` can be put on the wire as it is."""
    # _HEADER_VALUE's rule by string tests (two regular expressions a header were a tenth of a
    # delivery's own work); a name is looked up once (the same few at every delivery).
    if not _good_name(name) or "\r" in value or "\n" in value or "\x00" in value or (value and value[0].isspace()):
        raise InvalidHeader(f"invalid header {name[:40]!r}")


@lru_cache(maxsize=1024)
def _good_name(name: str) -> bool:
    return _HEADER_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str  # what is connected to, and TLS's name (no brackets around an IPv6 address)
    port: int
    host_header: str
    target: str  # the request target: path and query


@lru_cache(maxsize=1024)
def _origin_of(url: str) -> _Origin:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"cannot send to {scheme or 'a URL without scheme'}")
    default = 443 if scheme == "https" else 80
    port = parts.port or default
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rpartition("@")[2]
    if parts.port == default:  # as urllib3 sends it: the default port left out
        host_header = host_header.rsplit(":", 1)[0]
    return _Origin(scheme, parts.hostname, port, host_header, target)


@lru_cache(maxsize=8)
def _tls_context(cafile: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


def _trust_store() -> str:
    """The CA bundle certificates are checked against: ``REQUESTS_CA_BUNDLE``, else certifi's."""
    bundle = os.environ.get("REQUESTS_CA_BUNDLE")
    if bundle:
        return bundle
    import certifi

    return certifi.where()


class _Connection:
    __slots__ = ("sock", "idle_since", "_poller", "_polled")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.idle_since = 0.0
        self._poller: Any = None  # select.poll of ``_polled``, made at the first check
        self._polled: Any = None

    def current_socket(self) -> Any:
        """The socket now (the watchdog's getter: the TLS wrap replaces the socket object)."""
        return self.sock

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def stale(self, now: float) -> bool:
        """Idle too long, or something came while it was idle (see :meth:`received_more`)."""
        return now - self.idle_since > MAX_IDLE_SECONDS or self.received_more()

    def received_more(self) -> bool:
        """Whether the peer sent anything that was not read: bytes nobody asked for (a second
        answer, the answer to a request smuggled in a body), or the end of the stream. Such a
        connection cannot carry another request: what it holds would be read as that answer."""
        pending = getattr(self.sock, "pending", None)  # TLS: bytes already decrypted, not yet read
        if pending is not None and pending():
            return True
        try:
            if self._polled is not self.sock:  # made once a socket: every checkout asks
                self._poller, self._polled = select.poll(), self.sock
                self._poller.register(self.sock, select.POLLIN)
            return bool(self._poller.poll(0))
        except (OSError, ValueError):
            return True


_PoolKey = tuple[str | None, bool, tuple[str, ...], str, str, str, int]
_idle: IdlePool[_Connection] = IdlePool(_Connection.close, per_key=KEEP_ALIVE_PER_HOST, keys=KEPT_ORIGINS)


def _checkout(key: _PoolKey) -> _Connection | None:
    now = time.monotonic()
    while (conn := _idle.take(key)) is not None:  # the most recently used: the least likely dropped
        if not conn.stale(now):
            return conn
        conn.close()
    return None


def _checkin(key: _PoolKey, conn: _Connection) -> None:
    # Bytes past the answer's framing that arrive from now on are found at the next checkout
    # (``stale``), before the connection carries anything: looking here too would cost a poll
    # per delivery for nothing more.
    conn.idle_since = time.monotonic()
    _idle.give(key, conn)


def close_connections() -> None:
    """Close every kept-alive connection (tests; local mode at shutdown)."""
    _idle.close_all()


def _connect(origin: _Origin, policy: TargetPolicy, cafile: str, watchdog: Watchdog, owner: str | None) -> _Connection:
    timeout = watchdog.remaining()
    try:
        sock = ssrf.connect(
            origin.host,
            origin.port,
            policy,
            timeout=timeout,
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
            owner=owner,
        )
    except ssrf.TargetNotAllowed:
        raise
    except TimeoutError as exc:
        raise ConnectTimeout(f"connection to {origin.host} timed out") from exc
    conn = _Connection(sock)
    watchdog.watch(conn.current_socket)
    if origin.scheme == "https":
        try:
            conn.sock = _tls_context(cafile).wrap_socket(
                sock, server_hostname=origin.host, do_handshake_on_connect=False
            )
            conn.sock.settimeout(watchdog.remaining())
            conn.sock.do_handshake()
        except TimeoutError as exc:
            conn.close()
            raise ConnectTimeout(f"TLS handshake with {origin.host} timed out") from exc
        except BaseException:
            conn.close()
            raise
    # From here the socket blocks: the watchdog bounds every send and read (it shuts the socket
    # down at the deadline). A socket timeout would add a poll before every send and read, and
    # setting it an ioctl at every delivery: each a GIL hand-over between the executor threads.
    conn.sock.settimeout(None)
    return conn


def _head_bytes(request: Request, origin: _Origin) -> bytes:
    lines = [f"{request.method} {origin.target} HTTP/1.1"]
    if "Host" not in request.headers:  # a target's own Host header is sent instead (as urllib3 does)
        lines.append(f"Host: {origin.host_header}")
    for name, value in request.headers.items():
        if name.lower() not in ("content-length", "transfer-encoding"):  # the framing is ours
            check_header(name, value)
            lines.append(f"{name}: {value}")
    if request.body is not None:
        lines.append(f"Content-Length: {len(request.body)}")
    elif request.method not in ("GET", "HEAD"):
        lines.append("Content-Length: 0")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")  # a header that is not Latin-1 raises UnicodeEncodeError


def send(
    request: Request, policy: TargetPolicy, watchdog: Watchdog, read_limit: int, *, owner: str | None = None
) -> Response:
    """Send ``request`` and read its answer, at most ``read_limit`` bytes of the body, within the
    watchdog's time, on a connection kept for ``owner`` (the job's owner) or a new one. Raises
    ``InvalidHeader``, ``UnicodeEncodeError`` (a header that is not Latin-1),
    ``ssrf.TargetNotAllowed``, ``ConnectTimeout``, ``InvalidResponse`` and the ``OSError``
    (``ssl.SSLError``, ``socket.gaierror``, ``TimeoutError``...) of the network; an error while
    the body is read keeps the part read (the status stands)."""
    origin = _origin_of(request.url)
    head = _head_bytes(request, origin)
    payload = head + request.body if request.body and len(request.body) <= RECV_BYTES else head
    cafile = _trust_store() if origin.scheme == "https" else ""
    policy_key = (bool(policy.allow_private), tuple(policy.allow_list or ()))
    key = (owner, *policy_key, cafile, origin.scheme, origin.host, origin.port)
    conn = _checkout(key)
    reused = conn is not None
    while True:
        if conn is None:
            conn = _connect(origin, policy, cafile, watchdog, owner)
        else:
            watchdog.watch(conn.current_socket)
        reader = AnswerReader(conn.sock)
        try:
            conn.sock.sendall(payload)
            if payload is head and request.body:
                conn.sock.sendall(request.body)
            response, keep = reader.answer(request.method, read_limit)
        except BaseException as exc:
            conn.close()
            if reused and not reader.received and not watchdog.fired and _dropped(exc):
                conn, reused = None, False  # the peer dropped a kept-alive connection: once more, anew
                continue
            raise
        # From here the watchdog leaves the socket alone: once kept, another delivery may use it.
        watchdog.forget(conn.current_socket)
        # Kept only when nothing came past the answer's framing (buffered here; what comes later
        # is found at the next checkout), so that no byte of it is read as a later answer.
        if keep and not reader.buffer and not watchdog.fired:
            _checkin(key, conn)
        else:
            conn.close()
        return response


def _dropped(exc: BaseException) -> bool:
    return isinstance(exc, (ConnectionDropped, ConnectionResetError, BrokenPipeError, ConnectionAbortedError))


__all__ = [
    "ConnectTimeout",
    "ConnectionDropped",
    "Headers",
    "InvalidHeader",
    "InvalidResponse",
    "Request",
    "Response",
    "check_header",
    "close_connections",
    "send",
]
