"""A WSGI application that serves plain HTTP through the api Lambda handler.

Each request becomes an API Gateway REST proxy event (payload version 1.0) carrying the
caller's identity, as API Gateway with IAM auth would build it; the handler's answer becomes
the HTTP response. Local mode serves it (with a fixed local principal); tests call it directly.
``principal_for_request(environ)`` decides who the caller is (None: no identity, so 403; or it
raises ``RequestRefused`` to answer 403 with its reason); it is called after the body was read, which it finds as bytes in ``environ["scheduler.body"]`` (to
verify a SigV4 signature, say).

The 1 MiB body limit is enforced here while reading: a larger body answers 413 without being
read. Requests are handled at once on the server's threads: the handler must be safe to call from
several threads (a Powertools resolver keeps the current request on itself, so local mode gives
each thread its own, see ``scheduler.api.app.per_thread_handler``).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from scheduler.core.constants import ANSWER_HEADERS, MAX_REQUEST_BODY_BYTES

# The request body, once read, is left in the WSGI environ under this key.
BODY_KEY = "scheduler.body"
_CHUNK = 64 * 1024

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
PrincipalForRequest = Callable[[dict[str, Any]], "str | None"]


@dataclass
class LocalLambdaContext:
    """What the handler's decorators read from a Lambda context."""

    function_name: str = "scheduler-api-local"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:scheduler-api-local"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/scheduler-api-local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class _TooLarge(Exception):
    pass


def _wsgi_text(value: str) -> str:
    """WSGI hands over bytes as latin-1 text; the URL's bytes are UTF-8."""
    return value.encode("latin-1").decode("utf-8", "replace")


def _read_body(environ: dict[str, Any], limit: int) -> bytes:
    stream = environ.get("wsgi.input")
    length_text = (environ.get("CONTENT_LENGTH") or "").strip()
    if stream is None:
        return b""
    if length_text:
        try:
            length = int(length_text)
        except ValueError:
            length = -1
        if length > limit:
            raise _TooLarge()
        if length <= 0:
            return b""
        chunks, remaining = [], length
        while remaining > 0:
            chunk = stream.read(min(_CHUNK, remaining))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    if not environ.get("wsgi.input_terminated"):
        return b""  # no length and no end marker: no body (WSGI forbids reading past it)
    chunks, total = [], 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise _TooLarge()
        chunks.append(chunk)


