"""The SSRF guard with real name resolution and real loopback servers (IPv4 and IPv6)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from scheduler.targets import amqp as amqp_target
from scheduler.targets import ssrf
from scheduler.targets.results import Delivery, TargetPolicy
from scheduler.targets.router import deliver

STRICT = TargetPolicy()
LOCAL = TargetPolicy(allow_private=True)


def make_delivery() -> Delivery:
    return Delivery(str(uuid.uuid4()), str(uuid.uuid4()), dt.datetime(2026, 1, 1, tzinfo=dt.UTC), 1)


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.hits.append((self.path, self.headers.get("Host")))
        if self.path.startswith("/redirect"):
            location = unquote(self.path.split("?", 1)[1])
            self.send_response(307)
            self.send_header("Location", location)
        else:
            self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, family: int):
        self.address_family = family
        self.lock = threading.Lock()
        self.hits: list[tuple[str, str]] = []
        super().__init__((host, 0), Recorder)
        self.port = self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()


@pytest.fixture(scope="module")
def v4():
    server = Server("127.0.0.1", socket.AF_INET)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def v6():
    try:
        server = Server("::1", socket.AF_INET6)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine: {exc}")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def clear_hits(v4):
    with v4.lock:
        v4.hits.clear()


def post(url: str, policy: TargetPolicy, **fields):
    return deliver({"type": "http", "url": url, "timeout_seconds": 5, **fields}, make_delivery(), policy)


# ---------------------------------------------------------------- refused without local mode


@pytest.mark.parametrize(
    "host,address,reason",
    [
        ("localhost", "127.0.0.1", "loopback"),
        ("127.0.0.1", "127.0.0.1", "loopback"),
        ("[::1]", "::1", "loopback"),
        ("169.254.169.254", "169.254.169.254", "link-local"),
        ("10.1.2.3", "10.1.2.3", "private"),
        ("192.168.1.10", "192.168.1.10", "private"),
        ("172.16.0.1", "172.16.0.1", "private"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1", "loopback"),
        ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254", "link-local"),
        ("0.0.0.0", "0.0.0.0", "unspecified"),
        ("[::]", "::", "unspecified"),
        ("2130706433", "127.0.0.1", "loopback"),  # 127.0.0.1 as one decimal number
        ("0x7f.1", "127.0.0.1", "loopback"),
        ("[fe80::1]", "fe80::1", "link-local"),
        ("[fd12:3456::1]", "fd12:3456::1", "private"),
        ("224.0.0.1", "224.0.0.1", "multicast"),
        ("[ff02::1]", "ff02::1", "multicast"),
        ("100.64.0.1", "100.64.0.1", "reserved"),
        ("240.0.0.1", "240.0.0.1", "reserved"),
        ("[2002:7f00:1::1]", "2002:7f00:1::1", "loopback"),  # 6to4 around 127.0.0.1
    ],
)
def test_refused_without_local_mode(v4, host, address, reason):
    result = post(f"http://{host}:{v4.port}/hook", STRICT)
    assert (result.status, result.retryable) == ("failed", False)
    assert result.error == f"target address {address} is not allowed ({reason})"
    assert v4.hits == []


def test_https_targets_are_guarded_too(v4):
    result = post(f"https://localhost:{v4.port}/hook", STRICT)
    assert result.error == "target address 127.0.0.1 is not allowed (loopback)"


# ------------------------------------------------------------------------------ allowed


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::ffff:127.0.0.1]"])
def test_allowed_in_local_mode_ipv4(v4, host):
    result = post(f"http://{host}:{v4.port}/hook", LOCAL)
    assert result.succeeded, result.error
    assert v4.hits == [("/hook", f"{host}:{v4.port}")]


def test_allowed_in_local_mode_ipv6(v6):
    result = post(f"http://[::1]:{v6.port}/hook", LOCAL)
    assert result.succeeded, result.error


def test_allow_list_host_name(v4):
    policy = TargetPolicy(allow_list=("LOCALHOST",))
    assert post(f"http://localhost:{v4.port}/hook", policy).succeeded
    # The name is exempt, not its address.
    refused = post(f"http://127.0.0.1:{v4.port}/hook", policy)
    assert refused.error == "target address 127.0.0.1 is not allowed (loopback)"


def test_allow_list_cidr(v4, v6):
    policy = TargetPolicy(allow_list=("127.0.0.0/8",))
    assert post(f"http://127.0.0.1:{v4.port}/hook", policy).succeeded
    assert post(f"http://localhost:{v4.port}/hook", policy).succeeded
    assert post(f"http://[::ffff:127.0.0.1]:{v4.port}/hook", policy).succeeded  # mapped: same address
    assert post(f"http://[::1]:{v6.port}/hook", policy).error == "target address ::1 is not allowed (loopback)"
    assert post(f"http://[::1]:{v6.port}/hook", TargetPolicy(allow_list=("::1",))).succeeded


def test_policies_do_not_share_connections(v4):
    # A keep-alive connection opened in local mode must not serve a strict delivery.
    assert post(f"http://127.0.0.1:{v4.port}/hook", LOCAL).succeeded
    assert post(f"http://127.0.0.1:{v4.port}/hook", STRICT).error.endswith("(loopback)")
    assert len(v4.hits) == 1


def test_every_redirect_hop_is_guarded(v4, v6):
    policy = TargetPolicy(allow_list=("127.0.0.1/32",))
    ok = post(f"http://127.0.0.1:{v4.port}/redirect?http://localhost:{v4.port}/final", policy, follow_redirects=True)
    assert ok.succeeded, ok.error
    v6_hits_before = len(v6.hits)
    refused = post(f"http://127.0.0.1:{v4.port}/redirect?http://[::1]:{v6.port}/final", policy, follow_redirects=True)
    assert (refused.status, refused.retryable) == ("failed", False)
    assert refused.error == "target address ::1 is not allowed (loopback)"
    assert len(v6.hits) == v6_hits_before


# ---------------------------------------------------------------------------- DNS rebinding


def test_dns_rebinding_cannot_reach_loopback(v4, monkeypatch):
    """The name answers a public address first and 127.0.0.1 afterwards: the delivery is
    checked on the first answer and connects to that very address, never to loopback."""
    public = "93.184.215.14"
    real_getaddrinfo = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding_getaddrinfo(host, port, *args, **kwargs):
        if host == "rebind.example":
            lookups.append(host)
            address = public if len(lookups) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    connects: list[tuple] = []
    real_connect = socket.socket.connect

    def recording_connect(sock, address):
        connects.append(address)
        if address[0] == public:  # no internet in tests: the public host refuses
            raise ConnectionRefusedError(111, "Connection refused")
        return real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", recording_connect)

    result = post(f"http://rebind.example:{v4.port}/hook", STRICT)

    assert lookups == ["rebind.example"]  # resolved once
    assert connects == [(public, v4.port)]  # connected to the validated address only
    assert v4.hits == []
    assert (result.status, result.retryable) == ("failed", True) and "refused" in result.error

    # The second answer (loopback) is refused when it is the one being used.
    again = post(f"http://rebind.example:{v4.port}/hook", STRICT)
    assert again.error == "target address 127.0.0.1 is not allowed (loopback)"
    assert v4.hits == []


def test_a_name_with_one_private_address_is_refused(v4, monkeypatch):
    real_getaddrinfo = socket.getaddrinfo

    def mixed(host, port, *args, **kwargs):
        if host == "mixed.example":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", port)),
            ]
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    result = post("http://mixed.example/hook", STRICT)
    assert result.error == "target address 10.0.0.1 is not allowed (private)"


# ------------------------------------------------------------------------------------- AMQP


def test_amqp_broker_named_by_a_job_is_guarded():
    target = {
        "type": "amqp",
        "url": "amqp://guest:guest@127.0.0.1:5672/",
        "exchange": "",
        "routing_key": "q",
        "body": "x",
    }
    result = deliver(target, make_delivery(), STRICT)
    assert (result.status, result.retryable) == ("failed", False)
    assert result.error == "target address 127.0.0.1 is not allowed (loopback)"
    target["url"] = "amqps://u:p@169.254.169.254/"
    assert (
        deliver(target, make_delivery(), STRICT).error == "target address 169.254.169.254 is not allowed (link-local)"
    )


@pytest.mark.amqp
def test_amqp_default_broker_is_trusted_and_pooled_connections_recheck_the_policy(amqp_url, amqp_queue):
    exchange, _, routing_key = amqp_queue
    amqp_target.close_all()
    try:
        body = {"type": "amqp", "exchange": exchange, "routing_key": routing_key, "body": "x"}
        # The deployment's broker (loopback here) is not subject to the guard.
        assert deliver(body, make_delivery(), TargetPolicy(default_broker_url=amqp_url)).succeeded
        # The same broker named by a job: allowed in local mode, and the connection is pooled ...
        assert deliver({**body, "url": amqp_url}, make_delivery(), LOCAL).succeeded
        assert amqp_target.idle_connections(amqp_url)
        # ... but a strict delivery does not reuse it: it is refused.
        refused = deliver({**body, "url": amqp_url}, make_delivery(), STRICT)
        assert (refused.status, refused.retryable) == ("failed", False)
        assert refused.error.endswith("is not allowed (loopback)")
        assert deliver({**body, "url": amqp_url}, make_delivery(), TargetPolicy(allow_list=("127.0.0.1",))).succeeded
    finally:
        amqp_target.close_all()


# ------------------------------------------------------------------------- pure functions


@pytest.mark.parametrize(
    "url,problem",
    [
        ("https://example.com/hook?x=1", None),
        ("http://example.com:8080/", None),
        ("http://[2001:db8::1]/", None),
        ("http://localhost/", None),  # syntax only: addresses are judged at delivery time
        ("http://bücher.example/", None),
        ("", "url is required"),
        (None, "url is required"),
        ("ftp://example.com/", "url scheme must be http or https"),
        ("file:///etc/passwd", "url scheme must be http or https"),
        ("example.com/hook", "url scheme must be http or https"),
        ("http:///path", "url has no host"),
        ("http://user:pass@example.com/", "url must not contain credentials (use target.auth)"),
        ("http://user@example.com/", "url must not contain credentials (use target.auth)"),
        ("http://example.com:99999/", "url is not valid"),
        ("http://exa mple.com/", "url must not contain blanks or control characters"),
        ("http://example.com/\r\nX: y", "url must not contain blanks or control characters"),
        ("http://exa$mple.com/", "url host is not a valid host name"),
        ("http://" + "a" * 2100 + ".com/", "url is longer than 2048 characters"),
    ],
)
def test_check_url_syntax(url, problem):
    found = ssrf.check_url_syntax(url)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem)


def test_check_broker_url_syntax():
    assert ssrf.check_broker_url_syntax("amqps://u:p@b-1234.mq.eu-west-1.amazonaws.com:5671/vh") is None
    assert ssrf.check_broker_url_syntax("amqp://localhost") is None
    assert ssrf.check_broker_url_syntax("http://localhost") == "url scheme must be amqp or amqps"
    problem = ssrf.check_broker_url_syntax("amqp://u:secret@host:port/")
    assert problem and "secret" not in problem


@pytest.mark.parametrize(
    "address,reason",
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),  # NAT64 of a public address
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of the metadata service
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("169.254.0.1", "link-local"),
        ("fe80::abcd", "link-local"),
        ("10.255.255.255", "private"),
        ("fc00::1", "private"),
        ("fec0::1", "private"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "reserved"),
        ("198.18.0.1", "private"),
    ],
)
def test_classify(address, reason):
    assert ssrf.classify(address) == reason
    assert ssrf.classify(ipaddress.ip_address(address)) == reason


def test_allow_list_entries():
    policy = TargetPolicy(allow_list=("hooks.internal", "*.corp.example", "10.20.0.0/16", "fd00::/8", " "))
    assert ssrf.host_allow_listed("hooks.internal", policy)
    assert ssrf.host_allow_listed("HOOKS.internal.", policy)
    assert ssrf.host_allow_listed("a.b.corp.example", policy)
    assert not ssrf.host_allow_listed("corp.example", policy)
    assert not ssrf.host_allow_listed("evilcorp.example", policy)
    assert not ssrf.host_allow_listed("hooks.internal.evil.com", policy)
    assert ssrf.address_problem("10.20.3.4", policy) is None
    assert ssrf.address_problem("10.21.3.4", policy) == "private"
    assert ssrf.address_problem("::ffff:10.20.3.4", policy) is None
    assert ssrf.address_problem("fd00::5", policy) is None
    assert ssrf.address_problem("8.8.8.8", STRICT) is None
    assert ssrf.address_problem("127.0.0.1", LOCAL) is None
