"""Tools of the fault tests: a loopback HTTP target that can hold requests open and tracks the
deliveries in flight per job, a TCP forwarder that can cut a link, and a poll with a deadline."""

from __future__ import annotations

import http.server
import os
import select
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tests.support import poll  # noqa: F401 - the fault tests import it from here


def peer_closed(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` has closed (or reset) the connection; does not consume data."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class TargetServer:
    """A threaded HTTP server on loopback standing in for a job's target.

    Every request is recorded (path, headers, body, arrival and end times, how it ended). For
    each job (``X-Scheduler-Job-Id``) it counts the deliveries in flight and keeps the highest
    count ever seen, so a test can assert that one job was never delivered twice at once. A
    delivery is in flight from its arrival until the answer is written or the client closes the
    connection.

    ``behaviour[path]`` is a list of actions consumed in order (the last one repeats):
    ``("answer", status, headers, body)``, or ``("hold", seconds)``: keep the request open until
    ``release()`` is called, the client goes away, or ``seconds`` pass (then answer 200).
    ``arrived`` is a condition notified on each arrival.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.behaviour: dict[str, list[tuple]] = {}
        self.inflight: dict[str, int] = defaultdict(int)
        self.max_inflight: dict[str, int] = defaultdict(int)
        self.cond = threading.Condition()
        self._release = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                job = self.headers.get("X-Scheduler-Job-Id") or ""
                with server.cond:
                    record = {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": body,
                        "arrived": time.monotonic(),
                        "ended": None,
                        "end": None,
                    }
                    server.requests.append(record)
                    server.inflight[job] += 1
                    server.max_inflight[job] = max(server.max_inflight[job], server.inflight[job])
                    script = server.behaviour.get(self.path.split("?")[0]) or [("answer", 200, {}, b"ok")]
                    action = script.pop(0) if len(script) > 1 else script[0]
                    server.cond.notify_all()
                try:
                    if action[0] == "hold":
                        deadline = time.monotonic() + action[1]
                        while time.monotonic() < deadline and not server._release.is_set():
                            if peer_closed(self.connection):
                                record["end"] = "client closed"
                                self.close_connection = True
                                return
                            server._release.wait(0.02)
                        action = ("answer", 200, {}, b"held")
                    _, status, headers, payload = action
                    try:
                        self.send_response(status)
                        for key, value in headers.items():
                            self.send_header(key, value)
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                        self.wfile.flush()
                        record["end"] = f"answered {status}"
                    except OSError:
                        record["end"] = "client closed"
                        self.close_connection = True
                finally:
                    with server.cond:
                        record["ended"] = time.monotonic()
                        server.inflight[job] -= 1
                        server.cond.notify_all()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="target-server")
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def release(self) -> None:
        """Let every held request answer."""
        self._release.set()

    def wait_for(self, predicate: Callable[[TargetServer], Any], timeout: float = 10.0, what: str = "requests"):
        """Block until ``predicate(self)`` is truthy (checked under the lock at each change)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{what}: not seen within {timeout:g}s ({len(self.requests)} requests)")
                self.cond.wait(min(left, 0.5))

    def wait_count(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The requests once at least ``count`` arrived."""
        self.wait_for(lambda s: len(s.requests) >= count, timeout, f"{count} requests")
        with self.cond:
            return list(self.requests)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.cond:
            return [dict(r) for r in self.requests]

    def close(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


def postgres_upstream(db_url: str) -> tuple[str, int] | str:
    """Where a ``TcpProxy`` reaches the Postgres of ``db_url``: its host and port, or its Unix
    socket when the host is a directory (the embedded Postgres of a machine without
    ``DATABASE_URL``)."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(db_url)
    host, port = str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432)
    return os.path.join(host, f".s.PGSQL.{port}") if host.startswith("/") else (host, port)


class TcpProxy:
    """A loopback TCP forwarder to ``upstream`` (a host and port, or a Unix socket's path) that a
    test can cut and restore.

    ``down()`` stops listening (new connections are refused: ECONNREFUSED) and shuts down every
    forwarded connection in both directions; ``up()`` listens again on the same port.
    ``lose_answer_holding(marker)``: the next answer from upstream that holds ``marker`` is not
    forwarded, and its connection is cut (an answer lost after the server acted on the request);
    with ``cut_all``, every connection forwarded then is cut too (the network dropped).
    """

    def __init__(self, upstream: tuple[str, int] | str):
        self.upstream = upstream
        self.port = 0
        self.accepted = 0
        self.answers_lost = 0
        self._lose_marker: bytes | None = None
        self._cut_all = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._stop = threading.Event()
        self.up()

    def up(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stop = threading.Event()
        self._accepting = threading.Thread(
            target=self._accept, args=(listener, self._stop), daemon=True, name="proxy-accept"
        )
        self._accepting.start()

    def _accept(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = self._connect_upstream()
            except OSError:
                client.close()
                continue
            with self._lock:
                if stop.is_set():
                    client.close()
                    upstream.close()
                    return
                self.accepted += 1
                self._sockets.update((client, upstream))
            for src, dst, answers in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, answers), daemon=True, name="proxy-pump").start()

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self.upstream, str):
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            return upstream
        upstream = socket.create_connection(self.upstream, timeout=5)
        upstream.settimeout(None)
        return upstream

    def lose_answer_holding(self, marker: bytes, *, cut_all: bool = False) -> None:
        """Lose the next answer from upstream that holds ``marker`` (its connection cut; with
        ``cut_all``, every forwarded connection)."""
        with self._lock:
            self._lose_marker, self._cut_all = marker, cut_all

    def _to_lose(self, data: bytes) -> bool:
        with self._lock:
            if self._lose_marker is None or self._lose_marker not in data:
                return False
            self._lose_marker = None
            self.answers_lost += 1
            if self._cut_all:
                for sock in self._sockets:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            return True

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool = False) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data or (answers and self._to_lose(data)):
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self) -> None:
        self._stop.set()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def refuses(self) -> bool:
        """Whether a connection to the proxy is refused right now."""
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True

    def close(self) -> None:
        self.down()