def _headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's headers. A header sent with an empty value stays (as API Gateway passes
    it): an empty ``If-None-Match`` or ``If-Match`` is refused, where, left out, the request
    was made without its condition. ``CONTENT_TYPE`` and ``CONTENT_LENGTH`` are left out when
    empty (a WSGI server may set them so for a request without them)."""
    out = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:].replace("_", "-").title()
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            name = key.replace("_", "-").title()
        else:
            continue
        out.append((name, _wsgi_text(str(value))))
    return out


def make_event(environ: dict[str, Any], body: bytes, principal: str | None, stage: str = "local") -> dict[str, Any]:
    """The API Gateway REST proxy event (payload 1.0) of a WSGI request."""
    method = environ.get("REQUEST_METHOD", "GET").upper()
    # The path as the client sent it, percent-escapes and all, as API Gateway passes it (the API
    # decodes it once; PATH_INFO, decoded by the server already, would be decoded twice).
    raw = _raw_path(environ)
    path = _wsgi_text(raw) if raw.startswith("/") else _wsgi_text(environ.get("PATH_INFO") or "/") or "/"
    query = parse_qsl(_wsgi_text(environ.get("QUERY_STRING") or ""), keep_blank_values=True)
    multi_query: dict[str, list[str]] = {}
    for k, v in query:
        multi_query.setdefault(k, []).append(v)
    headers = _headers(environ)
    multi_headers: dict[str, list[str]] = {}
    for k, v in headers:
        multi_headers.setdefault(k, []).append(v)
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    account = (
        principal.split(":")[4]
        if principal and principal.startswith("arn:") and principal.count(":") >= 5
        else "000000000000"
    )
    now = time.time()
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": path,
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "accountId": account,
            "apiId": "local",
            "protocol": environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
            "domainName": environ.get("HTTP_HOST", "localhost"),
            "identity": {
                "userArn": principal,
                "caller": principal,
                "user": principal,
                "accountId": account if principal else None,
                "sourceIp": environ.get("REMOTE_ADDR", "127.0.0.1"),
                "userAgent": environ.get("HTTP_USER_AGENT"),
            },
        },
        "body": text if body else None,
        "isBase64Encoded": encoded if body else False,
    }


def _status_line(code: int) -> str:
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Unknown"


def _respond(start_response: Callable, code: int, headers: list[tuple[str, str]], body: bytes) -> Iterable[bytes]:
    headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
    headers.append(("Content-Length", str(len(body))))
    start_response(_status_line(code), headers)
    return [body]


def _error(start_response: Callable, code: int, error: str, message: str) -> Iterable[bytes]:
    # No "Connection: close": a WSGI application must not set hop-by-hop headers (PEP 3333),
    # and waitress answers 500 to one that does. Waitress closes the connection itself when it
    # did not read the whole body.
    body = json.dumps({"error": {"code": error, "message": message, "details": []}}).encode()
    return _respond(start_response, code, [("Content-Type", "application/json"), *ANSWER_HEADERS.items()], body)


class RequestRefused(Exception):
    """Raised by a ``principal_for_request`` to refuse a request with its reason (a bad
    signature, say): answered with the error envelope, the handler is not called."""

    def __init__(self, message: str, status: int = 403, code: str = "forbidden"):
        super().__init__(message)
        self.message, self.status, self.code = message, status, code


def _encoded_slash(environ: dict[str, Any]) -> bool:
    """Whether the request's path, as sent, holds an encoded "/" (``%2F``): the server decodes it
    into ``PATH_INFO``, where ``/v1/calendars/a%2Fchanges`` would read as another route."""
    return "%2f" in _raw_path(environ).lower()


def _raw_path(environ: dict[str, Any]) -> str:
    """The request's path as the client sent it (percent-escapes kept), "" when the server does
    not say it."""
    return str(environ.get("REQUEST_URI") or environ.get("RAW_URI") or "").split("?", 1)[0]


def make_wsgi_app(
    handler: Handler,
    principal_for_request: PrincipalForRequest,
    *,
    stage: str = "local",
    max_body_bytes: int = MAX_REQUEST_BODY_BYTES,
) -> Callable:
    """A WSGI application calling ``handler(event, context)`` for every request, from whichever
    thread the server serves it on: no lock around it, so a slow request (a preview planning its
    calendars for seconds) holds up no other (``/v1/health`` included)."""

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        try:
            body = _read_body(environ, max_body_bytes)
        except _TooLarge:
            return _error(
                start_response, 413, "payload_too_large", f"the request body is larger than {max_body_bytes} bytes"
            )
        environ[BODY_KEY] = body  # for a principal_for_request that verifies a signature over it
        try:
            principal = principal_for_request(environ)
        except RequestRefused as exc:
            return _error(start_response, exc.status, exc.code, exc.message)
        if _encoded_slash(environ):  # no name or id holds a "/": not one of the API's paths
            return _error(start_response, 404, "not_found", "no such resource")
        event = make_event(environ, body, principal, stage)
        answer = handler(event, LocalLambdaContext())
        headers: list[tuple[str, str]] = []
        for name, values in (answer.get("multiValueHeaders") or {}).items():
            headers.extend((name, str(v)) for v in values)
        seen = {k.lower() for k, _ in headers}
        for name, value in (answer.get("headers") or {}).items():
            if name.lower() not in seen:
                headers.append((name, str(value)))
        raw = answer.get("body") or ""
        payload = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode("utf-8")
        return _respond(start_response, int(answer.get("statusCode", 500)), headers, payload)

    return app


_SERVER_ERROR_CODES = {
    400: "invalid_request",
    413: "payload_too_large",
    431: "headers_too_large",
    500: "internal_error",
}


def envelope_server_errors(server: Any, max_body_bytes: int = MAX_REQUEST_BODY_BYTES) -> Any:
    """Make a waitress server answer the errors it raises itself (a body over its
    ``max_request_body_size``: 413, before the body is read; a malformed request: 400) with the
    API's error envelope rather than waitress' plain text. Returns the server."""
    from waitress.channel import HTTPChannel
    from waitress.task import ErrorTask

    class EnvelopeErrorTask(ErrorTask):
        def execute(self) -> None:
            error = self.request.error
            if error.code == 413:
                message = f"the request body is larger than {max_body_bytes} bytes"
            else:
                message = f"{error.reason}: {error.body}".strip().rstrip(":")
            body = json.dumps(
                {
                    "error": {
                        "code": _SERVER_ERROR_CODES.get(
                            error.code, "internal_error" if error.code >= 500 else "invalid_request"
                        ),
                        "message": message,
                        "details": [],
                    }
                }
            ).encode()
            self.status = f"{error.code} {error.reason}"
            self.response_headers.append(("Content-Type", "application/json"))
            self.response_headers.extend(ANSWER_HEADERS.items())
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class EnvelopeChannel(HTTPChannel):
        error_task_class = EnvelopeErrorTask

    server.channel_class = EnvelopeChannel
    return server
