"""HTTP(S) targets: one request per delivery, its URL prepared as requests prepares it, sent and
read by :mod:`scheduler.targets.http_wire`.

What a delivery does:

- Builds the request: ``method`` (GET POST PUT PATCH DELETE HEAD OPTIONS, default POST), the
  job's ``headers``, the rendered ``body`` (UTF-8), the ``auth`` header (basic, bearer, or a
  named header), then the delivery headers of the contract (``Idempotency-Key``,
  ``X-Scheduler-*``), which the job's headers cannot override. A ``sigv4`` auth signs the
  request last, as a role assumed for the job's owner (:class:`scheduler.targets.aws.HttpSigner`),
  never for another origin than the target's. ``Accept-Encoding`` defaults to
  ``identity`` so the excerpt is readable text. A header that cannot be put on the wire as it
  is (a line break in it) fails the delivery for good.
- Connects through :mod:`scheduler.targets.ssrf` (``policy.allow_private`` false): the host is
  resolved once, every address checked, and the socket connected to a validated address;
  TLS is verified (certifi, or ``REQUESTS_CA_BUNDLE``) with SNI and the certificate check on
  the URL's host name. No proxy is ever used (it would hide the real destination from the
  guard). Connections are kept alive per owner, origin and policy: a connection never carries
  the request of another owner than the one it was opened for.
- Refuses a body on a GET or HEAD (``targets.views``): a server that ignores it reads it as the
  next request on the connection.
- Follows redirects only with ``follow_redirects: true`` (at most 10 hops, each hop guarded;
  303, and 301/302 after a POST, become a GET without body; the credentials are dropped when
  the origin changes: the ``auth`` header, a manual run's secret headers, ``Authorization``,
  ``Proxy-Authorization`` and ``Cookie``).
- Reads at most 4 KiB of the response body, for the excerpt; a longer body is not read on (its
  connection is closed).
- Bounds the whole delivery (name resolution, connect, TLS, request, response headers,
  excerpt) by ``timeout_seconds`` (or the executor's cap) with a wall-clock
  :class:`~scheduler.targets.watchdog.Watchdog`, so a server that trickles bytes is still cut off.

Classification (``docs/delivery.md``): success codes (default any 2xx) succeed; 5xx, 408 and
429 are retryable failures; other statuses (other 4xx, unfollowed 3xx, a 2xx not in
``success_codes``) are permanent; network errors are retryable; timeouts are ``timed_out``
(retryable). A ``Retry-After`` (seconds or HTTP-date) of a failed answer becomes
``retry_after_seconds``. If the status line and headers arrived in time but the body is cut
off at the deadline, the status decides and the excerpt holds what was read.

"""

from __future__ import annotations

import base64
import email.utils
import functools
import re
import socket
import ssl
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import requests
from msgspec import structs

from scheduler.targets import http_wire, ssrf
from scheduler.targets.aws import HttpSigner, sigv4_signer
from scheduler.targets.http_wire import DEFAULT_HEADERS, Headers, Request, Response, close_connections  # noqa: F401 (re-exported)
from scheduler.targets.results import (
    EXCERPT_LIMIT,
    FAILED,
    SUCCEEDED,
    Delivery,
    Outcome,
    TargetPolicy,
    exception_chain,
    permanent,
    redact_and_cut,
    timed_out,
    transient,
)
from scheduler.targets.views import HTTP_METHODS, HttpView
from scheduler.targets.watchdog import Watchdog, running

METHODS = HTTP_METHODS
RETRYABLE_STATUSES = frozenset({408, 429})
MAX_REDIRECTS = 10
MAX_ERROR_BYTES = 500  # an error text is cut to this, once its secrets are redacted

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


# ----------------------------------------------------------------------------------- target


