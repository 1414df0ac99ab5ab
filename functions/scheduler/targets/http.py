"""HTTP(S) targets: one request per delivery, prepared with requests and sent with urllib3.

What a delivery does:

- Builds the request: ``method`` (GET POST PUT PATCH DELETE HEAD OPTIONS, default POST), the
  job's ``headers``, the rendered ``body`` (UTF-8), the ``auth`` header (basic, bearer, or a
  named header), then the delivery headers of the contract (``Idempotency-Key``,
  ``X-Scheduler-*``), which the job's headers cannot override. A ``sigv4`` auth signs the
  request last, as a role assumed for the job's owner (:class:`scheduler.targets.aws.HttpSigner`). ``Accept-Encoding`` defaults to
  ``identity`` so the excerpt is readable text.
- Connects through :mod:`scheduler.targets.ssrf` (``policy.allow_private`` false): the host is
  resolved once, every address checked, and the socket connected to a validated address;
  TLS is verified (certifi, or ``REQUESTS_CA_BUNDLE``) with SNI and the certificate check on
  the URL's host name. Proxies from the environment and ``.netrc`` are ignored (a proxy
  would hide the real destination from the guard).
- Follows redirects only with ``follow_redirects: true`` (at most 10 hops, each hop guarded;
  303, and 301/302 after a POST, become a GET without body; the ``auth`` header is dropped
  when the host changes).
- Reads at most 4 KiB of the response body, for the excerpt, then closes the connection.
- Bounds the whole delivery (name resolution, connect, TLS, request, response headers,
  excerpt) by ``timeout_seconds`` (or the executor's cap) with a wall-clock
  :class:`~scheduler.targets.Watchdog`, so a server that trickles bytes is still cut off.

Classification (``docs/delivery.md``): success codes (default any 2xx) succeed; 5xx, 408 and
429 are retryable failures; other statuses (other 4xx, unfollowed 3xx, a 2xx not in
``success_codes``) are permanent; network errors are retryable; timeouts are ``timed_out``
(retryable). A ``Retry-After`` (seconds or HTTP-date) of a failed answer becomes
``retry_after_seconds``. If the status line and headers arrived in time but the body is cut
off at the deadline, the status decides and the excerpt holds what was read.

One ``requests.Session`` per distinct :class:`~scheduler.targets.TargetPolicy` (in practice one
per process) lives at module level and keeps connections alive across warm invocations; the
policy is bound to its connection pools, so a connection opened under a lax policy is never
reused under a strict one. It keeps no cookies.
"""

from __future__ import annotations

import base64
import email.utils
import http.cookiejar
import os
import re
import socket
import ssl
import threading
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from scheduler.targets import (
    EXCERPT_LIMIT,
    SUCCEEDED,
    Delivery,
    DeliveryResult,
    TargetPolicy,
    Watchdog,
    current_watchdog,
    exception_chain,
    permanent,
    redact,
    running,
    timed_out,
    transient,
)
from scheduler.targets import ssrf
from scheduler.targets.aws import sigv4_signer

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
RETRYABLE_STATUSES = frozenset({408, 429})
MAX_REDIRECTS = 10
USER_AGENT = "scheduler/0.1 (job scheduler delivery)"

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


# ------------------------------------------------------------------ guarded connection pools


class _GuardMixin:
    """Connect through the SSRF guard and put the socket under the current watchdog."""

    policy: TargetPolicy = TargetPolicy()

    def _new_conn(self) -> socket.socket:  # overrides urllib3.connection.HTTPConnection
        watchdog = current_watchdog()
        timeout = self.timeout if isinstance(self.timeout, (int, float)) else 30.0
        if watchdog is not None:
            timeout = min(timeout, watchdog.remaining())
            watchdog.watch(lambda: self.sock)
        try:
            sock = ssrf.connect(
                self._dns_host,
                self.port,
                self.policy,
                timeout=timeout,
                socket_options=self.socket_options,
                source_address=self.source_address,
            )
        except ssrf.TargetNotAllowed:
            raise
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
        return sock

    def request(self, *args: Any, **kwargs: Any) -> Any:  # urllib3's signature, passed through
        watchdog = current_watchdog()
        if watchdog is not None:
            watchdog.watch(lambda: self.sock)
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _GuardedHTTPConnection(_GuardMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardMixin, HTTPSConnection):
    pass


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose connections go through the SSRF guard of ``policy``."""

    def __init__(self, policy: TargetPolicy, **kwargs: Any):
        self.policy = policy
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        """Install pool classes whose connections are bound to this adapter's policy."""
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        policy = self.policy
        http_conn = type("GuardedHTTPConnection", (_GuardedHTTPConnection,), {"policy": policy})
        https_conn = type("GuardedHTTPSConnection", (_GuardedHTTPSConnection,), {"policy": policy})
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
            "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
        }

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        """Proxies are never used: they would hide the destination from the guard."""
        raise requests.exceptions.InvalidProxyURL("proxies are not supported for targets")


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


