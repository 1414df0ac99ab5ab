"""``scheduler console``: the console on the user's machine, for a deployed API.

A small server on loopback serves the console's pages and forwards their ``/v1/...`` calls to
the deployed API, each signed with SigV4 (service ``execute-api``) with the user's AWS
credentials from the usual chain (environment, profile, SSO, instance role...). The API keeps
IAM as its only door; nothing is opened in AWS. No one else may spend that identity here:

- the Host, content-type and Origin checks of ``scheduler local``, the Origin (and
  ``Sec-Fetch-Site``) on every method, reads included (``guard(..., every_method=True)``);
- only the API's methods on the API's routes are forwarded (``scheduler.api.routes``), any
  other request is answered here (404, or 405 with ``Allow``);
- a body over the API's 1 MiB is refused (413) before it is read: waitress is told the limit;
- beyond loopback, a token on every request (``scheduler.console.access``): without one the
  server refuses to start.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import signal
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import requests
from botocore.exceptions import BotoCoreError

from scheduler.api.routes import allowed_methods
from scheduler.client import encode_query, region_of_endpoint
from scheduler.console import console_app
from scheduler.console.access import ENV_TOKEN, TokenGate
from scheduler.console.guard import LOOPBACK_NAMES, guard
from scheduler.core.constants import ANSWER_HEADERS
from scheduler.transport.http_adapter import MAX_REQUEST_BODY_BYTES, envelope_server_errors
from scheduler.transport.sigv4 import wsgi_raw_path

logger = logging.getLogger("scheduler.console")

SERVICE = "execute-api"
TIMEOUT_SECONDS = 30.0
# Request headers passed on to the API (the rest, cookies and Origin among them, stay here).
FORWARDED_REQUEST = ("Accept", "Content-Type", "If-Match", "If-None-Match")
FORWARDED_ANSWER = ("content-type", "etag", "location", "retry-after")


class Signer:
    """Signs requests for ``region`` with the credential chain of a botocore session."""

    def __init__(self, region: str | None, endpoint: str, session: Any = None):
        import botocore.session

        self.session = session or botocore.session.Session()
        self.region = (
            region or region_of_endpoint(endpoint) or self.session.get_config_variable("region") or "us-east-1"
        )

    def credentials(self) -> Any:
        """The current frozen credentials (refreshed by botocore when they expire), or None."""
        creds = self.session.get_credentials()
        return creds.get_frozen_credentials() if creds is not None else None

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """The headers to send: ``headers`` plus the SigV4 ones."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        creds = self.credentials()
        if creds is None:
            raise LookupError(
                "no AWS credentials found (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
            )
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(creds, SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"


def _error(
    start_response: Callable, status: str, code: str, message: str, headers: list[tuple[str, str]] | None = None
) -> list[bytes]:
    body = json.dumps({"error": {"code": code, "message": message, "details": []}}).encode()
    start_response(
        status,
        # as the API's own answers: never cached, never sniffed
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *ANSWER_HEADERS.items()]
        + (headers or []),
    )
    return [body]


def _not_an_api_call(method: str, path: str, start_response: Callable) -> list[bytes] | None:
    """The answer to a request the API does not serve (404 for a path, 405 for a method of
    ``routes.py``'s table), given here without forwarding it; None for an API call."""
    allowed = allowed_methods(path)
    if not allowed:
        return _error(start_response, "404 Not Found", "not_found", "no such route in the API")
    if method not in allowed:
        return _error(
            start_response,
            "405 Method Not Allowed",
            "method_not_allowed",
            "the resource does not answer this method",
            [("Allow", ", ".join(allowed))],
        )
    return None


def _read_body(environ: dict[str, Any]) -> bytes | None:
    """The request body (None when it is over the API's limit)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_REQUEST_BODY_BYTES:
        return None
    return environ["wsgi.input"].read(length) if length > 0 else b""


def forwarding_app(endpoint: str, signer: Signer, *, http: requests.Session | None = None) -> Callable:
    """A WSGI app that sends each ``/v1/...`` request to ``endpoint`` (the API's base URL, with
    its stage), signed, and answers what the API answered."""
    base = endpoint.rstrip("/")
    http = http or requests.Session()

    def forward(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = wsgi_raw_path(environ)
        if not path.startswith("/v1/"):
            return _error(start_response, "404 Not Found", "not_found", "only /console/ and /v1/ are served here")
        if any(segment in (".", "..") for segment in unquote(path).split("/")):
            # The HTTP client would resolve them: /v1/../../dev/v1/... would be signed for another stage.
            return _error(start_response, "400 Bad Request", "invalid_request", "the path has . or .. segments")
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        refused = _not_an_api_call(method, path, start_response)
        if refused is not None:
            return refused
        body = _read_body(environ)
        if body is None:
            return _error(
                start_response,
                "413 Payload Too Large",
                "payload_too_large",
                f"the request body is larger than {MAX_REQUEST_BODY_BYTES} bytes",
            )
        pairs: dict[str, list[str]] = {}
        for key, value in parse_qsl(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True):
            pairs.setdefault(key, []).append(value)
        query = encode_query(pairs)  # canonical (RFC 3986) form, so the signature matches the wire
        url = base + path + (f"?{query}" if query else "")
        headers = {}
        for name in FORWARDED_REQUEST:
            key = "CONTENT_TYPE" if name == "Content-Type" else "HTTP_" + name.upper().replace("-", "_")
            if environ.get(key):
                headers[name] = str(environ[key])
        try:
            signed = signer.sign(method, url, headers, body)
        except LookupError as exc:
            return _error(start_response, "401 Unauthorized", "no_credentials", str(exc))
        try:
            answer = http.request(
                method, url, data=body or None, headers=signed, timeout=TIMEOUT_SECONDS, allow_redirects=False
            )
        except requests.RequestException as exc:
            logger.warning("cannot reach %s: %s", base, type(exc).__name__)
            return _error(start_response, "502 Bad Gateway", "bad_gateway", f"cannot reach the API at {base}")
        content = answer.content
        out = [(k, v) for k, v in answer.headers.items() if k.lower() in FORWARDED_ANSWER]
        out.extend(ANSWER_HEADERS.items())  # whatever the API sent: the proxy's own answer
        out.append(("Content-Length", str(len(content))))
        start_response(f"{answer.status_code} {answer.reason or _phrase(answer.status_code)}", out)
        return [content]

    return forward


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name to bind) is this machine's loopback alone."""
    name = host.strip("[]").lower().rstrip(".")
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def bind_refusal(host: str, token: str | None) -> str | None:
    """Why the console may not listen on ``host`` (beyond loopback without a token), or None."""
    if token or is_loopback(host):
        return None
    return (
        f"--host {host} is not a loopback address: whoever reaches it could use your AWS identity; "
        f"give --token (a token is generated, or ${ENV_TOKEN} is used) and open the URL printed at start"
    )