def deliver_http(target: HttpView, delivery: Delivery, policy: TargetPolicy, *, budget: float) -> Outcome:
    """Deliver ``delivery`` to the http ``target`` (body already rendered) within ``budget`` seconds.

    Never raises. See the module documentation for the semantics.
    """
    secrets = target.secrets()
    try:
        began = time.monotonic()
        signer, result = sigv4_signer(target.sigv4, delivery, secrets, budget=budget)  # adds the role's secrets
        left = budget
        if signer is not None:  # the AssumeRole (or the wait for another's) comes off the budget
            left = budget - (time.monotonic() - began)
            if left <= 0:
                result = timed_out(f"sts AssumeRole: assuming the role took the delivery's whole time ({budget:g}s)")
        if result is None:
            # Read past the excerpt's limit by the longest secret, so that one that straddles the cut
            # is whole when redacted; redaction comes before the cut (no part of a secret is kept).
            margin = max((len(secret.encode("utf-8")) for secret in secrets), default=0)
            result = _deliver(target, delivery, policy, left, EXCERPT_LIMIT + margin, signer)
    except Exception as exc:
        result = transient(f"unexpected error during the HTTP delivery: {type(exc).__name__}")
    if result.error or result.response_excerpt:
        result = structs.replace(
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
) -> Outcome:
    headers = Headers(DEFAULT_HEADERS)
    headers.update(spec.headers)  # the target's own headers win over the defaults, whatever their case
    auth = spec.auth_header
    if auth is not None:
        headers[auth[0]] = auth[1]
    headers.update(delivery.headers())  # case-insensitive: the contract's values win
    body = spec.body.encode("utf-8") if spec.body is not None else None

    watchdog = Watchdog(budget)
    hop = [spec.url]  # the URL being sent to: a redirect's, once followed (errors name its host)
    with running(watchdog):
        try:
            response = _send(spec, headers, body, watchdog, policy, read_limit, signer, owner=delivery.owner, hop=hop)
        except ssrf.TargetNotAllowed as exc:
            return permanent(str(exc))
        except _TooManyRedirects:
            return permanent(f"more than {MAX_REDIRECTS} redirects")
        except _BadRedirect as exc:
            return permanent(f"redirect refused: {exc}")
        except Exception as exc:
            refused = _find(exc, ssrf.TargetNotAllowed)
            if refused is not None:
                return permanent(str(refused))
            if watchdog.fired:
                return timed_out(f"timed out after {budget:g}s")
            return _classify_exception(exc, _origin(hop[0])[1] or "?", budget)
    excerpt = response.body.decode("utf-8", errors="replace")
    return _classify_response(response, excerpt, spec)


# Dropped on a redirect to another origin whoever set them, as browsers and requests do.
_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")


def _credentials(spec: HttpView) -> set[str]:
    """The headers (lower case) that stay with the target's origin: its auth's header, a manual
    run's secret headers, and those that carry credentials by their nature."""
    auth = spec.auth_header
    return {*_CREDENTIAL_HEADERS, *spec.secret_headers, *((auth[0].lower(),) if auth else ())}


class _TooManyRedirects(Exception):
    pass


class _BadRedirect(Exception):
    pass


def _send(
    spec: HttpView,
    headers: Headers,
    body: bytes | None,
    watchdog: Watchdog,
    policy: TargetPolicy,
    read_limit: int,
    signer: HttpSigner | None = None,
    *,
    owner: str | None = None,
    hop: list[str] | None = None,
) -> Response:
    """Send the request (and follow redirects when asked) on connections of ``owner``, returning
    the final answer; ``hop[0]`` is set to each URL as it is sent to."""
    method, url = spec.method, spec.url
    origin = _origin(url)
    hops = 0
    while True:
        if watchdog.remaining() <= 0:
            raise TimeoutError("deadline reached")
        if hop is not None:
            hop[0] = url
        request = _prepare(method, url, headers, body)
        if signer is not None and _origin(url) == origin:  # never sign for another host
            signer.sign(request)
        response = http_wire.send(request, policy, watchdog, read_limit, owner=owner)
        location = response.header("location")
        if not (spec.follow_redirects and response.status in _REDIRECTS and location is not None):
            return response
        hops += 1
        if hops > MAX_REDIRECTS:
            raise _TooManyRedirects()
        try:
            url = urljoin(url, location.strip())
        except ValueError as exc:  # "http://[::1": not a URL at all
            raise _BadRedirect(f"its Location is not a URL ({exc})") from None
        problem = ssrf.check_url_syntax(url)
        if problem:
            raise _BadRedirect(problem)
        status = response.status
        if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
            method, body = "GET", None
            for name in ("Content-Type", "Content-Length", "Transfer-Encoding"):
                headers.pop(name, None)
        if _origin(url) != origin:
            for name in [name for name in headers if name.lower() in _credentials(spec)]:
                headers.pop(name, None)  # never hand the credentials to another host