# Connections kept alive per target host: as many as local mode's executors deliver at once, so
# a burst to one host reuses its connections instead of opening (and checking) new ones.
KEEP_ALIVE_PER_HOST = 64

_sessions: dict[TargetPolicy, requests.Session] = {}
_sessions_lock = threading.Lock()


def session_for(policy: TargetPolicy) -> requests.Session:
    """The module-level session of ``policy`` (created once, reused by warm invocations).

    Sessions are keyed by what the guard looks at (``allow_private``, ``allow_list``), so
    two equal policies share one session and its kept-alive connections.
    """
    policy = TargetPolicy(allow_private=bool(policy.allow_private), allow_list=tuple(policy.allow_list or ()))
    with _sessions_lock:
        session = _sessions.get(policy)
        if session is None:
            if len(_sessions) >= 8:  # policies come from settings: more than a few is a test
                _close_sessions_locked()
            session = requests.Session()
            session.trust_env = False
            session.cookies.set_policy(_NoCookies())
            session.headers = CaseInsensitiveDict(
                {"User-Agent": USER_AGENT, "Accept": "*/*", "Accept-Encoding": "identity"}
            )
            adapter = GuardedAdapter(policy, pool_connections=32, pool_maxsize=KEEP_ALIVE_PER_HOST)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            _sessions[policy] = session
        return session


def close_sessions() -> None:
    """Close every module-level session (tests; local mode at shutdown)."""
    with _sessions_lock:
        _close_sessions_locked()


def _close_sessions_locked() -> None:
    for session in _sessions.values():
        session.close()
    _sessions.clear()


# ----------------------------------------------------------------------------------- target


class _Invalid(ValueError):
    pass


def _parse(target: dict) -> dict:
    url = target.get("url")
    problem = ssrf.check_url_syntax(url)
    if problem:
        raise _Invalid(problem)
    method = target.get("method") or "POST"
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise _Invalid(f"method must be one of {', '.join(METHODS)}")
    headers = target.get("headers") or {}
    if not isinstance(headers, dict):
        raise _Invalid("headers must be an object")
    clean: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or value is None or isinstance(value, (dict, list)):
            raise _Invalid("headers must map names to text values")
        clean[name] = value if isinstance(value, str) else str(value)
    body = target.get("body")
    if body is not None and not isinstance(body, str):
        raise _Invalid("body must be text")
    codes = target.get("success_codes")
    if codes is not None:
        if not isinstance(codes, (list, tuple)) or not all(
            isinstance(c, int) and not isinstance(c, bool) and 100 <= c <= 599 for c in codes
        ):
            raise _Invalid("success_codes must be a list of HTTP status codes")
        codes = frozenset(codes)
    return {
        "url": url,
        "method": method.upper(),
        "headers": clean,
        "body": body,
        "auth": _auth_header(target.get("auth")),
        "success_codes": codes,
        "follow_redirects": bool(target.get("follow_redirects", False)),
    }


