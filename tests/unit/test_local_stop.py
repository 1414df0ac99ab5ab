"""Local mode's stop: how long it waits for an extra runner process (real processes)."""

from __future__ import annotations

import logging
import multiprocessing
import signal
import time

from scheduler.local.runners import runner_stop_seconds, stop_runner_processes
from scheduler.runner.delivering import LEASE_MARGIN_SECONDS
from scheduler.schema.models import MAX_TIMEOUT_SECONDS


def _finishing_for(seconds: float, ready) -> None:
    """A runner that takes ``seconds`` to finish its deliveries once told to stop (SIGTERM)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(seconds)


def _runner(seconds: float):
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    process = context.Process(target=_finishing_for, args=(seconds, ready), name="scheduler-runner-2")
    process.start()
    assert ready.wait(10)
    process.terminate()
    return process


def test_a_stop_waits_as_long_as_the_longest_delivery():
    """A delivery may take the longest target timeout the API accepts, and its lease margin: a
    runner killed sooner loses deliveries under way (it waited 60 s)."""
    assert runner_stop_seconds() >= MAX_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS


def test_a_runner_finishing_its_deliveries_is_waited_for():
    process = _runner(1.0)
    stop_runner_processes([process], timeout=30)
    assert process.exitcode == 0  # it ended on its own


def test_a_runner_still_running_at_the_deadline_is_killed_after_a_line_naming_it(caplog):
    process = _runner(60.0)
    began = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="scheduler.local.runners"):
        stop_runner_processes([process], timeout=0.5)
    assert process.exitcode == -signal.SIGKILL and time.monotonic() - began < 10
    [line] = [record.getMessage() for record in caplog.records]
    assert "scheduler-runner-2" in line and "killed" in line and "leases expire" in line


def test_a_minute_fan_out_waits_until_just_past_the_next_minute():
    from datetime import UTC, datetime

    from scheduler.local.background import MINUTE_TICK_OFFSET, until_next_minute

    assert until_next_minute(datetime(2030, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC)) == 59.5 + MINUTE_TICK_OFFSET
    assert until_next_minute(datetime(2030, 1, 1, 12, 0, 56, tzinfo=UTC)) == 4 + MINUTE_TICK_OFFSET
