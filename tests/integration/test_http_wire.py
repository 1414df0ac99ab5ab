"""HTTP/1.1 on the wire (scheduler.targets.http_wire, http_answer) against a scripted server on
loopback: each path answers exact bytes, so framing, keep-alive and odd peers are what is tested."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import uuid
from collections.abc import Callable

import pytest

from scheduler.targets import http_wire
from scheduler.targets.results import Delivery, TargetPolicy
from scheduler.targets.router import deliver
from scheduler.targets.watchdog import Watchdog

LOCAL = TargetPolicy(allow_private=True)


def ok(body: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


# What each path answers: bytes to send, or a callable given the connection (it may close it).
ANSWERS: dict[str, bytes | Callable[[socket.socket], None]] = {
    "/ok": ok(),
    "/chunked": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
    ),
    "/chunked-long": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    + (b"1000\r\n" + b"c" * 4096 + b"\r\n") * 4,
    "/to-close": b"HTTP/1.0 200 OK\r\n\r\nuntil the end",
    "/interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"final"),
    "/close": ok(b"bye", b"Connection: close\r\n"),
    "/garbage": b"FOO 200 nope\r\n\r\n",
    "/lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
    "/bare-lf": b"HTTP/1.1 201 Created\nContent-Length: 2\nX-Folded: a\n b\n\nhi",
    "/not-found": b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope",
    "/control-reason": b"HTTP/1.1 500 Oops\rX-Injected: 1\x00\x1b[31m\x85\r\nContent-Length: 0\r\n\r\n",
    "/extra": ok(b"mine") + b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nnot me",  # two answers to one request
}


class ScriptedServer:
    """Answers each request on a connection from ``ANSWERS`` by path; records (path, client
    port, head) per request. ``drop_after_request`` paths: the connection is closed at once
    after the request was read, with no answer."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[tuple[str, int, bytes]] = []
        self.connections: list[socket.socket] = []
        self.drop_next: set[str] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while True:
            try:
                conn, (_, port) = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn, port), daemon=True).start()

    def _serve(self, conn: socket.socket, port: int) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                path = head.split(b" ")[1].decode()
                with self.lock:
                    self.requests.append((path, port, head))
                    drop = path in self.drop_next
                    self.drop_next.discard(path)
                if drop:
                    conn.close()
                    return
                answer = ANSWERS[path]
                if callable(answer):
                    answer(conn)
                else:
                    conn.sendall(answer)
                if path in ("/to-close", "/close", "/garbage", "/lengths"):
                    conn.close()
                    return
        except OSError:
            return

    def ports(self, path: str) -> list[int]:
        with self.lock:
            return [port for p, port, _ in self.requests if p == path]

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for conn in self.connections:
                try:
                    conn.close()
                except OSError:
                    pass


@pytest.fixture
def scripted():
    http_wire.close_connections()
    server = ScriptedServer()
    yield server
    server.close()
    http_wire.close_connections()


def send(server: ScriptedServer, path: str, owner: str | None = None, **fields):
    delivery = Delivery(
        job_id=str(uuid.uuid4()),
        execution_id=str(uuid.uuid4()),
        scheduled_at=dt.datetime.now(dt.UTC),
        attempt=1,
        owner=owner,
    )
    return deliver({"type": "http", "url": server.url(path), **fields}, delivery, LOCAL)


def test_a_chunked_answer_is_read_to_its_trailer_and_its_connection_kept(scripted):
    first = send(scripted, "/chunked")
    assert (first.status, first.http_status, first.response_excerpt) == ("succeeded", 200, "hello, world")
    assert send(scripted, "/chunked").succeeded
    one, two = scripted.ports("/chunked")
    assert one == two


def test_a_chunked_answer_past_the_excerpt_is_cut_and_its_connection_closed(scripted):
    result = send(scripted, "/chunked-long")
    assert result.succeeded and result.response_excerpt == "c" * 4096
    assert send(scripted, "/chunked-long").succeeded
    one, two = scripted.ports("/chunked-long")
    assert one != two  # the rest was not read: that connection could not carry another answer