def _prepare(method: str, url: str, headers: Headers, body: bytes | None) -> Request:
    """The request to send: ``url`` prepared as requests prepares it (IDNA host, percent-quoted
    path), credentials in it (a followed redirect's) turned into the Authorization header, as
    requests does, and left out of the URL sent."""
    if "@" not in urlsplit(url).netloc:
        return Request(method, _prepared_url(url), Headers(headers), body)
    prepared = requests.PreparedRequest()  # credentials: never kept in the cache below
    prepared.prepare_url(url, None)
    final = Headers(headers)
    parts = urlsplit(str(prepared.url))
    username, password = unquote(parts.username or ""), unquote(parts.password or "")
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    final["Authorization"] = f"Basic {token}"
    netloc = parts.netloc.rpartition("@")[2]
    return Request(method, parts._replace(netloc=netloc).geturl(), final, body)


@functools.lru_cache(maxsize=1024)
def _prepared_url(url: str) -> str:
    """``PreparedRequest.prepare_url`` of ``url`` (IDNA, percent-quoting), once per URL: a job's
    target URL is the same at every delivery, and preparing it was a tenth of a delivery's CPU.
    A URL it refuses raises every time (exceptions are not cached)."""
    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    return str(prepared.url)


@functools.lru_cache(maxsize=1024)
def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host in lower case, port) of ``url``; a URL it cannot read raises every time."""
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def _classify_response(response: Response, excerpt: str | None, spec: HttpView) -> Outcome:
    status = response.status
    codes = spec.success_codes
    ok = status in codes if codes is not None else 200 <= status < 300
    if ok:
        return Outcome(SUCCEEDED, False, http_status=status, response_excerpt=excerpt)
    reason = (response.reason or "").strip()
    label = f"HTTP {status} {reason}".strip()
    retryable = status >= 500 or status in RETRYABLE_STATUSES
    if status in _REDIRECTS and not spec.follow_redirects:
        error = f"{label}: redirect not followed (follow_redirects is false)"
    elif codes is not None and 200 <= status < 300:
        error = f"{label} is not one of the success codes {sorted(codes)}"
    else:
        error = label
    return Outcome(
        FAILED,
        retryable,
        http_status=status,
        response_excerpt=excerpt,
        error=error,  # cut to MAX_ERROR_BYTES once redacted (deliver_http)
        retry_after_seconds=parse_retry_after(response.header("retry-after")),
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
    except (TypeError, ValueError, IndexError, OverflowError):  # an offset or a year past any date
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())


def _find(exc: BaseException, kind: type) -> Any:
    return next((e for e in exception_chain(exc) if isinstance(e, kind)), None)


def _classify_exception(exc: Exception, host: str, budget: float) -> Outcome:
    if _find(exc, http_wire.ConnectTimeout):
        return timed_out(f"connection to {host} timed out after {budget:g}s")
    if isinstance(exc, TimeoutError):
        return timed_out(f"no response from {host} within {budget:g}s")
    # Before ValueError: a certificate refused is one (ssl.SSLCertVerificationError).
    verify = _find(exc, ssl.SSLCertVerificationError)
    if verify is not None:
        detail = getattr(verify, "verify_message", None) or "certificate verify failed"
        return transient(f"TLS certificate of {host} not accepted: {detail}")
    tls = _find(exc, ssl.SSLError)
    if tls is not None:
        detail = getattr(tls, "reason", None) or "handshake failed"
        return transient(f"TLS error with {host}: {detail}")
    if isinstance(exc, http_wire.InvalidHeader):
        return permanent("invalid header: a name or value holds a forbidden character (such as a line break)")
    if isinstance(
        exc,
        (
            requests.exceptions.InvalidURL,
            requests.exceptions.InvalidSchema,
            requests.exceptions.MissingSchema,
            UnicodeError,
        ),
    ):
        return permanent(f"invalid request: {type(exc).__name__}")
    if isinstance(exc, ValueError) and not isinstance(exc, requests.exceptions.RequestException):
        return permanent(f"invalid request: {type(exc).__name__}")
    if _find(exc, socket.gaierror):
        return transient(f"could not resolve host {host}")
    if _find(exc, ConnectionRefusedError):
        return transient(f"connection refused by {host}")
    if isinstance(exc, http_wire.InvalidResponse):
        return transient(f"connection to {host} failed ({exc})")
    os_error = next((e for e in exception_chain(exc) if isinstance(e, OSError) and e.errno), None)
    if os_error is not None:
        return transient(f"network error with {host}: {os_error.strerror or os_error}")
    return transient(f"HTTP delivery to {host} failed: {type(exc).__name__}")