def _auth_header(auth: Any) -> tuple[str, str] | None:
    if auth is None:
        return None
    if not isinstance(auth, dict):
        raise _Invalid("auth must be an object")
    kind = auth.get("type")
    if kind == "basic":
        username, password = auth.get("username"), auth.get("password")
        if not isinstance(username, str) or not isinstance(password, str) or ":" in username:
            raise _Invalid("basic auth needs a username (without ':') and a password")
        token = base64.b64encode(f"{username}:{password}".encode("utf-8")).decode("ascii")
        return "Authorization", f"Basic {token}"
    if kind == "bearer":
        token = auth.get("token")
        if not isinstance(token, str) or not token:
            raise _Invalid("bearer auth needs a token")
        return "Authorization", f"Bearer {token}"
    if kind == "header":
        name, value = auth.get("name"), auth.get("value")
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise _Invalid("header auth needs a name and a value")
        return name, value
    if kind == "sigv4":  # no header of its own: the request is signed as a whole (_send)
        return None
    raise _Invalid("auth type must be basic, bearer, header or sigv4")


def _secrets(target: dict) -> list[str]:
    """The secret strings of ``target``, to be scrubbed from errors and excerpts."""
    auth = target.get("auth")
    found: list[str] = []
    if isinstance(auth, dict):
        for key in ("password", "token", "value"):
            value = auth.get(key)
            if isinstance(value, str) and value:
                found.append(value)
        try:
            header = _auth_header(auth)
        except _Invalid:
            header = None
        if header is not None:
            found.append(header[1])
            if " " in header[1]:
                found.append(header[1].split(" ", 1)[1])
    url = target.get("url")
    if isinstance(url, str):
        try:
            password = urlsplit(url).password
        except ValueError:
            password = None
        if password:
            found.append(password)
    return found


def deliver_http(target: dict, delivery: Delivery, policy: TargetPolicy, *, budget: float) -> DeliveryResult:
    """Deliver ``delivery`` to the http ``target`` (body already rendered) within ``budget`` seconds.

    Never raises. See the module documentation for the semantics.
    """
    secrets = _secrets(target)
    try:
        result = _deliver(target, delivery, policy, budget, secrets)
    except Exception as exc:  # noqa: BLE001 - the contract: never raise
        result = transient(f"unexpected error during the HTTP delivery: {type(exc).__name__}")
    if secrets and (result.error or result.response_excerpt):
        result = DeliveryResult(
            status=result.status,
            retryable=result.retryable,
            http_status=result.http_status,
            response_excerpt=redact(result.response_excerpt, secrets),
            error=redact(result.error, secrets),
            retry_after_seconds=result.retry_after_seconds,
        )
    return result


def _deliver(target: dict, delivery: Delivery, policy: TargetPolicy, budget: float,
             secrets: list[str]) -> DeliveryResult:
    try:
        spec = _parse(target)
    except _Invalid as exc:
        return permanent(f"invalid target: {exc}")
    spec["signer"], refused = sigv4_signer(target.get("auth"), delivery, secrets)
    if refused is not None:
        return refused

    headers = CaseInsensitiveDict(spec["headers"])
    if spec["auth"] is not None:
        headers[spec["auth"][0]] = spec["auth"][1]
    headers.update(delivery.headers())  # case-insensitive: the contract's values win
    body = spec["body"].encode("utf-8") if spec["body"] is not None else None
    session = session_for(policy)
    host = urlsplit(spec["url"]).hostname or "?"

    watchdog = Watchdog(budget)
    response = None
    excerpt: str | None = None
    with running(watchdog):
        try:
            response = _send(session, spec, headers, body, watchdog)
            if watchdog.fired:
                # Shut down while the head was still arriving: http.client may take the EOF
                # for the end of the headers, so this "response" is not one.
                return timed_out(f"timed out after {budget:g}s")
            excerpt = _read_excerpt(response)
        except ssrf.TargetNotAllowed as exc:
            return permanent(str(exc))
        except _TooManyRedirects:
            return permanent(f"more than {MAX_REDIRECTS} redirects")
        except _BadRedirect as exc:
            return permanent(f"redirect refused: {exc}")
        except Exception as exc:  # noqa: BLE001 - classified below
            refused = _find(exc, ssrf.TargetNotAllowed)
            if refused is not None:
                return permanent(str(refused))
            if watchdog.fired:
                return timed_out(f"timed out after {budget:g}s")
            return _classify_exception(exc, host, budget)
        finally:
            if response is not None:
                response.close()
    return _classify_response(response, excerpt, spec)


