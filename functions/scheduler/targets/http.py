"""HTTP(S) targets: one request per delivery, prepared with requests and sent with urllib3.

What a delivery does:

- Builds the request: ``method`` (GET POST PUT PATCH DELETE HEAD OPTIONS, default POST), the
  job's ``headers``, the rendered ``body`` (UTF-8), the ``auth`` header (basic, bearer, or a
  named header), then the delivery headers of the contract (``Idempotency-Key``,
  ``X-Scheduler-*``), which the job's headers cannot override. A ``sigv4`` auth signs the
  request last, as a role assumed for the job's owner (:class:`scheduler.targets.aws.HttpSigner`),
  never for another origin than the target's. ``Accept-Encoding`` defaults to
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
  :class:`~scheduler.targets.watchdog.Watchdog`, so a server that trickles bytes is still cut off.

Classification (``docs/delivery.md``): success codes (default any 2xx) succeed; 5xx, 408 and
429 are retryable failures; other statuses (other 4xx, unfollowed 3xx, a 2xx not in
``success_codes``) are permanent; network errors are retryable; timeouts are ``timed_out``
(retryable). A ``Retry-After`` (seconds or HTTP-date) of a failed answer becomes
``retry_after_seconds``. If the status line and headers arrived in time but the body is cut
off at the deadline, the status decides and the excerpt holds what was read.

The sessions and their guarded connection pools are in :mod:`scheduler.targets.http_sessions`.
"""

from __future__ import annotations

import dataclasses
import email.utils
import functools
import os
import re
import socket
import ssl
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.structures import CaseInsensitiveDict
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from scheduler.targets import ssrf
from scheduler.targets.aws import HttpSigner, sigv4_signer
from scheduler.targets.delivery import (
    EXCERPT_LIMIT,
    SUCCEEDED,
    Delivery,
    DeliveryResult,
    TargetPolicy,
    exception_chain,
    permanent,
    redact_and_cut,
    timed_out,
    transient,
)
from scheduler.targets.http_sessions import KEEP_ALIVE_PER_HOST, USER_AGENT, GuardedAdapter, close_sessions, session_for  # noqa: F401 (re-exported)
from scheduler.targets.views import HTTP_METHODS, HttpView
from scheduler.targets.watchdog import Watchdog, running

METHODS = HTTP_METHODS
RETRYABLE_STATUSES = frozenset({408, 429})
MAX_REDIRECTS = 10
MAX_ERROR_BYTES = 500  # an error text is cut to this, once its secrets are redacted

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


# ----------------------------------------------------------------------------------- target


def deliver_http(target: HttpView, delivery: Delivery, policy: TargetPolicy, *, budget: float) -> DeliveryResult:
    """Deliver ``delivery`` to the http ``target`` (body already rendered) within ``budget`` seconds.

    Never raises. See the module documentation for the semantics.
    """
    secrets = target.secrets()
    try:
        signer, result = sigv4_signer(target.sigv4, delivery, secrets)  # adds the role's secrets
        if result is None:
            # Read past the excerpt's limit by the longest secret, so that one that straddles the cut
            # is whole when redacted; redaction comes before the cut (no part of a secret is kept).
            margin = max((len(secret.encode("utf-8")) for secret in secrets), default=0)
            result = _deliver(target, delivery, policy, budget, EXCERPT_LIMIT + margin, signer)
    except Exception as exc:  # noqa: BLE001 - the contract: never raise
        result = transient(f"unexpected error during the HTTP delivery: {type(exc).__name__}")
    if result.error or result.response_excerpt:
        result = dataclasses.replace(
            result,
            response_excerpt=redact_and_cut(result.response_excerpt, secrets, EXCERPT_LIMIT),
            error=redact_and_cut(result.error, secrets, MAX_ERROR_BYTES),
        )
    return result


def _deliver(
    spec: HttpView,
    delivery: Delivery,
    policy: TargetPolicy,
    budget: float,
    read_limit: int = EXCERPT_LIMIT,
    signer: HttpSigner | None = None,
) -> DeliveryResult:
    headers = CaseInsensitiveDict(spec.headers)
    auth = spec.auth_header
    if auth is not None:
        headers[auth[0]] = auth[1]
    headers.update(delivery.headers())  # case-insensitive: the contract's values win
    body = spec.body.encode("utf-8") if spec.body is not None else None
    session = session_for(policy)
    host = urlsplit(spec.url).hostname or "?"

    watchdog = Watchdog(budget)
    response = None
    excerpt: str | None = None
    with running(watchdog):
        try:
            response = _send(session, spec, headers, body, watchdog, signer)
            if watchdog.fired:
                # Shut down while the head was still arriving: http.client may take the EOF
                # for the end of the headers, so this "response" is not one.
                return timed_out(f"timed out after {budget:g}s")
            excerpt = _read_excerpt(response, read_limit)
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
    return pool.urlopen(
        method=prepared.method,
        url=prepared.path_url,
        body=prepared.body,
        headers=prepared.headers,
        redirect=False,
        assert_same_host=False,
        preload_content=False,
        decode_content=False,
        retries=False,
        chunked=False,
        timeout=urllib3.Timeout(connect=timeout, read=timeout),
    )


