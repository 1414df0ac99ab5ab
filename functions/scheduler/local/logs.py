"""Log lines of the command line and local mode (stderr, one line per record).

A finished execution is one line that carries what a reader looks for, taken from the fields
the executor attaches to its record (``extra``): the job's name and id, the status, then
``key=value`` pairs, the error last::

    INFO scheduler.runner.executor: nightly 3f2a... succeeded http=200 took=85ms late=12ms execution=7d0c... owner=alice at=2026-12-06T09:30:00.085Z

Any other record is its message followed by the fields attached to it (``job created
job_id=...``). Errors are printed whole (the executor's error text is redacted before it is
recorded, so no secret reaches it).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FINISHED_MESSAGE = "execution finished"
# The attributes every record has: what is not one of them was attached by ``extra``.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def execution_line(record: logging.LogRecord) -> str | None:
    """The one-line summary of an ``execution finished`` record, or None for other records."""
    if record.getMessage() != FINISHED_MESSAGE:
        return None
    fields = record.__dict__
    parts = [str(fields.get("job_name") or "-"), str(fields.get("job_id") or "-"), str(fields.get("status") or "-")]
    if fields.get("http_status") is not None:
        parts.append(f"http={fields['http_status']}")
    if fields.get("duration_ms") is not None:
        parts.append(f"took={fields['duration_ms']}ms")
    if fields.get("lateness_ms") is not None:
        parts.append(f"late={fields['lateness_ms']}ms")
    if fields.get("attempt") not in (None, 1):
        parts.append(f"attempt={fields['attempt']}")
    for key, name in (("execution_id", "execution"), ("owner", "owner")):
        if fields.get(key):
            parts.append(f"{name}={fields[key]}")
    parts.append(f"at={utc_instant(record.created)}")
    if fields.get("error"):
        parts.append(f"error={' '.join(str(fields['error']).split())}")
    # what a target answered never acts on the terminal (ESC and other controls shown escaped)
    return printable(" ".join(parts))


def utc_instant(created: float) -> str:
    """A record's time as the API writes instants, to the millisecond (``2026-12-06T09:30:00.085Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created * 1000) % 1000:03d}Z"


def with_fields(record: logging.LogRecord) -> str:
    """A record's message followed by the fields attached to it (``extra``), ``key=value`` each,
    in the order given; None values left out."""
    extra = [(key, value) for key, value in record.__dict__.items() if key not in _RECORD_FIELDS and value is not None]
    if not extra:
        return record.message
    return printable(" ".join([record.message, *(f"{key}={_field(value)}" for key, value in extra)]))


def _field(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(item) for item in value)
    return " ".join(str(value).split())  # one line, whatever it holds


def printable(text: str) -> str:
    """``text`` safe for a terminal: whitespace kept, every other character a terminal could act
    on (ESC, NUL, C1 controls, bidirectional overrides) shown as its escape (``\\x1b``). The
    log lines and the CLI's output alike."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch.isspace() else ascii(ch)[1:-1] for ch in text)


class LocalFormatter(logging.Formatter):
    """``LEVEL [process] logger: message key=value ...``; a finished execution as its one-line
    summary (its time in ``at=``). A warning or an error ends with its time too (``at=...``):
    what went wrong, and when, read off one line."""

    def __init__(self, process: str | None = None):
        where = f"[{process}] " if process else ""
        super().__init__(f"%(levelname)s {where}%(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = execution_line(record)
        if line is None:
            line = with_fields(record)
            if record.levelno >= logging.WARNING:
                line += f" at={utc_instant(record.created)}"
        record.message = line
        return super().formatMessage(record)


_held = threading.local()  # .lines: {handler: [line, ...]} while a thread's lines are held


@contextmanager
def lines_held() -> Iterator[None]:
    """Hold the lines this thread logs to stderr and write them in one go at the end.

    The recorder logs a line for each execution of the batch it records: written one by one,
    each line is a system call, and each system call lets the GIL go to one of the delivery
    threads, which the recorder then waits to have back (in a burst of 10,000 deliveries, twice
    the recorder's involuntary switches). Held, a batch is one write. Lines logged by other
    threads are written as they come; an inner ``lines_held`` adds to the outer one's.
    """
    if getattr(_held, "lines", None) is not None:
        yield
        return
    _held.lines = {}
    try:
        yield
    finally:
        held, _held.lines = _held.lines, None
        for handler, lines in held.items():
            handler.write_lines(lines)


class _StderrHandler(logging.StreamHandler):
    """A stream handler writing to whatever ``sys.stderr`` is when a record comes (not the one of
    the moment it was made: tests and tools swap it); inside ``lines_held``, to that thread's
    held lines."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass

    def emit(self, record: logging.LogRecord) -> None:
        held = getattr(_held, "lines", None)
        if held is None:
            super().emit(record)
            return
        try:
            held.setdefault(self, []).append(self.format(record) + self.terminator)
        except Exception:
            self.handleError(record)

    def write_lines(self, lines: list[str]) -> None:
        """Write held lines at once, under the handler's lock (no other thread's line inside)."""
        with self.lock:  # type: ignore[union-attr]
            try:
                stream: Any = self.stream
                stream.write("".join(lines))
                stream.flush()
            except Exception:
                self.handleError(logging.makeLogRecord({"msg": "%d held log lines", "args": (len(lines),)}))


def configure_logging(process: str | None = None) -> None:
    """Log lines to stderr at INFO, without third-party chatter; ``process`` names the process
    in each line (the extra runners of ``scheduler local``)."""
    root = logging.getLogger()
    if not any(getattr(h, "_scheduler", False) for h in root.handlers):
        ours = _StderrHandler()
        ours._scheduler = True  # type: ignore[attr-defined]
        root.addHandler(ours)
    for handler in root.handlers:
        if getattr(handler, "_scheduler", False):
            handler.setFormatter(LocalFormatter(process))
    root.setLevel(logging.INFO)
    # A local line names no source file, function, thread or process: skip looking them up for
    # every record (one per delivery; the logging HOWTO's "Optimization" settings).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # Third-party chatter (initdb transcripts, pika's tracebacks for failures we report ourselves).
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    logging.getLogger("pika").setLevel(logging.CRITICAL)
    logging.getLogger("botocore").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="platformdirs")