class _TooManyRedirects(Exception):
    pass


class _BadRedirect(Exception):
    pass


def _verify(url: str) -> bool | str:
    """Certificate verification for ``url``: the CA bundle named by ``REQUESTS_CA_BUNDLE``, else
    the default. For plain http there is no certificate; passing True there spares requests a
    stat() of the bundle path on every request."""
    if not url.startswith("https:"):
        return True
    return os.environ.get("REQUESTS_CA_BUNDLE") or True


def _urlopen(session: requests.Session, prepared: requests.PreparedRequest, timeout: float) -> urllib3.HTTPResponse:
    """What ``HTTPAdapter.send`` does with a prepared request (the guarded pool of the session's
    adapter, TLS settings, one attempt), less the ``requests.Response`` it builds around the
    answer (headers copied, cookies extracted): that wrapper was a third of a delivery's CPU
    with a fast target. The answer is urllib3's streamed response."""
    adapter = session.get_adapter(prepared.url)
    verify = _verify(prepared.url)
    try:
        pool = adapter.get_connection_with_tls_context(prepared, verify, proxies=None, cert=None)
    except urllib3.exceptions.LocationValueError as exc:
        raise requests.exceptions.InvalidURL(exc) from exc
    adapter.cert_verify(pool, prepared.url, verify, None)
    return pool.urlopen(method=prepared.method, url=prepared.path_url, body=prepared.body, headers=prepared.headers,
                        redirect=False, assert_same_host=False, preload_content=False, decode_content=False,
                        retries=False, chunked=False, timeout=urllib3.Timeout(connect=timeout, read=timeout))


def _send(
    session: requests.Session,
    spec: dict,
    headers: CaseInsensitiveDict,
    body: bytes | None,
    watchdog: Watchdog,
) -> urllib3.HTTPResponse:
    """Send the request (and follow redirects when asked), returning the final streamed response."""
    method, url = spec["method"], spec["url"]
    auth_name = spec["auth"][0] if spec["auth"] else None
    origin = _origin(url)
    hops = 0
    while True:
        remaining = watchdog.remaining()
        if remaining <= 0:
            raise urllib3.exceptions.ReadTimeoutError(None, url, "deadline reached")
        # Prepared directly, not through session.prepare_request: the session has no cookies,
        # auth or hooks to merge, and that merge copies a cookie jar on every request.
        merged = CaseInsensitiveDict(session.headers)
        merged.update(headers)  # the target's own headers win, whatever their case
        prepared = requests.PreparedRequest()
        prepared.prepare(method=method, url=url, headers=merged, data=body)
        if spec.get("signer") is not None and _origin(url) == origin:  # never sign for another host
            spec["signer"].sign(prepared)
        response = _urlopen(session, prepared, remaining)
        if not (spec["follow_redirects"] and response.status in _REDIRECTS and "location" in response.headers):
            return response
        location = response.headers["location"]
        response.close()
        hops += 1
        if hops > MAX_REDIRECTS:
            raise _TooManyRedirects()
        url = urljoin(url, location.strip())
        problem = ssrf.check_url_syntax(url)
        if problem:
            raise _BadRedirect(problem)
        status = response.status
        if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
            method, body = "GET", None
            for name in ("Content-Type", "Content-Length", "Transfer-Encoding"):
                headers.pop(name, None)
        if _origin(url) != origin and auth_name is not None:
            headers.pop(auth_name, None)  # never hand the credentials to another host
            auth_name = None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def _read_excerpt(response: urllib3.HTTPResponse) -> str:
    """At most EXCERPT_LIMIT bytes of the body; stops there (never reads the whole body).

    An error or the deadline while reading keeps what was read: the status already arrived.
    """
    data = bytearray()
    # read1: whatever has arrived (one recv), so a body cut off at the deadline keeps its start.
    read = response.read1 if hasattr(response, "read1") else response.read
    try:
        while len(data) < EXCERPT_LIMIT:
            chunk = read(EXCERPT_LIMIT - len(data), decode_content=True)
            if not chunk:
                break
            data.extend(chunk)
    except Exception:  # noqa: BLE001 - a cut-off body does not change the answer
        pass
    return bytes(data[:EXCERPT_LIMIT]).decode("utf-8", errors="replace")


