"""HTTP target against real HTTP(S) servers on loopback (local-mode policy: allow_private)."""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import json
import socket
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduler.targets import http as http_target
from scheduler.targets.http import parse_retry_after
from scheduler.targets.overrides import apply_overrides
from scheduler.targets.results import Delivery, TargetPolicy
from scheduler.targets.router import deliver

LOCAL = TargetPolicy(allow_private=True)
SCHEDULED = dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)


def make_delivery(attempt: int = 1) -> Delivery:
    return Delivery(job_id=str(uuid.uuid4()), execution_id=str(uuid.uuid4()), scheduled_at=SCHEDULED, attempt=attempt)


# ------------------------------------------------------------------------- the test server


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, *args):  # quiet
        pass

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        record = {
            "method": self.command,
            "path": path,
            "headers": {k: v for k, v in self.headers.items()},
            "body": body,
            "client": self.client_address,
        }
        with self.server.lock:
            self.server.requests.append(record)
            count = sum(1 for r in self.server.requests if r["path"] == path)
        self.server.dispatch(self, path, query, count, record)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address=("127.0.0.1", 0), family=socket.AF_INET, tls_context=None):
        self.address_family = family
        self.tls_context = tls_context
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.stop = threading.Event()
        self.sent_bytes = 0
        self.sni: list[str | None] = []
        super().__init__(address, Handler)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def get_request(self):
        sock, address = self.socket.accept()
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request, client_address):  # failed handshakes, clients that hang up
        pass

    def hits(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls_context else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def dispatch(self, h: Handler, path: str, query: str, count: int, record: dict) -> None:
        route = path.split("/")[1]
        if route == "ok":
            h.reply(200, b"ok", {"Content-Type": "text/plain"})
        elif route == "empty":
            h.reply(200, b"")
        elif route == "no-content":
            h.send_response(204)
            h.end_headers()
        elif route == "status":
            code = int(path.split("/")[2])
            h.reply(code, f"status {code}".encode())
        elif route == "flaky":  # 500, then 200
            h.reply(500 if count == 1 else 200, b"first fails" if count == 1 else b"then works")
        elif route == "retry-seconds":
            h.reply(429, b"slow down", {"Retry-After": "7"})
        elif route == "retry-date":
            when = email.utils.format_datetime(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120), usegmt=True)
            h.reply(503, b"maintenance", {"Retry-After": when})
        elif route == "retry-overflow":  # a date email.utils cannot hold: OverflowError
            h.reply(404, b"gone", {"Retry-After": "Fri, 31 Dec 2026 23:59:59 +99999999999999999999"})
        elif route == "slow":  # answers only when the test is over
            self.stop.wait(15)
            h.reply(200, b"too late")
        elif route == "trickle-headers":  # one header byte every 100 ms, forever
            h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            h.wfile.flush()
            while not self.stop.wait(0.1):
                try:
                    h.wfile.write(b"X")
                    h.wfile.flush()
                except OSError:
                    return
        elif route == "trickle-body":  # headers at once, then one body byte every 100 ms
            h.send_response(200)
            h.send_header("Content-Length", "100000")
            h.end_headers()
            h.wfile.flush()
            while not self.stop.wait(0.1):
                try:
                    h.wfile.write(b"a")
                    h.wfile.flush()
                except OSError:
                    return
        elif route == "big":  # claims 1 GiB and sends until the client hangs up
            h.send_response(200)
            h.send_header("Content-Length", str(1 << 30))
            h.end_headers()
            chunk = b"0123456789abcdef" * 4096
            try:
                while not self.stop.is_set() and self.sent_bytes < (1 << 30):
                    h.wfile.write(chunk)
                    self.sent_bytes += len(chunk)
            except OSError:
                h.close_connection = True
        elif route == "redirect":  # /redirect/<status>?<location>
            h.reply(int(path.split("/")[2]), b"moved", {"Location": query})
        elif route == "badlocation":  # a Location that is not a URL at all (no closing bracket)
            h.reply(302, b"moved", {"Location": "http://[::1"})
        elif route == "echo":
            h.reply(200, json.dumps({"headers": record["headers"]}).encode(), {"Content-Type": "application/json"})
        elif route == "bytes":
            h.reply(200, b"\xff\xfe bad utf-8 \xc3")
        else:
            h.reply(404, b"no route")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.shutdown()
        self.server_close()


@pytest.fixture
def server():
    with Server() as srv:
        yield srv


def http(url: str, **fields) -> dict:
    return {"type": "http", "url": url, **fields}


# --------------------------------------------------------------------------------- the tests


