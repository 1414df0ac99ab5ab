"""Attacks that held before issue 13, kept as a suite so they keep holding: signatures
(unsigned, expired, tampered, replayed after five minutes), tenant isolation on every route,
forged cursors, and the SSRF guard's address forms through `scheduler local --guard-targets`."""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

import pytest

from tests.security.conftest import spec, unique

# -- signatures ---------------------------------------------------------------------------------


def test_unsigned_request_is_refused(alice):
    answer = alice.api.raw("GET", "/v1/jobs", [("Host", f"127.0.0.1:{alice.api.port}")])
    assert answer.status == 403 and answer.error()["code"] == "forbidden"


def test_expired_signature_is_refused(alice):
    old = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=6)
    answer = alice.call("GET", "/v1/jobs", at=old)
    assert answer.status == 403 and "away from the server's clock" in answer.error()["message"]


def test_request_replayed_after_five_minutes_is_refused(alice):
    name = unique("replay")
    body = json.dumps(spec(name)).encode()
    signed = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5, seconds=5)
    headers = alice.signed_headers("POST", "/v1/jobs", body, at=signed)  # captured 5 min ago
    answer = alice.api.raw("POST", "/v1/jobs", headers, body)
    assert answer.status == 403
    assert name not in alice.names()


@pytest.mark.parametrize("part", ["body", "path", "query", "header"])
def test_tampered_request_is_refused(alice, part):
    name = unique("tamper")
    body = json.dumps(spec(name)).encode()
    headers = alice.signed_headers("POST", "/v1/jobs", body)
    path = "/v1/jobs"
    if part == "body":
        body = body.replace(name.encode(), name.encode()[:-1] + b"X")
    elif part == "path":
        path = "/v1/jobs/"
    elif part == "query":
        path = "/v1/jobs?limit=1"
    else:
        headers = [(k, v + "x" if k.lower() == "x-amz-date" else v) for k, v in headers]
    answer = alice.api.raw("POST", path, headers, body)
    assert answer.status == 403, answer.text
    assert name not in alice.names()


# -- tenant isolation --------------------------------------------------------------------------


def test_another_tenants_job_is_404_on_every_route(alice, bob):
    job = alice.create(spec(unique("mine")))
    path = f"/v1/jobs/{job['id']}"
    for method, suffix, body in [
        ("GET", "", None),
        ("PUT", "", spec(job["name"])),
        ("PATCH", "", {"name": "stolen"}),
        ("DELETE", "", None),
        ("POST", "/pause", None),
        ("POST", "/resume", None),
        ("POST", "/run", None),
        ("GET", "/executions", None),
    ]:
        answer = bob.call(method, path + suffix, body)
        assert answer.status == 404, (method, suffix, answer.text)
        assert answer.error()["code"] == "not_found"
    assert job["name"] not in bob.names()
    after = alice.call("GET", path).json
    assert (after["version"], after["name"], after["state"]) == (job["version"], job["name"], "active")


def test_cursors_cannot_be_forged_or_carried_to_another_tenant(alice, bob):
    prefix = unique("page")
    for i in range(3):
        alice.create(spec(f"{prefix}-{i}"))
    first = alice.call("GET", f"/v1/jobs?name_prefix={prefix}&limit=1").json
    cursor = first["next_cursor"]
    assert cursor
    forged = base64.urlsafe_b64encode(json.dumps({"after_name": ""}).encode()).decode().rstrip("=")
    flipped = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    for who, bad in [(bob, cursor), (alice, forged), (alice, flipped), (alice, "%00"), (alice, "a" * 300)]:
        answer = who.call("GET", f"/v1/jobs?name_prefix={prefix}&limit=1&cursor={quote(bad, safe='')}")
        assert answer.status == 400, answer.text
        assert answer.fields() == ["cursor"]
    # A listing cursor is not an executions cursor.
    job = alice.create(spec(unique("execs")))
    answer = alice.call("GET", f"/v1/jobs/{job['id']}/executions?cursor={quote(cursor, safe='')}")
    assert answer.status == 400 and answer.fields() == ["cursor"]


# -- SSRF, through scheduler local --guard-targets -------------------------------------------


class _Hits(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.hits.append(self.path)
        if self.path.startswith("/redirect"):
            self.send_response(307)
            self.send_header("Location", unquote(self.path.split("?", 1)[1]))
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def target() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hits)
    server.daemon_threads, server.lock, server.hits = True, threading.Lock(), []
    server.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "host, address, reason",
    [
        ("169.254.169.254", "169.254.169.254", "link-local"),  # the instance metadata service
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1", "loopback"),  # IPv4-mapped IPv6
        ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254", "link-local"),
        ("2130706433", "127.0.0.1", "loopback"),  # decimal
        ("0x7f000001", "127.0.0.1", "loopback"),  # hexadecimal
        ("0177.0.0.1", "127.0.0.1", "loopback"),  # octal
        ("[64:ff9b::7f00:1]", "64:ff9b::7f00:1", "loopback"),  # NAT64 around 127.0.0.1
        ("10.0.0.1", "10.0.0.1", "private"),
        ("127.0.0.1", "127.0.0.1", "loopback"),
    ],
)
def test_private_address_forms_are_refused(guarded, target, host, address, reason):
    execution = guarded.run_once(
        spec(unique("ssrf"), {"type": "http", "url": f"http://{host}:{target.port}/hook", "timeout_seconds": 5})
    )
    assert (execution["status"], execution["error"]) == (
        "failed",
        f"target address {address} is not allowed ({reason})",
    )
    assert target.hits == []


def test_a_redirect_to_a_private_address_is_refused(guarded, target):
    # "localhost" is allow-listed by name on this server; the redirect's 127.0.0.1 is not.
    url = f"http://localhost:{target.port}/redirect?{quote(f'http://127.0.0.1:{target.port}/final', safe='')}"
    execution = guarded.run_once(spec(unique("redir"), {"type": "http", "url": url, "follow_redirects": True}))
    assert execution["error"] == "target address 127.0.0.1 is not allowed (loopback)"
    assert [hit.split("?")[0] for hit in target.hits] == ["/redirect"]


def test_dns_answers_that_change_between_check_and_connect(guarded, target, monkeypatch):
    """The name answers a public address, then loopback: the delivery connects to the address it
    checked (never to loopback), and a loopback answer in use is refused."""
    public = "93.184.215.14"
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect
    lookups: list[str] = []
    connects: list[tuple] = []

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.test":
            lookups.append(host)
            address = public if len(lookups) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    def connect(sock, address):
        if isinstance(address, tuple) and address[0] == public:
            connects.append(address)
            raise ConnectionRefusedError(111, "Connection refused")  # no internet in tests
        return real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(socket.socket, "connect", connect)
    url = f"http://rebind.test:{target.port}/hook"
    first = guarded.run_once(spec(unique("rebind"), {"type": "http", "url": url}, retry={"max_attempts": 1}))
    assert first["status"] == "failed" and "refused" in first["error"]
    assert connects == [(public, target.port)]
    second = guarded.run_once(spec(unique("rebind"), {"type": "http", "url": url}, retry={"max_attempts": 1}))
    assert second["error"] == "target address 127.0.0.1 is not allowed (loopback)"
    assert target.hits == []
