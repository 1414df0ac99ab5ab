"""An HTTP/1.1 answer read from a socket (:mod:`scheduler.targets.http_wire` sends the request).

The head (status line and headers) ends at an empty line (CRLF CRLF, or bare LFs as
http.client accepts); interim 1xx answers are skipped (101 is final). The body is framed as RFC
9112 section 6.3 says: none after a HEAD, a 1xx, 204 or 304; ``Transfer-Encoding`` (chunked when
it is the last coding, else the body ends with the connection; a ``Content-Length`` beside it is
ignored and the connection not kept); one ``Content-Length``; else the close of the connection.
At most ``read_limit`` bytes of the body are read, never more: a longer one is left unread and
its connection closed. An error while reading the body (the deadline, a reset) keeps the status
and what was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_INTERIM_ANSWERS = 10
RECV_BYTES = 64 * 1024

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) +([0-9]{3})(?: (.*))?")


class InvalidResponse(Exception):
    """The peer's answer is not HTTP/1.1 (or ended before its head did)."""


class ConnectionDropped(InvalidResponse):
    """The connection closed before any byte of the answer came."""


@dataclass
class Response:
    """An answer: its status, reason and headers (names lower-cased, each value a list in the
    order received) and at most ``read_limit`` bytes of its body."""

    status: int
    reason: str
    headers: dict[str, list[str]] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower case), or None."""
        values = self.headers.get(name)
        return values[0] if values else None


class AnswerReader:
    """Reads one answer from a socket, through a buffer; ``body`` is the body read so far."""

    __slots__ = ("sock", "buffer", "received", "body")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buffer = bytearray()  # received, not yet taken
        self.received = 0  # bytes of the answer received so far
        self.body = bytearray()

    def _fill(self) -> bool:
        """Receive what has arrived; False at the end of the stream."""
        data = self.sock.recv(RECV_BYTES)
        if not data:
            return False
        self.received += len(data)
        self.buffer += data
        return True

    def _take(self, count: int) -> bytes:
        taken = bytes(self.buffer[:count])
        del self.buffer[:count]
        return taken

    def _head(self) -> bytes:
        """The head of the next answer (status line and headers), without the empty line that
        ends it (CRLF CRLF, or bare LFs as http.client accepts)."""
        while True:
            crlf, lf = self.buffer.find(b"\n\r\n"), self.buffer.find(b"\n\n")
            if crlf >= 0 and (lf < 0 or crlf < lf):
                head = self._take(crlf)
                del self.buffer[:3]
                return head
            if lf >= 0:
                head = self._take(lf)
                del self.buffer[:2]
                return head
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise InvalidResponse("the answer's head is too long")
            if not self._fill():
                if self.received == 0:
                    raise ConnectionDropped("the connection closed before the answer")
                raise InvalidResponse("the connection closed within the answer's head")

    def answer(self, method: str, read_limit: int) -> tuple[Response, bool]:
        """The final answer (interim 1xx skipped) and whether the connection may be kept."""
        for _ in range(MAX_INTERIM_ANSWERS):
            response, minor = _parse_head(self._head())
            if not (100 <= response.status < 200) or response.status == 101:
                break
        else:
            raise InvalidResponse("too many interim answers")
        keep = _keeps_alive(response, minor)
        if method == "HEAD" or response.status < 200 or response.status in (204, 304):
            return response, keep and response.status != 101
        codings = ",".join(response.headers.get("transfer-encoding", ())).lower()
        lengths = {value.strip() for value in response.headers.get("content-length", ())}
        try:
            if codings and codings.rsplit(",", 1)[-1].strip() == "chunked":
                whole = self._chunked(read_limit)
                keep = keep and whole and not lengths  # a length beside the coding is ignored (RFC 9112 6.3)
            elif not codings and len(lengths) == 1 and (length := lengths.pop()).isdigit():
                whole = self._sized(int(length), read_limit)
                keep = keep and whole
            else:  # another coding, no length, lengths that disagree: the body ends with the connection
                self._read_into_body(read_limit)
                keep = False
        except Exception:
            keep = False
        response.body = bytes(self.body[:read_limit])
        return response, keep

    def _read_into_body(self, count: int) -> bool:
        """Move ``count`` more bytes into the body; False if the stream ended first."""
        while count > 0:
            if not self.buffer and not self._fill():
                return False
            part = self._take(count)
            self.body += part
            count -= len(part)
        return True

    def _sized(self, length: int, limit: int) -> bool:
        """A body of ``length`` bytes; True when it was read whole (it fits the limit)."""
        return self._read_into_body(min(length, limit)) and length <= limit

    def _line(self) -> bytes:
        while (end := self.buffer.find(b"\n")) < 0:
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise InvalidResponse("a chunk's size line is too long")
            if not self._fill():
                raise InvalidResponse("the connection closed within a chunked body")
        return self._take(end + 1).rstrip(b"\r\n")

    def _chunked(self, limit: int) -> bool:
        """A chunked body, up to ``limit`` bytes of it; True when it was read to its last chunk."""
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise InvalidResponse("a chunk size that is not a number") from None
            if size == 0:
                while self._line():  # the trailer section, up to its empty line
                    pass
                return True
            room = limit - len(self.body)
            if size > room:  # past the excerpt: not read on (the connection is closed)
                self._read_into_body(room)
                return False
            if not self._read_into_body(size):
                raise InvalidResponse("the connection closed within a chunk")
            self._line()  # the CRLF after the chunk's data


def _parse_head(head: bytes) -> tuple[Response, int]:
    lines = head.split(b"\n")
    match = _STATUS_LINE.fullmatch(lines[0].rstrip(b"\r"))
    if match is None:
        raise InvalidResponse("not an HTTP/1.1 answer")
    minor, status, reason = match.groups()
    if len(lines) > MAX_HEADERS + 1:
        raise InvalidResponse("too many headers")
    headers: dict[str, list[str]] = {}
    last: list[str] | None = None
    for raw in lines[1:]:
        line = raw.rstrip(b"\r").decode("latin-1")
        if line[:1] in (" ", "\t"):  # a folded line continues the header before it
            if last is not None:
                last[-1] = f"{last[-1]} {line.strip()}"
            continue
        name, colon, value = line.partition(":")
        if not colon:
            last = None
            continue  # not a header line: skipped, as http.client does
        last = headers.setdefault(name.strip().lower(), [])
        last.append(value.strip())
    response = Response(int(status), _reason_text(reason or b""), headers)
    return response, int(minor)


def _reason_text(reason: bytes) -> str:
    """The status line's reason phrase as printable text on one line (at most 200 characters):
    it ends up in an execution's error, and from there in logs, alerts' headers and terminals,
    so a target's control characters (a bare CR, ESC, NUL) become spaces."""
    text = reason.decode("latin-1").strip()
    if text.isprintable() and len(text) <= 200:  # nearly every answer: "OK", "Not Found"
        return text
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())[:200]


def _keeps_alive(response: Response, minor: int) -> bool:
    tokens = {token.strip().lower() for value in response.headers.get("connection", ()) for token in value.split(",")}
    if "close" in tokens:
        return False
    return minor == 1 or "keep-alive" in tokens
