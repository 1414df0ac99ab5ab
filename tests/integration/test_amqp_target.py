"""AMQP target against a real RabbitMQ (skipped loudly without one; a failure when CI=true)."""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest

from scheduler.targets import amqp as amqp_target
from scheduler.targets.results import Delivery, TargetPolicy
from scheduler.targets.router import deliver

pytestmark = pytest.mark.amqp

LOCAL = TargetPolicy(allow_private=True)
SCHEDULED = dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)


def make_delivery(attempt: int = 1) -> Delivery:
    return Delivery(job_id=str(uuid.uuid4()), execution_id=str(uuid.uuid4()), scheduled_at=SCHEDULED, attempt=attempt)


def with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    credentials = parts.netloc.rsplit("@", 1)[0]
    return parts._replace(netloc=f"{credentials}@127.0.0.1:{port}").geturl()


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture(autouse=True)
def fresh_pool():
    amqp_target.close_all()
    yield
    amqp_target.close_all()


def get_one(channel, queue):
    method, properties, body = channel.basic_get(queue, auto_ack=True)
    assert method is not None, "no message in the queue"
    return properties, body


# ------------------------------------------------------------------------------- publishing


def test_publish_is_confirmed_persistent_and_carries_the_delivery_identity(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, routing_key = amqp_queue
    delivery = make_delivery(attempt=2)
    target = {
        "type": "amqp",
        "url": amqp_url,
        "exchange": exchange,
        "routing_key": routing_key,
        "body": '{"job": "{{job_id}}", "try": {{ attempt }}}',
        "body_encoding": "utf-8",
        "headers": {"X-Custom": "1", "x-scheduler-job-id": "forged", "count": 3},
        "content_type": "application/json",
    }
    result = deliver(target, delivery, LOCAL)
    assert (result.status, result.retryable, result.error) == ("succeeded", False, None)
    properties, body = get_one(amqp_admin, queue)
    assert body == f'{{"job": "{delivery.job_id}", "try": 2}}'.encode()
    assert properties.message_id == delivery.idempotency_key == f"{delivery.job_id}:2026-12-01T02:00:00Z"
    assert properties.delivery_mode == 2
    assert properties.content_type == "application/json"
    headers = properties.headers
    assert headers["Idempotency-Key"] == delivery.idempotency_key
    assert headers["X-Scheduler-Job-Id"] == delivery.job_id
    assert headers["X-Scheduler-Execution-Id"] == delivery.execution_id
    assert headers["X-Scheduler-Scheduled-At"] == "2026-12-01T02:00:00Z"
    assert headers["X-Scheduler-Attempt"] == "2"
    assert headers["X-Custom"] == "1" and headers["count"] == 3
    assert "x-scheduler-job-id" not in headers


def test_base64_body_is_decoded_and_not_rendered(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, routing_key = amqp_queue
    raw = b"\x00\x01\xff{{job_id}}"
    target = {
        "type": "amqp",
        "url": amqp_url,
        "exchange": exchange,
        "routing_key": routing_key,
        "body": base64.b64encode(raw).decode(),
        "body_encoding": "base64",
    }
    assert deliver(target, make_delivery(), LOCAL).succeeded
    properties, body = get_one(amqp_admin, queue)
    assert body == raw
    assert properties.content_type is None


def test_default_exchange_and_default_broker(amqp_url, amqp_queue, amqp_admin):
    _, queue, _ = amqp_queue
    policy = TargetPolicy(default_broker_url=amqp_url)  # strict policy: the default broker is trusted
    result = deliver({"type": "amqp", "exchange": "", "routing_key": queue, "body": "hi"}, make_delivery(), policy)
    assert result.succeeded, result.error
    assert get_one(amqp_admin, queue)[1] == b"hi"


def test_the_default_broker_is_open_only_to_the_owners_listed(amqp_url, amqp_queue, amqp_admin):
    """One broker login serves every job that names no broker: a deployment lists who may use
    it (broker_owners); another owner's delivery fails for good, before any connection."""
    _, queue, _ = amqp_queue
    policy = TargetPolicy(default_broker_url=amqp_url, default_broker_owners=("arn:*:*::111111111111:*",))
    target = {"type": "amqp", "exchange": "", "routing_key": queue, "body": "hi"}
    alice, bob = (
        Delivery(str(uuid.uuid4()), str(uuid.uuid4()), SCHEDULED, 1, owner=f"arn:aws:iam::{account}:user/{name}")
        for account, name in (("111111111111", "alice"), ("222222222222", "bob"))
    )
    assert deliver(target, alice, policy).succeeded
    refused = deliver(target, bob, policy)
    assert (refused.status, refused.retryable) == ("failed", False) and "not open" in refused.error
    assert get_one(amqp_admin, queue)[1] == b"hi" and amqp_admin.basic_get(queue, auto_ack=True)[0] is None
    # A broker the job names itself is its own business (its own credentials; loopback allowed here).
    named = TargetPolicy(allow_private=True, default_broker_url=amqp_url, default_broker_owners=("arn:none",))
    assert deliver({**target, "url": amqp_url + "?heartbeat=30"}, bob, named).succeeded
    assert get_one(amqp_admin, queue)[1] == b"hi"


def test_unroutable_message_is_a_retryable_failure(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, _ = amqp_queue
    target = {"type": "amqp", "url": amqp_url, "exchange": exchange, "routing_key": "nobody-listens", "body": "x"}
    result = deliver(target, make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", True)
    assert "unroutable" in result.error and exchange in result.error
    assert amqp_admin.basic_get(queue, auto_ack=True)[0] is None


def test_a_message_that_cannot_be_encoded_is_a_permanent_failure(amqp_url, amqp_queue, amqp_admin):
    """A header name over AMQP's 255 bytes (a target stored before the API refused it): no
    attempt can put it in a frame, so none is retried, and nothing reaches the queue."""
    exchange, queue, routing_key = amqp_queue
    target = {"type": "amqp", "url": amqp_url, "exchange": exchange, "routing_key": routing_key, "body": "x"}
    result = deliver({**target, "headers": {"x" * 256: "v"}}, make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", False), result
    assert result.error == "the message cannot be encoded for AMQP: ShortStringTooLong"
    assert amqp_admin.basic_get(queue, auto_ack=True)[0] is None
    assert deliver(target, make_delivery(), LOCAL).succeeded  # the next delivery goes through


def test_unknown_exchange_is_a_permanent_failure_and_the_connection_survives(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, routing_key = amqp_queue
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    result = deliver(
        {"type": "amqp", "url": amqp_url, "exchange": missing, "routing_key": "k", "body": "x"}, make_delivery(), LOCAL
    )
    assert (result.status, result.retryable) == ("failed", False)
    assert result.error == f"exchange '{missing}' does not exist"
    (pooled,) = amqp_target.idle_connections(amqp_url)
    # The broker closed the channel only: the next delivery reuses the connection.
    ok = deliver(
        {"type": "amqp", "url": amqp_url, "exchange": exchange, "routing_key": routing_key, "body": "y"},
        make_delivery(),
        LOCAL,
    )
    assert ok.succeeded, ok.error
    assert amqp_target.idle_connections(amqp_url) == [pooled]
    assert get_one(amqp_admin, queue)[1] == b"y"


def test_wrong_credentials_give_a_clear_error_without_the_password(amqp_url):
    parts = urlsplit(amqp_url)
    password = "Wr0ng-Passw0rd-" + uuid.uuid4().hex[:6]
    url = parts._replace(netloc=f"{parts.username}:{password}@{parts.hostname}:{parts.port or 5672}").geturl()
    result = deliver(
        {"type": "amqp", "url": url, "exchange": "", "routing_key": "q", "body": "x"}, make_delivery(), LOCAL
    )
    assert (result.status, result.retryable) == ("failed", True)
    assert "refused the credentials" in result.error and parts.username in result.error
    assert password not in result.error


def test_broker_unreachable_is_retryable(amqp_url):
    url = with_port(amqp_url, closed_port())
    started = time.monotonic()
    result = deliver(
        {"type": "amqp", "url": url, "exchange": "", "routing_key": "q", "body": "x"}, make_delivery(), LOCAL
    )
    assert (result.status, result.retryable) == ("failed", True)
    assert "connection refused" in result.error
    assert "guest@" not in result.error
    assert time.monotonic() - started < 3


def test_silent_broker_times_out_within_the_budget():
    # A TCP peer that accepts and never speaks AMQP: the handshake is bounded by the budget.
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        url = f"amqp://guest:guest@127.0.0.1:{listener.getsockname()[1]}/"
        started = time.monotonic()
        result = deliver(
            {"type": "amqp", "url": url, "exchange": "", "routing_key": "q", "body": "x", "timeout_seconds": 0.6},
            make_delivery(),
            LOCAL,
        )
        elapsed = time.monotonic() - started
    finally:
        listener.close()
    assert (result.status, result.retryable) == ("timed_out", True), result
    assert "nothing was published" in result.error, result.error  # no confirmation was awaited
    assert elapsed < 1.6, elapsed


@pytest.mark.parametrize(
    "target,message",
    [
        ({"exchange": "", "routing_key": "q", "body": "x"}, "no broker url"),
        ({"url": "http://guest:s3cr3t-pw@localhost/", "routing_key": "q"}, "amqp or amqps"),
        ({"url": "amqp://guest:s3cr3t-pw@localhost:notaport/", "routing_key": "q"}, "not valid"),
        ({"url": "amqp://localhost/", "routing_key": "q", "body": "!!", "body_encoding": "base64"}, "base64"),
        ({"url": "amqp://localhost/", "routing_key": "q", "body": "x", "body_encoding": "latin-1"}, "body_encoding"),
        ({"url": "amqp://localhost/", "routing_key": "q", "headers": {"x": object()}}, "header values"),
    ],
)
def test_invalid_targets_fail_permanently(target, message):
    result = deliver({"type": "amqp", **target}, make_delivery(), LOCAL)
    assert (result.status, result.retryable) == ("failed", False)
    assert message in result.error
    assert "s3cr3t-pw" not in result.error


# ------------------------------------------------------------------------- connection pool


def publish(url, exchange, routing_key, body="x", **extra):
    return deliver(
        {"type": "amqp", "url": url, "exchange": exchange, "routing_key": routing_key, "body": body, **extra},
        make_delivery(),
        LOCAL,
    )


def test_connection_is_reused_across_deliveries(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, routing_key = amqp_queue
    assert publish(amqp_url, exchange, routing_key, "1").succeeded
    (first,) = amqp_target.idle_connections(amqp_url)
    local_port = first.socket().getsockname()[1]
    assert publish(amqp_url, exchange, routing_key, "2").succeeded
    (second,) = amqp_target.idle_connections(amqp_url)
    assert second is first and second.socket().getsockname()[1] == local_port
    assert [get_one(amqp_admin, queue)[1] for _ in range(2)] == [b"1", b"2"]


def test_connection_closed_while_pooled_is_replaced(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, routing_key = amqp_queue
    assert publish(amqp_url, exchange, routing_key, "1").succeeded
    (first,) = amqp_target.idle_connections(amqp_url)
    first.connection.close()
    assert publish(amqp_url, exchange, routing_key, "2").succeeded
    (second,) = amqp_target.idle_connections(amqp_url)
    assert second is not first and second.connection.is_open


def test_connection_dropped_under_the_pool_is_replaced(amqp_url, amqp_queue, amqp_admin):
    # The TCP connection dies without pika knowing (broker restart, idle timeout in a NAT).
    exchange, queue, routing_key = amqp_queue
    assert publish(amqp_url, exchange, routing_key, "1").succeeded
    (first,) = amqp_target.idle_connections(amqp_url)
    socket.socket.shutdown(first.socket(), socket.SHUT_RDWR)
    assert publish(amqp_url, exchange, routing_key, "2").succeeded
    (second,) = amqp_target.idle_connections(amqp_url)
    assert second is not first
    assert [get_one(amqp_admin, queue)[1] for _ in range(2)] == [b"1", b"2"]


def test_publish_on_a_dead_connection_is_retried_once_on_a_fresh_one(amqp_url, amqp_queue, amqp_admin, monkeypatch):
    exchange, queue, routing_key = amqp_queue
    assert publish(amqp_url, exchange, routing_key, "1").succeeded
    (first,) = amqp_target.idle_connections(amqp_url)
    socket.socket.shutdown(first.socket(), socket.SHUT_RDWR)
    # Make the pre-use check miss it, so that the publish itself fails.
    monkeypatch.setattr(amqp_target.PooledConnection, "alive", lambda self: True)
    assert publish(amqp_url, exchange, routing_key, "2").succeeded
    (second,) = amqp_target.idle_connections(amqp_url)
    assert second is not first
    assert [get_one(amqp_admin, queue)[1] for _ in range(2)] == [b"1", b"2"]
    assert amqp_admin.basic_get(queue, auto_ack=True)[0] is None


def test_concurrent_deliveries_from_several_threads(amqp_url, amqp_queue, amqp_admin):
    exchange, queue, routing_key = amqp_queue
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: publish(amqp_url, exchange, routing_key, str(i)), range(30)))
    assert all(r.succeeded for r in results), [r.error for r in results if not r.succeeded]
    assert 1 <= len(amqp_target.idle_connections(amqp_url)) <= amqp_target.MAX_IDLE_PER_BROKER
    bodies = sorted(int(get_one(amqp_admin, queue)[1]) for _ in range(30))
    assert bodies == list(range(30))


class FreezableProxy:
    """A TCP relay to the broker that can stop relaying (a broker that hangs mid-connection)."""

    def __init__(self, port: int):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream_port = port
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source, sink):
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            self.flowing.wait()
            if not data or self.closed.is_set():
                return
            try:
                sink.sendall(data)
            except OSError:
                return

    def close(self):
        self.closed.set()
        self.flowing.set()
        self.listener.close()
        for sock in self.sockets:
            try:
                sock.close()
            except OSError:
                pass


def test_publish_waiting_for_a_confirm_is_cut_off_at_the_deadline(amqp_url, amqp_queue):
    exchange, _, routing_key = amqp_queue
    proxy = FreezableProxy(urlsplit(amqp_url).port or 5672)
    try:
        url = with_port(amqp_url, proxy.port)
        assert publish(url, exchange, routing_key, "warm").succeeded  # a pooled connection
        proxy.flowing.clear()  # the broker now seems to hang: no confirm will come
        started = time.monotonic()
        result = publish(url, exchange, routing_key, "stuck", timeout_seconds=0.7)
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    assert (result.status, result.retryable) == ("timed_out", True), result
    assert 0.6 <= elapsed < 1.7, elapsed
    assert amqp_target.idle_connections(url) == []  # the stuck connection was not pooled again


def test_a_broker_that_never_answers_a_close_holds_no_thread_past_the_close_bound(amqp_url, amqp_queue):
    """A connection the pool lets go (one too many for its broker, the least recently used broker,
    shutdown) is closed on a thread of its own, gracefully, but a broker that no longer answers
    (a blackholed network) holds that thread at most CLOSE_SECONDS."""
    exchange, _, routing_key = amqp_queue
    proxy = FreezableProxy(urlsplit(amqp_url).port or 5672)
    try:
        url = with_port(amqp_url, proxy.port)
        assert publish(url, exchange, routing_key, "warm").succeeded
        (pooled,) = amqp_target.idle_connections(url)
        proxy.flowing.clear()  # Connection.Close will get no Close-Ok
        started = time.monotonic()
        amqp_target.close_all()  # each close on a thread of its own, waited for within the bound
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    assert elapsed < amqp_target.CLOSE_SECONDS + 1.5, elapsed
    assert not pooled.connection.is_open


def test_urls_of_one_broker_share_its_connections_and_idle_ones_are_swept(
    amqp_url, amqp_queue, amqp_admin, monkeypatch
):
    """The pool's key is what a connection was opened with, not the URL's spelling (an ignored
    query, the host's case); a connection idle past MAX_IDLE_SECONDS under a key no delivery asks
    for again is closed by a later checkin's sweep, so jobs naming many spellings of a broker
    cannot hold connections (and their descriptors) without end."""
    exchange, queue, routing_key = amqp_queue
    assert publish(amqp_url, exchange, routing_key, "1").succeeded
    (first,) = amqp_target.idle_connections(amqp_url)
    spelled = amqp_url + "?heartbeat=30"
    assert publish(spelled, exchange, routing_key, "2").succeeded
    assert amqp_target.idle_connections(spelled) == [first]  # the same connection served both
    assert amqp_target._idle.keys == amqp_target.MAX_KEPT_BROKERS  # at most that many brokers kept
    # A delivery under another key (the host spelled otherwise), later: the first is swept.
    first.last_used -= amqp_target.MAX_IDLE_SECONDS + 1
    monkeypatch.setattr(amqp_target, "_last_sweep", [time.monotonic() - amqp_target.SWEEP_SECONDS - 1])
    assert publish(amqp_url.replace("127.0.0.1", "localhost"), exchange, routing_key, "4").succeeded
    assert amqp_target.idle_connections(amqp_url) == [] and not first.connection.is_open
    assert [get_one(amqp_admin, queue)[1] for _ in range(3)] == [b"1", b"2", b"4"]


# -------------------------------------------------------------------------------------- TLS


def test_amqps_verifies_the_broker_certificate(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = tmp_path / "self-signed.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
    listener = socket.create_server(("127.0.0.1", 0))
    handshakes: list[str] = []

    def serve():
        try:
            client, _ = listener.accept()
        except OSError:
            return
        try:
            context.wrap_socket(client, server_side=True).close()
            handshakes.append("completed")
        except (ssl.SSLError, OSError) as exc:
            handshakes.append(type(exc).__name__)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        url = f"amqps://guest:guest@localhost:{listener.getsockname()[1]}/"
        result = deliver(
            {"type": "amqp", "url": url, "exchange": "", "routing_key": "q", "body": "x", "timeout_seconds": 5},
            make_delivery(),
            LOCAL,
        )
    finally:
        listener.close()
        thread.join(timeout=5)
    assert (result.status, result.retryable) == ("failed", True), result
    assert "certificate" in result.error.lower() and "self-signed" in result.error.lower()
    assert handshakes and handshakes[0] != "completed"