def test_success_carries_the_delivery_headers_and_body(server):
    delivery = make_delivery(attempt=2)
    target = http(
        server.url("/ok"),
        headers={
            "Content-Type": "application/json",
            "X-Custom": "1",
            # a job cannot override the delivery headers, whatever the case
            "X-Scheduler-Job-Id": "forged",
            "idempotency-key": "forged",
        },
        body='{"hello": "world"}',
    )
    result = deliver(target, delivery, LOCAL)
    assert result.status == "succeeded" and not result.retryable
    assert result.http_status == 200 and result.response_excerpt == "ok" and result.error is None
    (request,) = server.hits("/ok")
    headers = request["headers"]
    assert request["method"] == "POST"
    assert request["body"] == b'{"hello": "world"}'
    assert headers["Idempotency-Key"] == f"{delivery.job_id}:2026-12-01T02:00:00Z"
    assert headers["X-Scheduler-Job-Id"] == delivery.job_id
    assert headers["X-Scheduler-Execution-Id"] == delivery.execution_id
    assert headers["X-Scheduler-Scheduled-At"] == "2026-12-01T02:00:00Z"
    assert headers["X-Scheduler-Attempt"] == "2"
    assert headers["X-Custom"] == "1" and headers["Content-Type"] == "application/json"
    assert "forged" not in json.dumps(headers)


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "post"])
def test_methods(server, method):
    result = deliver(http(server.url("/ok"), method=method), make_delivery(), LOCAL)
    assert result.status == "succeeded"
    assert server.hits("/ok")[0]["method"] == method.upper()


def test_placeholders_are_rendered_in_the_body(server):
    delivery = make_delivery(attempt=3)
    body = '{"job": "{{job_id}}", "run": "{{ execution_id }}", "at": "{{scheduled_at}}", "try": {{attempt}}, "x": "{{other}}"}'
    assert deliver(http(server.url("/ok"), body=body), delivery, LOCAL).succeeded
    sent = json.loads(server.hits("/ok")[0]["body"])
    assert sent == {
        "job": delivery.job_id,
        "run": delivery.execution_id,
        "at": "2026-12-01T02:00:00Z",
        "try": 3,
        "x": "{{other}}",
    }


def test_a_body_rendered_already_is_sent_as_it_is(server):
    """An alert's target, rendered in one pass with its own placeholders (``rendered=True``):
    a value that quotes a placeholder is not rendered again."""
    body = '{"e": "HTTP 500 {{attempt}} {{job_id}}"}'
    assert deliver(http(server.url("/ok"), body=body), make_delivery(attempt=3), LOCAL, rendered=True).succeeded
    assert json.loads(server.hits("/ok")[0]["body"]) == {"e": "HTTP 500 {{attempt}} {{job_id}}"}


def test_500_then_200_across_two_attempts(server):
    url = server.url(f"/flaky/{uuid.uuid4().hex}")
    first = deliver(http(url), make_delivery(1), LOCAL)
    assert (first.status, first.retryable, first.http_status) == ("failed", True, 500)
    assert first.response_excerpt == "first fails" and "500" in first.error
    second = deliver(http(url), make_delivery(2), LOCAL)
    assert (second.status, second.http_status, second.response_excerpt) == ("succeeded", 200, "then works")