def test_an_answer_that_ends_with_the_connection(scripted):
    result = send(scripted, "/to-close")
    assert (result.status, result.response_excerpt) == ("succeeded", "until the end")
    assert send(scripted, "/to-close").succeeded
    assert len(set(scripted.ports("/to-close"))) == 2


def test_interim_answers_are_skipped(scripted):
    result = send(scripted, "/interim")
    assert (result.status, result.http_status, result.response_excerpt) == ("succeeded", 200, "final")


def test_connection_close_is_honoured(scripted):
    assert send(scripted, "/close").response_excerpt == "bye"
    assert send(scripted, "/ok").succeeded  # a new connection: the closed one was not kept
    assert scripted.ports("/close")[0] != scripted.ports("/ok")[0]


def test_an_answer_that_is_not_http_is_a_retryable_failure(scripted):
    result = send(scripted, "/garbage")
    assert (result.status, result.retryable, result.http_status) == ("failed", True, None)
    assert result.error == "connection to 127.0.0.1 failed (not an HTTP/1.1 answer)"


def test_lengths_that_disagree_end_the_body_with_the_connection(scripted):
    result = send(scripted, "/lengths")
    assert (result.status, result.response_excerpt) == ("succeeded", "abc")


def test_bare_line_feeds_and_folded_headers_are_read(scripted):
    result = send(scripted, "/bare-lf")
    assert (result.status, result.http_status, result.response_excerpt) == ("succeeded", 201, "hi")


def test_a_reason_phrase_s_control_characters_never_reach_the_error(scripted):
    # the error goes on to logs, alerts' headers and terminals
    result = send(scripted, "/control-reason")
    assert (result.status, result.http_status) == ("failed", 500)
    assert result.error.startswith("HTTP 500 Oops X-Injected: 1 [31m")
    assert result.error.isprintable()


def test_a_failed_status_keeps_the_connection(scripted):
    assert send(scripted, "/not-found").http_status == 404
    assert send(scripted, "/ok").succeeded
    assert scripted.ports("/not-found") == scripted.ports("/ok")


def test_a_kept_connection_the_peer_closed_while_idle_is_not_used(scripted):
    assert send(scripted, "/ok").succeeded
    with scripted.lock:
        (conn,) = scripted.connections
    conn.shutdown(socket.SHUT_RDWR)  # the server drops its idle connection
    result = send(scripted, "/ok")
    assert result.succeeded, result.error
    first, second = scripted.ports("/ok")
    assert first != second


def test_kept_connections_are_kept_per_owner(scripted):
    for owner in ("alice", "bob", "alice", "bob"):
        assert send(scripted, "/ok", owner=owner).succeeded
    alice, bob, alice_again, bob_again = scripted.ports("/ok")
    assert alice == alice_again and bob == bob_again and alice != bob  # one connection each, never shared


def test_a_second_answer_to_one_request_is_never_read_as_the_next_ones(scripted):
    assert send(scripted, "/extra").response_excerpt == "mine"
    assert send(scripted, "/ok").response_excerpt == "ok"  # not "not me"
    assert scripted.ports("/extra") != scripted.ports("/ok")  # a new connection


def test_a_kept_connection_that_received_bytes_while_idle_is_not_used(scripted):
    assert send(scripted, "/ok").succeeded
    with scripted.lock:
        (conn,) = scripted.connections
    conn.sendall(ok(b"late"))  # an answer nobody asked for, arriving while the connection is idle
    assert send(scripted, "/ok").response_excerpt == "ok"
    first, second = scripted.ports("/ok")
    assert first != second


def test_a_connection_that_received_bytes_after_its_answer_is_not_used_again():
    # Bytes that came after the answer was read (not in its buffer) are found at the checkout.
    (noisy, noisy_peer), (quiet, quiet_peer) = socket.socketpair(), socket.socketpair()
    key = ("owner", True, (), "", "http", "checkin.test", 80)
    try:
        http_wire._checkin(key, http_wire._Connection(noisy))
        noisy_peer.sendall(b"HTTP/1.1 200 OK\r\n")
        assert http_wire._checkout(key) is None and noisy.fileno() == -1  # closed, not used
        http_wire._checkin(key, http_wire._Connection(quiet))
        assert http_wire._checkout(key).sock is quiet
    finally:
        http_wire.close_connections()
        for sock in (noisy, noisy_peer, quiet, quiet_peer):
            sock.close()


