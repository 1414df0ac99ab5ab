"""``scheduler echo``: a target that prints what it receives, for trying jobs out offline.

Over HTTP (``--port``, default 9000) it prints each request (method, path, headers, body) and
answers 200 (``--status`` another code, to see retries). With ``--amqp-url`` it also consumes a
queue (``--queue``, declared if absent, bound to ``--exchange`` with ``--routing-key`` when
given) and prints each message (properties, headers, body).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from scheduler.cli.common import EXIT_OK, CommandFailed, http_status, port

_print_lock = threading.Lock()


def _emit(lines: list[str], out: TextIO) -> None:
    with _print_lock:
        out.write("\n".join(lines) + "\n\n")
        out.flush()


def _body_text(body: bytes) -> str:
    if not body:
        return "(no body)"
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return f"({len(body)} bytes, not UTF-8: {body[:64]!r}...)"


def make_http_server(
    host: str, port_number: int, *, status: int = 200, out: TextIO | None = None
) -> ThreadingHTTPServer:
    """The HTTP echo server (not started: call ``serve_forever``)."""
    stream = out or sys.stdout

    class Handler(BaseHTTPRequestHandler):
        server_version = "scheduler-echo"

        def _echo(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length > 0 else b""
            lines = [f"--> {self.command} {self.path}"]
            lines += [f"{name}: {value}" for name, value in self.headers.items()]
            lines += ["", _body_text(body)]
            _emit(lines, stream)
            answer = b'{"echoed": true}\n'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _echo

        def log_message(self, format: str, *args: Any) -> None:
            pass

    try:
        return ThreadingHTTPServer((host, port_number), Handler)
    except OSError as exc:
        raise CommandFailed(
            f"cannot listen on {host}:{port_number}: {exc.strerror or exc}"
            + ("; give --port" if exc.errno in (98, 48, 10048) else "")
        ) from None


def consume_amqp(
    url: str,
    queue: str,
    exchange: str | None,
    routing_key: str | None,
    stop: threading.Event,
    out: TextIO | None = None,
    ready: threading.Event | None = None,
) -> None:
    """Print every message of ``queue`` until ``stop`` (pika, one blocking connection)."""
    import pika

    stream = out or sys.stdout
    try:
        connection = pika.BlockingConnection(pika.URLParameters(url))
    except Exception as exc:  # pika's errors have no common useful base for the user
        raise CommandFailed(f"cannot connect to the AMQP broker: {type(exc).__name__} {exc}".strip()) from None
    try:
        channel = connection.channel()
        channel.queue_declare(queue=queue)
        if exchange:
            channel.queue_bind(queue=queue, exchange=exchange, routing_key=routing_key or queue)
    except pika.exceptions.ChannelClosedByBroker as exc:  # no such exchange, a queue declared otherwise...
        with contextlib.suppress(Exception):
            connection.close()
        raise CommandFailed(f"the broker refused the queue {queue!r}: {exc.reply_code} {exc.reply_text}") from None
    if ready is not None:
        ready.set()
    try:
        while not stop.is_set():
            method, properties, body = channel.basic_get(queue=queue, auto_ack=True)
            if method is None:
                connection.sleep(0.1)
                continue
            lines = [f"--> amqp exchange={method.exchange or '(default)'} routing_key={method.routing_key}"]
            for key in ("message_id", "content_type", "content_encoding", "delivery_mode", "timestamp"):
                value = getattr(properties, key, None)
                if value is not None:
                    lines.append(f"{key}: {value}")
            lines += [f"header {name}: {value}" for name, value in (properties.headers or {}).items()]
            lines += ["", _body_text(body)]
            _emit(lines, stream)
    finally:
        connection.close()


def _broker_url(text: str) -> str:
    """An ``amqp(s)://`` URL, checked as a job's broker URL is."""
    from scheduler.core.urls import check_broker_url_syntax

    problem = check_broker_url_syntax(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{problem} (amqp://user:password@host:5672/vhost)")
    return text


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C."""
    stop = threading.Event()
    server = make_http_server(args.host, args.port, status=args.status)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    print(
        f"scheduler echo: listening on http://{args.host}:{server.server_address[1]} "
        f"(answers {args.status}). Ctrl-C to stop.",
        flush=True,
    )
    try:
        if args.amqp_url:
            print(f"scheduler echo: consuming AMQP queue {args.queue!r}", flush=True)
            consume_amqp(args.amqp_url, args.queue, args.exchange, args.routing_key, stop)
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """``scheduler echo``."""
    parser = sub.add_parser(
        "echo",
        help="a target that prints each request or message it receives",
        description="A target that prints each HTTP request (method, path, headers, body) "
        "or AMQP message it receives. Ctrl-C stops it.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=port, default=9000, help="HTTP port (default: 9000; 0: any free port)")
    parser.add_argument(
        "--status",
        type=http_status,
        default=200,
        metavar="CODE",
        help="the HTTP status to answer (default: 200; a 5xx shows the retries)",
    )
    parser.add_argument(
        "--amqp-url", metavar="URL", type=_broker_url, help="also consume AMQP messages from this broker"
    )
    parser.add_argument("--queue", default="scheduler-echo", help="--amqp-url: the queue (default: scheduler-echo)")
    parser.add_argument("--exchange", help="--amqp-url: bind the queue to this exchange")
    parser.add_argument(
        "--routing-key", metavar="KEY", help="--amqp-url: the binding's routing key (default: the queue's name)"
    )
    parser.set_defaults(func=run)
