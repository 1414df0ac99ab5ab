"""Issue 31, items 1 and 7, through `scheduler local --auth sigv4` with two tenants: one
tenant's target cannot make another tenant's execution record an answer that is not its own
(kept-alive connections desynchronised by a request smuggled in a GET body, or by a second
answer), and one tenant's hung name lookups do not hold up another tenant's delivery. Each of
these failed before the fix, except where a test says it guards what already held."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from scheduler.targets import ssrf
from tests.security.conftest import spec, unique
from tests.support import poll

HOLD_SECONDS = 5.0  # the longest the target holds an answer back, waiting for the next request
LATE_SECONDS = 0.02  # how late the second answer of a /late/ path comes


class DesyncTarget:
    """A raw-socket HTTP/1.1 target on loopback. It answers each request with what the request
    was, ``answer to <method> <path> for <execution id>`` (the execution from the
    ``X-Scheduler-Execution-Id`` header; ``nobody`` without one), and misbehaves as real servers do:

    - it never reads the body of a GET or HEAD (as Python's ``http.server`` does): what such a
      body holds is read as the next request on the connection;
    - ``/slow/...`` is answered once the next request has come on the connection (at most
      ``HOLD_SECONDS`` later): a slow answer still on its way when the connection carries another
      request (the timing that mixed the answers, made certain);
    - ``/held/...`` is answered, then answered a second time as soon as the next request comes;
    - ``/late/...`` is answered, then answered a second time ``LATE_SECONDS`` later.
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, str]] = []  # (method, path, execution id)
        self.second_answers_sent: list[str] = []  # the paths whose second answer went out
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        with self.lock:
            return [path for _, path, _ in self.requests]

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for conn in self.connections:
                conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        sending = threading.Lock()  # the late second answer is sent from a timer thread
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                method, path, headers = _parse(head)
                if method not in ("GET", "HEAD"):  # a GET's or HEAD's body is left where it is
                    length = int(headers.get("content-length", "0"))
                    while len(buffer) < length:
                        buffer += conn.recv(65536)
                    buffer = buffer[length:]
                execution = headers.get("x-scheduler-execution-id", "nobody")
                with self.lock:
                    self.requests.append((method, path, execution))
                answer = _answer(f"answer to {method} {path} for {execution}")
                second = _answer(f"second answer to {method} {path} for {execution}")
                if path.startswith("/slow/"):
                    _wait_for_next_request(conn, buffer)
                with sending:
                    conn.sendall(answer)
                if path.startswith("/held/"):
                    _wait_for_next_request(conn, buffer)
                    self._send_second(conn, sending, second, path)
                elif path.startswith("/late/"):
                    threading.Timer(LATE_SECONDS, self._send_second, (conn, sending, second, path)).start()
        except OSError:
            return

    def _send_second(self, conn: socket.socket, sending: threading.Lock, answer: bytes, path: str) -> None:
        try:
            with sending:
                conn.sendall(answer)
        except OSError:
            return
        with self.lock:
            self.second_answers_sent.append(path)