@pytest.mark.parametrize("method", ["GET", "HEAD", "get"])
def test_a_stored_get_or_head_body_fails_for_good_before_connecting(scripted, method):
    smuggled = f"GET /ok HTTP/1.1\r\nHost: 127.0.0.1:{scripted.port}\r\n\r\n"
    result = send(scripted, "/ok", method=method, body=smuggled)
    assert (result.status, result.retryable) == ("failed", False)
    assert result.error == f"invalid target: body: a {method.upper()} request carries no body"
    assert scripted.requests == []


def test_a_kept_connection_dropped_as_it_is_used_is_replaced_once(scripted):
    assert send(scripted, "/ok").succeeded
    scripted.drop_next.add("/ok")  # the next request is read, then its connection closed unanswered
    result = send(scripted, "/ok")
    assert result.succeeded, result.error
    ports = scripted.ports("/ok")
    assert len(ports) == 3 and ports[0] == ports[1] != ports[2]  # sent again on a new connection, once


def test_a_new_connection_dropped_unanswered_is_a_failure_not_a_loop(scripted):
    scripted.drop_next.add("/ok")
    result = send(scripted, "/ok")
    assert (result.status, result.retryable) == ("failed", True)
    assert "closed before the answer" in result.error
    assert len(scripted.ports("/ok")) == 1


def test_the_request_on_the_wire(scripted):
    body = '{"a": 1}'
    assert send(scripted, "/ok", method="PUT", body=body, headers={"X-One": "1", "content-length": "99"}).succeeded
    assert send(scripted, "/ok", method="GET", headers={"Host": "virtual.example"}).succeeded
    (_, _, put), (_, _, get) = scripted.requests
    lines = put.decode().split("\r\n")
    assert lines[0] == "PUT /ok HTTP/1.1"
    assert lines[1] == f"Host: 127.0.0.1:{scripted.port}"
    assert "X-One: 1" in lines and f"Content-Length: {len(body)}" in lines  # the framing is ours
    assert sum(1 for line in lines if line.lower().startswith("content-length")) == 1
    get_lines = get.decode().split("\r\n")
    assert "Host: virtual.example" in get_lines and not any(line.startswith("Content-Length") for line in get_lines)


@pytest.mark.parametrize(
    "headers,message",
    [
        ({"X-Bad": "a\nb"}, "invalid header"),
        ({"X Bad:": "a"}, "invalid header"),
        ({"X-Nul": "a\x00b"}, "invalid header"),
        ({"X-Text": "naïve ✓"}, "invalid request: UnicodeEncodeError"),
    ],
)
def test_headers_that_cannot_be_sent_fail_for_good_before_connecting(scripted, headers, message):
    result = send(scripted, "/ok", headers=headers)
    assert (result.status, result.retryable) == ("failed", False)
    assert message in result.error
    assert scripted.requests == []


def test_headers_map_names_without_case_and_take_the_last_spelling():
    headers = http_wire.Headers([("content-type", "a"), ("X-Other", "b")])
    headers["Content-Type"] = "c"
    assert headers.items() == [("Content-Type", "c"), ("X-Other", "b")]
    assert "CONTENT-TYPE" in headers and headers["x-other"] == "b"
    assert headers.pop("X-OTHER") == "b" and dict(headers) == {"Content-Type": "c"}


def test_a_watchdog_forgets_a_socket_kept_alive():
    left, right = socket.socketpair()
    try:
        watchdog = Watchdog(60)
        getter = lambda: left  # noqa: E731
        watchdog.watch(getter)
        watchdog.forget(getter)
        watchdog._fire()
        left.sendall(b"x")  # not shut down: the delivery that kept it is over
        assert right.recv(1) == b"x"
    finally:
        left.close()
        right.close()
