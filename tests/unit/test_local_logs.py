"""Local mode's log lines held by a thread (``lines_held``): the recorder's batch is one write."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from scheduler.local.logs import LocalFormatter, _StderrHandler, lines_held


class CountingStream:
    """A stand-in for stderr that keeps each write apart."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def counting_stderr(monkeypatch) -> CountingStream:
    """A ``CountingStream`` as stderr, set by the test itself (pytest sets its own stderr after
    the fixtures)."""
    stream = CountingStream()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A logger writing local mode's lines to stderr, whatever stderr is when it logs."""
    logger = logging.getLogger("test.local.logs")
    handler = _StderrHandler()
    handler.setFormatter(LocalFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger
    finally:
        logger.removeHandler(handler)


def test_held_lines_are_written_at_once_at_the_end(logger, monkeypatch):
    stream = counting_stderr(monkeypatch)
    with lines_held():
        for i in range(3):
            logger.info("execution finished", extra={"job_name": f"job-{i}", "job_id": str(i), "status": "succeeded"})
        logger.warning("lease lost; outcome not recorded")
        assert stream.writes == []
    assert len(stream.writes) == 1
    lines = stream.writes[0].splitlines()
    assert [line.split()[2:5] for line in lines[:3]] == [[f"job-{i}", str(i), "succeeded"] for i in range(3)]
    assert lines[3].startswith("WARNING test.local.logs: lease lost; outcome not recorded at=")


def test_other_threads_write_as_they_log_and_nested_holds_end_with_the_outer(logger, monkeypatch):
    stream = counting_stderr(monkeypatch)
    with lines_held():
        logger.info("first")
        with lines_held():
            logger.info("second")
        assert stream.writes == []  # the inner hold ended: still held by the outer one
        other = threading.Thread(target=lambda: logger.info("from another thread"))
        other.start()
        other.join()
        assert stream.writes == ["INFO test.local.logs: from another thread\n"]
    assert stream.writes[1:] == ["INFO test.local.logs: first\nINFO test.local.logs: second\n"]
    logger.info("after")  # nothing held any more: a line, a write
    assert stream.writes[2:] == ["INFO test.local.logs: after\n"]


def test_held_lines_are_written_when_the_work_fails(logger, monkeypatch):
    stream = counting_stderr(monkeypatch)
    with pytest.raises(RuntimeError), lines_held():
        logger.info("before the failure")
        raise RuntimeError("the database is away")
    assert stream.writes == ["INFO test.local.logs: before the failure\n"]


def test_the_recorder_records_each_batch_inside_its_record_logging():
    """``InProcessDispatch`` enters ``record_logging`` around each batch it records (local mode's
    wiring passes ``lines_held``)."""
    from contextlib import contextmanager

    from scheduler.runner.in_process import InProcessDispatch

    events: list[str] = []

    @contextmanager
    def around() -> Iterator[None]:
        events.append("enter")
        yield
        events.append("exit")

    class Recording:
        lease_margin_seconds = 30.0
        take_slot = keep_waiting = None

        def record(self, batch: list) -> None:
            events.append(f"record {len(batch)}")

    from types import SimpleNamespace

    dispatch = InProcessDispatch(Recording(), record_logging=around)  # type: ignore[arg-type]
    try:
        dispatch._record([SimpleNamespace(lock_token="a"), SimpleNamespace(lock_token="b")])  # type: ignore[list-item]
    finally:
        dispatch.close()
    assert events == ["enter", "record 2", "exit"]


def test_a_warning_or_an_error_says_when_and_an_info_line_stays_as_it_was():
    formatter = LocalFormatter()

    def line(level: int, message: str, **extra) -> str:
        record = logging.makeLogRecord({"name": "scheduler.x", "levelno": level, "levelname": logging.getLevelName(level),
                                        "msg": message, "created": 1796549400.085, **extra})  # fmt: skip
        return formatter.format(record)

    assert line(logging.INFO, "job created", job_id="j1") == "INFO scheduler.x: job created job_id=j1"
    assert line(logging.WARNING, "execution lost", job_id="j1") == (
        "WARNING scheduler.x: execution lost job_id=j1 at=2026-12-06T09:30:00.085Z"
    )
    assert line(logging.ERROR, "the database is unavailable").endswith(" at=2026-12-06T09:30:00.085Z")