@pytest.mark.parametrize(
    "code,retryable",
    [
        (404, False),
        (400, False),
        (401, False),
        (403, False),
        (410, False),
        (408, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
    ],
)
def test_status_classification(server, code, retryable):
    result = deliver(http(server.url(f"/status/{code}")), make_delivery(), LOCAL)
    assert result.status == "failed"
    assert result.retryable is retryable
    assert result.http_status == code
    assert result.error.startswith(f"HTTP {code}")


def test_success_codes_replace_the_default(server):
    assert deliver(http(server.url("/status/404"), success_codes=[404]), make_delivery(), LOCAL).succeeded
    result = deliver(http(server.url("/ok"), success_codes=[202, 204]), make_delivery(), LOCAL)
    assert (result.status, result.retryable, result.http_status) == ("failed", False, 200)
    assert "success codes" in result.error


def test_retry_after_in_seconds(server):
    result = deliver(http(server.url("/retry-seconds")), make_delivery(), LOCAL)
    assert (result.status, result.retryable, result.http_status) == ("failed", True, 429)
    assert result.retry_after_seconds == 7.0


def test_retry_after_as_http_date(server):
    result = deliver(http(server.url("/retry-date")), make_delivery(), LOCAL)
    assert (result.status, result.retryable, result.http_status) == ("failed", True, 503)
    assert 110 <= result.retry_after_seconds <= 121


def test_a_retry_after_past_any_date_is_ignored_and_the_status_decides(server):
    result = deliver(http(server.url("/retry-overflow")), make_delivery(), LOCAL)
    assert (result.status, result.retryable, result.http_status) == ("failed", False, 404), result
    assert result.retry_after_seconds is None and result.response_excerpt == "gone"


def test_an_error_after_a_followed_redirect_names_the_host_that_failed(server):
    port = _closed_port()
    target = http(server.url(f"/redirect/302?http://localhost:{port}/x"), follow_redirects=True)
    result = deliver(target, make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", True)
    assert result.error == "connection refused by localhost", result.error


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_parse_retry_after_forms():
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert parse_retry_after("120", now=now) == 120.0
    assert parse_retry_after(" 0 ", now=now) == 0.0
    assert parse_retry_after("Thu, 01 Jan 2026 00:01:30 GMT", now=now) == 90.0
    assert parse_retry_after("Wed, 31 Dec 2025 23:00:00 GMT", now=now) == 0.0  # in the past
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after("-5", now=now) is None
    assert parse_retry_after(None) is None


def test_slow_server_times_out_within_the_budget(server):
    started = time.monotonic()
    result = deliver(http(server.url("/slow"), timeout_seconds=0.8), make_delivery(), LOCAL)
    elapsed = time.monotonic() - started
    assert (result.status, result.retryable, result.http_status) == ("timed_out", True, None)
    assert 0.7 <= elapsed < 2.0, elapsed


def test_trickling_headers_are_cut_off_at_the_deadline(server):
    # Each byte arrives well within any per-read timeout: only a wall-clock deadline stops it.
    started = time.monotonic()
    result = deliver(http(server.url("/trickle-headers"), timeout_seconds=1), make_delivery(), LOCAL)
    elapsed = time.monotonic() - started
    assert (result.status, result.retryable) == ("timed_out", True)
    assert 0.9 <= elapsed < 2.2, elapsed


def test_trickling_body_is_cut_off_and_the_status_stands(server):
    started = time.monotonic()
    result = deliver(http(server.url("/trickle-body"), timeout_seconds=1), make_delivery(), LOCAL)
    elapsed = time.monotonic() - started
    assert elapsed < 2.2, elapsed
    # The answer (200) arrived in time; the excerpt is what trickled in before the deadline.
    assert (result.status, result.http_status) == ("succeeded", 200)
    assert 0 < len(result.response_excerpt) < 100 and set(result.response_excerpt) == {"a"}


def test_timeout_cap_bounds_the_delivery_further(server):
    started = time.monotonic()
    result = deliver(http(server.url("/slow"), timeout_seconds=30), make_delivery(), LOCAL, timeout_cap=0.5)
    assert result.status == "timed_out"
    assert time.monotonic() - started < 1.5
    assert deliver(http(server.url("/ok")), make_delivery(), LOCAL, timeout_cap=0).status == "timed_out"


def test_redirect_not_followed_by_default(server):
    result = deliver(http(server.url("/redirect/302?/ok")), make_delivery(), LOCAL)
    assert (result.status, result.retryable, result.http_status) == ("failed", False, 302)
    assert "redirect not followed" in result.error
    assert server.hits("/ok") == []


def test_redirect_followed_when_asked(server):
    delivery = make_delivery()
    result = deliver(http(server.url("/redirect/307?/ok"), body="payload", follow_redirects=True), delivery, LOCAL)
    assert (result.status, result.http_status, result.response_excerpt) == ("succeeded", 200, "ok")
    (final,) = server.hits("/ok")
    assert final["method"] == "POST" and final["body"] == b"payload"  # 307 keeps both
    assert final["headers"]["X-Scheduler-Execution-Id"] == delivery.execution_id


def test_303_becomes_a_get_without_body(server):
    result = deliver(
        http(server.url("/redirect/303?/ok"), body="payload", follow_redirects=True), make_delivery(), LOCAL
    )
    assert result.succeeded
    (final,) = server.hits("/ok")
    assert final["method"] == "GET" and final["body"] == b""


def test_redirect_to_another_host_drops_the_credentials(server):
    other = server.url("/echo", host="localhost")
    target = http(
        server.url(f"/redirect/307?{other}"),
        follow_redirects=True,
        auth={"type": "header", "name": "X-Api-Key", "value": "k-123"},
    )
    result = deliver(target, make_delivery(), LOCAL)
    assert result.succeeded
    assert server.hits("/redirect/307")[0]["headers"]["X-Api-Key"] == "k-123"
    assert "X-Api-Key" not in server.hits("/echo")[0]["headers"]


def test_a_manual_run_s_secret_headers_stay_with_the_origin_and_out_of_the_excerpt(server):
    # apply_overrides names a run's credential headers; a plain Authorization and a Cookie are
    # credentials by their nature: none of them follows a redirect to another host
    other = server.url("/echo", host="localhost")
    target = apply_overrides(
        http(server.url(f"/redirect/307?{other}"), follow_redirects=True, headers={"Cookie": "c=plain-cookie"}),
        {"headers": {"X-Team": "ops"}},
        {"X-Api-Token": "run-token-5551", "Authorization": "Bearer run-bearer-6661"},
    )
    result = deliver(target, make_delivery(), LOCAL)
    assert result.succeeded
    first = server.hits("/redirect/307")[0]["headers"]
    assert first["X-Api-Token"] == "run-token-5551" and first["Authorization"] == "Bearer run-bearer-6661"
    landed = server.hits("/echo")[0]["headers"]
    assert landed["X-Team"] == "ops"
    assert not {"X-Api-Token", "Authorization", "Cookie"} & set(landed)


def test_a_manual_run_s_secret_headers_are_scrubbed_from_the_excerpt(server):
    # the echo target answers the headers it got: the run's secrets are redacted from the excerpt
    target = apply_overrides(http(server.url("/echo")), {}, {"X-Api-Token": "run-token-7771"})
    result = deliver(target, make_delivery(), LOCAL)
    assert result.succeeded and "X-Api-Token" in result.response_excerpt
    assert "run-token-7771" not in result.response_excerpt


def test_a_redirect_to_a_location_that_is_not_a_url_says_so(server):
    result = deliver(http(server.url("/badlocation"), follow_redirects=True), make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", False)
    assert result.error.startswith("redirect refused: its Location is not a URL"), result.error


def test_redirect_loop_is_a_permanent_failure(server):
    result = deliver(http(server.url("/redirect/302?/redirect/302"), follow_redirects=True), make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", False)
    assert "redirects" in result.error


@pytest.mark.parametrize(
    "auth,header,expected",
    [
        (
            {"type": "basic", "username": "user", "password": "p@ss:wörd"},
            "Authorization",
            "Basic " + base64.b64encode("user:p@ss:wörd".encode()).decode(),
        ),
        ({"type": "bearer", "token": "tok-123"}, "Authorization", "Bearer tok-123"),
        ({"type": "header", "name": "X-Api-Key", "value": "key-456"}, "X-Api-Key", "key-456"),
    ],
    ids=["basic", "bearer", "header"],
)
def test_auth_headers(server, auth, header, expected):
    result = deliver(http(server.url("/ok"), auth=auth), make_delivery(), LOCAL)
    assert result.succeeded
    assert server.hits("/ok")[0]["headers"][header] == expected


def test_target_urls_are_prepared_once_and_never_one_with_credentials(server, monkeypatch):
    prepared: list[str] = []
    prepare = http_target._prepared_url
    monkeypatch.setattr(http_target, "_prepared_url", lambda url: prepared.append(url) or prepare(url))
    for _ in range(2):
        assert deliver(http(server.url("/ok")), make_delivery(), LOCAL).succeeded
    assert prepared == [server.url("/ok")] * 2 and prepare(server.url("/ok")) == server.url("/ok")
    # A target URL cannot carry credentials, but a followed redirect's may: prepared apart,
    # as requests does (they become the Authorization header), never kept in the cache.
    request = http_target._prepare("GET", "http://user:pw@example.com/x", http_target.Headers(), None)
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(b"user:pw").decode()
    assert request.url == "http://example.com/x"  # the credentials are not sent in the URL
    assert len(prepared) == 2


def test_secrets_are_scrubbed_from_the_excerpt(server):
    # An echo server copies the credentials into its answer: they must not reach the execution.
    result = deliver(
        http(server.url("/echo"), auth={"type": "bearer", "token": "very-secret-token"}), make_delivery(), LOCAL
    )
    assert result.succeeded
    assert "very-secret-token" not in result.response_excerpt
    assert '"Authorization": "***"' in result.response_excerpt


def test_excerpt_is_capped_and_the_body_is_not_read(server):
    started = time.monotonic()
    result = deliver(http(server.url("/big"), timeout_seconds=10), make_delivery(), LOCAL)
    assert time.monotonic() - started < 3
    assert result.succeeded
    assert len(result.response_excerpt.encode()) == 4096
    assert result.response_excerpt.startswith("0123456789abcdef")
    # The server could not push its 1 GiB: the client hung up after the excerpt.
    deadline = time.monotonic() + 5
    while server.sent_bytes == 0 and time.monotonic() < deadline:
        server.stop.wait(0.01)
    assert server.sent_bytes < 64 << 20


def test_excerpt_decodes_invalid_utf8_with_replacement(server):
    result = deliver(http(server.url("/bytes")), make_delivery(), LOCAL)
    assert result.succeeded
    assert result.response_excerpt.startswith("\ufffd\ufffd bad utf-8")


@pytest.mark.parametrize(
    "path,method",
    [("/ok", "POST"), ("/empty", "POST"), ("/ok", "HEAD"), ("/no-content", "POST")],
    ids=["body", "empty-body", "head", "no-content"],
)
def test_session_keeps_the_connection_alive_across_deliveries(server, path, method):
    # Reading the answer to its end (even an empty one) is what hands the connection back to the
    # pool: skipping that read for an empty body opened a connection per delivery.
    for _ in range(3):
        assert deliver(http(server.url(path), method=method), make_delivery(), LOCAL).succeeded
    first, second, third = server.hits(path)
    assert first["client"] == second["client"] == third["client"]  # same source port: one TCP connection


def test_equal_policies_share_kept_alive_connections(server):
    assert deliver(http(server.url("/ok")), make_delivery(), LOCAL).succeeded
    assert deliver(http(server.url("/ok")), make_delivery(), TargetPolicy(allow_private=True)).succeeded
    first, second = server.hits("/ok")
    assert first["client"] == second["client"]


def test_connection_refused_is_retryable():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    result = deliver(http(f"http://127.0.0.1:{port}/"), make_delivery(), LOCAL)
    assert (result.status, result.retryable, result.http_status) == ("failed", True, None)
    assert "refused" in result.error


@pytest.mark.parametrize(
    "target,message",
    [
        ({"type": "http"}, "url is required"),
        ({"type": "http", "url": "ftp://example.com/"}, "scheme"),
        ({"type": "http", "url": "http://user:pw@example.com/"}, "credentials"),
        ({"type": "http", "url": "http://example.com/", "method": "TRACE"}, "method"),
        ({"type": "http", "url": "http://example.com/", "auth": {"type": "digest"}}, "auth"),
        ({"type": "http", "url": "http://example.com/", "timeout_seconds": 0}, "timeout_seconds"),
        ({"type": "http", "url": "http://example.com/", "success_codes": [2000]}, "success_codes"),
        ({"type": "http", "url": "http://example.com/", "headers": {"X-Bad": "a\r\nInjected: 1"}}, "invalid"),
        ({"type": "smtp"}, "unknown type"),
        ("not a dict", "invalid target"),
    ],
)
def test_invalid_targets_fail_permanently(target, message):
    result = deliver(target, make_delivery(), TargetPolicy())
    assert (result.status, result.retryable) == ("failed", False)
    assert message in result.error
    assert "pw" not in result.error


# ------------------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA and a server certificate for DNS:localhost only (no IP address in it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "scheduler test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "server.pem").write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return directory


@pytest.fixture
def tls_server(certificates):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates / "server.pem")
    with Server(tls_context=context) as srv:
        context.sni_callback = lambda sslsock, name, ctx: srv.sni.append(name)
        yield srv


def test_tls_is_verified_against_the_trust_store(tls_server, monkeypatch):
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    result = deliver(http(tls_server.url("/ok", host="localhost")), make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", True)
    assert "certificate" in result.error.lower()
    assert tls_server.hits("/ok") == []


def test_tls_checks_the_url_host_name_while_connecting_to_the_validated_ip(tls_server, certificates, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificates / "ca.pem"))
    # localhost -> 127.0.0.1: the socket goes to the IP, SNI and the check use "localhost".
    result = deliver(http(tls_server.url("/ok", host="localhost")), make_delivery(), LOCAL)
    assert result.succeeded, result.error
    assert "localhost" in tls_server.sni
    # The certificate does not name 127.0.0.1: a URL with the IP must fail the host check.
    result = deliver(http(tls_server.url("/ok", host="127.0.0.1")), make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", True)
    assert "127.0.0.1" in result.error and "certificate" in result.error.lower()


def test_tls_connections_are_kept_alive_too(tls_server, certificates, monkeypatch):
    # What TLS itself sends after the handshake (TLS 1.3 session tickets) is no byte after an
    # answer: the connection is kept and reused.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificates / "ca.pem"))
    for _ in range(3):
        result = deliver(http(tls_server.url("/ok", host="localhost")), make_delivery(), LOCAL)
        assert result.succeeded, result.error
    first, second, third = tls_server.hits("/ok")
    assert first["client"] == second["client"] == third["client"]