def _classify_response(response: urllib3.HTTPResponse, excerpt: str | None, spec: dict) -> DeliveryResult:
    status = response.status
    codes = spec["success_codes"]
    ok = status in codes if codes is not None else 200 <= status < 300
    if ok:
        return DeliveryResult(SUCCEEDED, False, http_status=status, response_excerpt=excerpt)
    reason = (response.reason or "").strip()
    label = f"HTTP {status} {reason}".strip()
    retryable = status >= 500 or status in RETRYABLE_STATUSES
    if status in _REDIRECTS and not spec["follow_redirects"]:
        error = f"{label}: redirect not followed (follow_redirects is false)"
    elif codes is not None and 200 <= status < 300:
        error = f"{label} is not one of the success codes {sorted(codes)}"
    else:
        error = label
    return DeliveryResult(
        "failed",
        retryable,
        http_status=status,
        response_excerpt=excerpt,
        error=error[:500],
        retry_after_seconds=parse_retry_after(response.headers.get("Retry-After")),
    )


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait according to a ``Retry-After`` value (delay-seconds or HTTP-date).

    None when absent or unparseable; a date in the past gives 0.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds())


def _find(exc: BaseException, kind: type) -> Any:
    return next((e for e in exception_chain(exc) if isinstance(e, kind)), None)


def _classify_exception(exc: Exception, host: str, budget: float) -> DeliveryResult:
    connect_timeout = any(
        isinstance(e, ConnectTimeoutError) and not isinstance(e, NewConnectionError) for e in exception_chain(exc)
    )
    if isinstance(exc, requests.exceptions.ConnectTimeout) or connect_timeout:
        return timed_out(f"connection to {host} timed out after {budget:g}s")
    if isinstance(exc, requests.exceptions.Timeout) or _find(exc, urllib3.exceptions.ReadTimeoutError):
        return timed_out(f"no response from {host} within {budget:g}s")
    if isinstance(exc, requests.exceptions.InvalidHeader):
        return permanent("invalid header: a name or value holds a forbidden character (such as a line break)")
    if isinstance(exc, (requests.exceptions.InvalidURL,
                        requests.exceptions.InvalidSchema, requests.exceptions.MissingSchema,
                        requests.exceptions.InvalidJSONError, UnicodeError)):
        return permanent(f"invalid request: {type(exc).__name__}")
    if isinstance(exc, ValueError) and not isinstance(exc, requests.exceptions.RequestException):
        return permanent(f"invalid request: {type(exc).__name__}")
    verify = _find(exc, ssl.SSLCertVerificationError)
    if verify is not None:
        detail = getattr(verify, "verify_message", None) or "certificate verify failed"
        return transient(f"TLS certificate of {host} not accepted: {detail}")
    tls = _find(exc, ssl.SSLError)
    if tls is not None or isinstance(exc, requests.exceptions.SSLError):
        detail = getattr(tls, "reason", None) or "handshake failed"
        return transient(f"TLS error with {host}: {detail}")
    if _find(exc, NameResolutionError) or _find(exc, socket.gaierror):
        return transient(f"could not resolve host {host}")
    if _find(exc, ConnectionRefusedError):
        return transient(f"connection refused by {host}")
    os_error = next((e for e in exception_chain(exc) if isinstance(e, OSError) and e.errno), None)
    if os_error is not None:
        return transient(f"network error with {host}: {os_error.strerror or os_error}")
    if isinstance(exc, (requests.exceptions.ConnectionError, urllib3.exceptions.ProtocolError,
                        urllib3.exceptions.NewConnectionError)):
        return transient(f"connection to {host} failed ({_short(exc)})")
    return transient(f"HTTP delivery to {host} failed: {type(exc).__name__}")


def _short(exc: BaseException) -> str:
    """The innermost cause's class name: error texts of urllib3 quote URLs, so they are avoided."""
    chain = exception_chain(exc)
    return type(chain[-1]).__name__ if chain else type(exc).__name__