def _send(
    session: requests.Session,
    spec: HttpView,
    headers: CaseInsensitiveDict,
    body: bytes | None,
    watchdog: Watchdog,
    signer: HttpSigner | None = None,
) -> urllib3.HTTPResponse:
    """Send the request (and follow redirects when asked), returning the final streamed response."""
    method, url = spec.method, spec.url
    auth = spec.auth_header
    auth_name = auth[0] if auth else None
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
        prepared = _prepare(method, url, merged, body)
        if signer is not None and _origin(url) == origin:  # never sign for another host
            signer.sign(prepared)
        response = _urlopen(session, prepared, remaining)
        if not (spec.follow_redirects and response.status in _REDIRECTS and "location" in response.headers):
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


def _prepare(method: str, url: str, headers: CaseInsensitiveDict, body: bytes | None) -> requests.PreparedRequest:
    """``PreparedRequest.prepare`` in its order, less the cookie and hook steps: the session
    keeps no cookies (its policy refuses them) and runs no hooks, and building an empty cookie
    jar per request was a third of the preparation's CPU. Credentials in the URL still become
    the Authorization header (``prepare_auth``), as before."""
    prepared = requests.PreparedRequest()
    prepared.prepare_method(method)
    if "@" in url:  # credentials (a followed redirect's): never kept in the cache below
        prepared.prepare_url(url, None)
    else:
        prepared.url = _prepared_url(url)
    prepared.prepare_headers(headers)
    prepared.prepare_body(body, None, None)
    prepared.prepare_auth(None, url)
    return prepared


@functools.lru_cache(maxsize=1024)
def _prepared_url(url: str) -> str:
    """``PreparedRequest.prepare_url`` of ``url`` (IDNA, percent-quoting), once per URL: a job's
    target URL is the same at every delivery, and preparing it was a tenth of a delivery's CPU.
    A URL it refuses raises every time (exceptions are not cached)."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    return prepared.url


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def _read_excerpt(response: urllib3.HTTPResponse, limit: int = EXCERPT_LIMIT) -> str:
    """At most ``limit`` bytes of the body; stops there (never reads the whole body). The
    caller cuts it to ``EXCERPT_LIMIT`` bytes once the secrets are redacted.

    An error or the deadline while reading keeps what was read: the status already arrived.
    Reading an answer to its end, an empty one too, is what hands its connection back to the
    pool for the next delivery to that origin (kept alive); an answer left unread is closed.
    """
    data = bytearray()
    # read1: whatever has arrived (one recv), so a body cut off at the deadline keeps its start.
    read = response.read1 if hasattr(response, "read1") else response.read
    try:
        while len(data) < limit:
            chunk = read(limit - len(data), decode_content=True)
            if not chunk:
                break
            data.extend(chunk)
    except Exception:  # noqa: BLE001 - a cut-off body does not change the answer
        pass
    return bytes(data[:limit]).decode("utf-8", errors="replace")


def _classify_response(response: urllib3.HTTPResponse, excerpt: str | None, spec: HttpView) -> DeliveryResult:
    status = response.status
    codes = spec.success_codes
    ok = status in codes if codes is not None else 200 <= status < 300
    if ok:
        return DeliveryResult(SUCCEEDED, False, http_status=status, response_excerpt=excerpt)
    reason = (response.reason or "").strip()
    label = f"HTTP {status} {reason}".strip()
    retryable = status >= 500 or status in RETRYABLE_STATUSES
    if status in _REDIRECTS and not spec.follow_redirects:
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
        error=error,  # cut to MAX_ERROR_BYTES once redacted (deliver_http)
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
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
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
    if isinstance(
        exc,
        (
            requests.exceptions.InvalidURL,
            requests.exceptions.InvalidSchema,
            requests.exceptions.MissingSchema,
            requests.exceptions.InvalidJSONError,
            UnicodeError,
        ),
    ):
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
    if isinstance(
        exc,
        (requests.exceptions.ConnectionError, urllib3.exceptions.ProtocolError, urllib3.exceptions.NewConnectionError),
    ):
        return transient(f"connection to {host} failed ({_short(exc)})")
    return transient(f"HTTP delivery to {host} failed: {type(exc).__name__}")


def _short(exc: BaseException) -> str:
    """The innermost cause's class name: error texts of urllib3 quote URLs, so they are avoided."""
    chain = exception_chain(exc)
    return type(chain[-1]).__name__ if chain else type(exc).__name__