def make_server(
    *,
    endpoint: str,
    port: int,
    region: str | None,
    host: str = "127.0.0.1",
    signer: Signer | None = None,
    token: str | None = None,
) -> Any:
    """The waitress server of ``scheduler console`` (not yet running); with ``token``, every
    request must carry it (``scheduler.console.access``). ``ValueError`` for an endpoint that is
    not the API's URL, or a bind beyond loopback without a token."""
    from waitress import create_server

    refused = bind_refusal(host, token)
    if refused:
        raise ValueError(refused)
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"--endpoint must be the API's http(s) base URL, not {endpoint!r}")
    if parts.scheme == "http" and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        # Signed requests carry the session token: in clear text only to this machine.
        raise ValueError(f"--endpoint must be https (http only on this machine), not {endpoint!r}")
    signer = signer or Signer(region, endpoint)
    app = console_app(forwarding_app(endpoint, signer))
    if token:
        app = TokenGate(token)(app)
    # Waitress buffers a body before the app sees it: past this limit it answers 413 itself,
    # before reading it (a chunked body's framing counts, hence the slack; the app checks the
    # exact limit).
    server = create_server(
        guard(app, bound_host=host, every_method=True),
        host=host,
        port=port,
        threads=4,
        ident="scheduler-console",
        max_request_body_size=MAX_REQUEST_BODY_BYTES + 64 * 1024,
    )
    return envelope_server_errors(server)


def stop_server(server: Any, thread: threading.Thread, timeout: float = 5.0) -> None:
    """Stop a waitress server whose loop runs in ``thread``: the loop itself closes the sockets
    (closed from another thread, they break its ``select()``), then its workers end."""

    def close_all() -> None:
        for channel in list(server._map.values()):
            channel.close()

    try:
        server.trigger.pull_trigger(close_all)
    except OSError:  # the loop has already ended and closed its sockets, the trigger's too
        pass
    thread.join(timeout)
    server.task_dispatcher.shutdown(timeout=timeout)


def run_console(
    *,
    endpoint: str,
    port: int,
    region: str | None,
    host: str = "127.0.0.1",
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    token: str | None = None,
) -> int:
    """Serve the console for the API at ``endpoint`` on ``host:port`` until Ctrl-C (or ``stop``);
    ``ready`` is called with the console's URL once it answers (with ``token``, the URL that
    signs a browser in). The exit code: 0, or 1 when the endpoint is not a URL, no AWS
    credentials are found, or ``host`` is beyond loopback without a token."""
    try:
        signer = Signer(region, endpoint)
        if signer.credentials() is None:
            print(
                "scheduler console: no AWS credentials found (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY)",
                flush=True,
            )
            return 1
        server = make_server(endpoint=endpoint, port=port, region=region, host=host, signer=signer, token=token)
    except OSError as exc:  # the port cannot be bound
        busy = exc.errno in (98, 48, 10048)  # EADDRINUSE on Linux, macOS, Windows
        reason = "is in use (another scheduler console?); give --port" if busy else f"cannot be bound: {exc.strerror}"
        print(f"scheduler console: port {port} on {host} {reason}", flush=True)
        return 1
    except ValueError as exc:
        print(f"scheduler console: {exc}", flush=True)
        return 1
    except BotoCoreError as exc:  # a broken AWS config, an unknown profile
        print(f"scheduler console: cannot load AWS credentials: {exc}", flush=True)
        return 1
    stop = stop or threading.Event()
    thread = threading.Thread(target=server.run, name="console", daemon=True)
    thread.start()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.effective_port}/console/"
    needs = ""
    if token:
        url = TokenGate(token).login_url(url)
        needs = "; every request needs the token: open this URL once, or send Authorization: Bearer <token>"
    print(
        f"scheduler console: {url} for {endpoint.rstrip('/')} (signed for {signer.region}{needs}). Ctrl-C to stop.",
        flush=True,
    )
    if ready is not None:
        ready(url)
    try:
        stop.wait()
    finally:
        stop_server(server, thread)
    return 0


__all__ = ["Signer", "bind_refusal", "forwarding_app", "is_loopback", "make_server", "run_console", "stop_server"]