def _parse(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, path, headers


def _answer(text: str) -> bytes:
    body = text.encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def _wait_for_next_request(conn: socket.socket, buffer: bytes) -> None:
    if not buffer:
        select.select([conn], [], [], HOLD_SECONDS)


@pytest.fixture
def target() -> Iterator[DesyncTarget]:
    server = DesyncTarget()
    yield server
    server.close()


def http_job(url: str, **fields: Any) -> dict[str, Any]:
    return spec(unique("iso"), {"type": "http", "url": url, "method": "GET", **fields}, retry={"max_attempts": 1})


def run(tenant, job_id: str, count: int) -> dict[str, Any]:
    """Run the job now; its ``count``-th execution once finished (the newest)."""
    answer = tenant.call("POST", f"/v1/jobs/{job_id}/run")
    assert answer.status == 202, answer.text
    return max(tenant.executions(job_id, count), key=lambda e: e["started_at"])


def assert_own_answer(execution: dict[str, Any], method: str, path: str) -> None:
    assert execution["status"] == "succeeded", execution
    assert execution["response_excerpt"] == f"answer to {method} {path} for {execution['id']}", execution


def store_target_field(local_server, job_id: str, name: str, value: Any) -> None:
    """Set a field of a stored job's target behind the API's back: a job stored before the API
    refused what it holds."""
    with psycopg.connect(local_server.database_url, autocommit=True) as conn:
        changed = conn.execute(
            "UPDATE job_specs SET target = target || %s WHERE id = %s", (Jsonb({name: value}), job_id)
        ).rowcount
    assert changed == 1


# -- item 1 (a): no body on a GET or HEAD -----------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_get_or_head_with_a_body_is_refused_at_write_time(alice, method):
    name = unique("bodiless")
    target = {"type": "http", "url": "https://example.com/x", "method": method, "body": "GET /slow/x HTTP/1.1\r\n\r\n"}
    answer = alice.call("POST", "/v1/jobs", spec(name, target))
    assert answer.status == 400, answer.text
    assert answer.fields() == ["target.body"]
    assert name not in alice.names()


def test_a_patch_to_get_that_keeps_the_body_is_refused(alice):
    job = alice.create(spec(unique("to-get"), {"type": "http", "url": "https://example.com/x", "body": "{}"}))
    path = f"/v1/jobs/{job['id']}"
    patch = {"target": {"method": "GET"}}
    answer = alice.call("PATCH", path, patch, content_type="application/merge-patch+json")
    assert answer.status == 400 and answer.fields() == ["target.body"], answer.text
    patch["target"]["body"] = None  # without its body, the GET is fine
    answer = alice.call("PATCH", path, patch, content_type="application/merge-patch+json")
    assert answer.status == 200 and answer.json["target"]["method"] == "GET", answer.text


def test_a_request_smuggled_in_a_stored_get_body_is_never_sent(alice, bob, local_server, target):
    # The attack of the issue: alice's GET carries a second request in its body; the target
    # ignores GET bodies, so it answers that request too, later, on the kept-alive connection.
    smuggled = f"GET /slow/x HTTP/1.1\r\nHost: 127.0.0.1:{target.port}\r\n\r\n"
    attack = alice.create(http_job(target.url("/alice")))
    store_target_field(local_server, attack["id"], "body", smuggled)
    refused = run(alice, attack["id"], 1)
    assert (refused["status"], refused["http_status"]) == ("failed", None), refused
    assert "body" in refused["error"] and "GET" in refused["error"], refused
    # Bob's delivery to the same origin records the answer to his own request (before: the
    # smuggled request's, "answer to GET /slow/x for nobody").
    victim = bob.create(http_job(target.url("/private/bob")))
    assert_own_answer(run(bob, victim["id"], 1), "GET", "/private/bob")
    assert target.paths() == ["/private/bob"]  # nothing of alice's went out


# -- item 1 (b), (c): idle connections per owner, none reused once something came after its answer --


def test_a_second_answer_never_reaches_another_owner(alice, bob, target):
    # Alice's target answers each of her requests twice, the second answer as soon as the next
    # request comes on the connection: no check can tell it from an answer, so that connection
    # must never carry bob's request (before: bob recorded "second answer to GET /held/alice").
    mischief = alice.create(http_job(target.url("/held/alice")))
    victim = bob.create(http_job(target.url("/private/bob")))
    assert_own_answer(run(alice, mischief["id"], 1), "GET", "/held/alice")
    for count in (1, 2):
        assert_own_answer(run(bob, victim["id"], count), "GET", "/private/bob")


def test_an_answer_that_came_while_the_connection_was_idle_is_never_taken(alice, bob, target):
    # A second answer that arrives a few milliseconds after the first: once it is there, the
    # connection is not reused, by its own owner either. (This guards what the check at checkout
    # already did; the check at checkin and the per-owner pools come on top of it.)
    late = alice.create(http_job(target.url("/late/alice")))
    victim = bob.create(http_job(target.url("/private/bob")))
    for count in (1, 2, 3):
        assert_own_answer(run(alice, late["id"], count), "GET", "/late/alice")
        poll(lambda c=count: len(target.second_answers_sent) >= c, what="the second answer sent")
        assert_own_answer(run(bob, victim["id"], count), "GET", "/private/bob")


# -- item 7: one owner's hung name lookups -----------------------------------------------------------


class HungResolver:
    """``socket.getaddrinfo`` for the names of this test: a name under ``.hung.test`` hangs
    until ``release`` (as behind a resolver that does not answer), then does not resolve;
    ``bob.test`` is 127.0.0.1 at once. Other names go to the real resolver."""

    def __init__(self, real) -> None:
        self.real = real
        self.released = threading.Event()

    def __call__(self, host, port, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".hung.test"):
            self.released.wait(60)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if host == "bob.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", int(port)))]
        return self.real(host, port, *args, **kwargs)


def test_hung_lookups_of_one_owner_do_not_hold_up_another_owners_delivery(alice, bob, target, monkeypatch):
    resolver = HungResolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", resolver)  # nothing else of the lookup is replaced
    entered: list[str] = []
    real_resolve = ssrf.resolve

    def counted(host, *args, **kwargs):  # only observes which deliveries reached the lookup
        entered.append(host)
        return real_resolve(host, *args, **kwargs)

    monkeypatch.setattr(ssrf, "resolve", counted)
    hosts = [f"a{i}.hung.test" for i in range(12)]
    hung = [alice.create(http_job(f"http://{host}/x", timeout_seconds=20)) for host in hosts]
    try:
        for job in hung:
            assert alice.call("POST", f"/v1/jobs/{job['id']}/run").status == 202
        poll(lambda: sum(h.endswith(".hung.test") for h in entered) == len(hung), what="alice's lookups")
        # All twelve of alice's deliveries are at their lookups (more than the resolver's
        # threads were before), which hang; bob's delivery, whose name resolves at once,
        # succeeds (before: it timed out behind them).
        victim = bob.create(http_job(target.url("/private/bob", host="bob.test"), timeout_seconds=5))
        assert_own_answer(run(bob, victim["id"], 1), "GET", "/private/bob")
    finally:
        resolver.released.set()
    for job, host in zip(hung, hosts, strict=True):  # and alice's deliveries end, each within its time
        (execution,) = alice.executions(job["id"], 1)
        assert execution["status"] in ("failed", "timed_out") and host in execution["error"], execution
