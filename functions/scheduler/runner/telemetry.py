"""Metrics as a small port: CloudWatch EMF documents in Lambda, nothing (or a log line)
in local mode and tests. Metric names live in ``scheduler.core.constants``."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from scheduler.core import constants as c
from scheduler.core.domain import Skip, StartedExecution, Trigger


class Metrics(Protocol):
    """Where the domain code reports its figures."""

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        """Add to a counter (``Count`` unit)."""

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
        """Record a duration in milliseconds."""

    def milliseconds_each(self, name: str, values: Sequence[float], **dimensions: str) -> None:
        """Record several durations with the same dimensions (a group's, in one document)."""

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        """Record a level (backlog, age)."""


class NullMetrics:
    """Drops everything."""

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        pass

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
        pass

    def milliseconds_each(self, name: str, values: Sequence[float], **dimensions: str) -> None:
        pass

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        pass


class MemoryMetrics:
    """Keeps every value, for tests and local mode's counters."""

    def __init__(self) -> None:
        self.values: dict[tuple, list[float]] = defaultdict(list)
        self._lock = threading.Lock()

    def _add(self, name: str, value: float, dimensions: dict[str, str]) -> None:
        with self._lock:
            self.values[(name, tuple(sorted(dimensions.items())))].append(float(value))

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        self._add(name, value, dimensions)

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
        self._add(name, value, dimensions)

    def milliseconds_each(self, name: str, values: Sequence[float], **dimensions: str) -> None:
        for value in values:
            self._add(name, value, dimensions)

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        self._add(name, value, dimensions)

    def total(self, name: str, **dimensions: str) -> float:
        """The sum of a metric's values with exactly these dimensions."""
        return sum(self.values.get((name, tuple(sorted(dimensions.items()))), []))


class EmfMetrics:
    """CloudWatch metrics in the Embedded Metric Format, one EMF document per data point so that
    dimensions (such as an execution's status) can differ between points (``milliseconds_each``:
    one per set of points with the same dimensions, up to ``MAX_VALUES``). The document is the one
    Powertools' ``single_metric`` prints, written here directly: Powertools builds and validates a
    metric set per point, which cost an executor more CPU than its two database statements."""

    units = frozenset({"Count", "Milliseconds", "Seconds"})
    #: The most values one document carries for a metric (the format's limit).
    MAX_VALUES = 100

    def __init__(self, namespace: str, service: str, write: Callable[[str], Any] | None = None):
        self.namespace = namespace
        self.service = service
        self._write = write or write_line

    def _emit(self, name: str, unit: str, value: float | Sequence[float], dimensions: dict[str, str]) -> None:
        if unit not in self.units:
            raise ValueError(f"unit {unit!r} is not one of {sorted(self.units)}")
        document = {
            "_aws": {
                "Timestamp": int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": self.namespace,
                        "Dimensions": [["service", *dimensions]],
                        "Metrics": [{"Name": name, "Unit": unit}],
                    }
                ],
            },
            "service": self.service,
            **dimensions,
            name: [float(v) for v in value] if isinstance(value, Sequence) else [float(value)],
        }
        self._write(json.dumps(document, separators=(",", ":")))

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        self._emit(name, "Count", value, dimensions)

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
        self._emit(name, "Milliseconds", value, dimensions)

    def milliseconds_each(self, name: str, values: Sequence[float], **dimensions: str) -> None:
        for first in range(0, len(values), self.MAX_VALUES):
            self._emit(name, "Milliseconds", values[first : first + self.MAX_VALUES], dimensions)

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        self._emit(name, unit, value, dimensions)


#: The lock of every line a Lambda writes to stdout: its EMF documents (``write_line``) and its
#: log lines (the Powertools handler's, given this lock by ``share_stdout_lock``). CloudWatch Logs
#: reads stdout line by line, and delivery threads count metrics while others log: two lines
#: written at once must never fuse into one.
STDOUT_LOCK = threading.RLock()


def write_line(line: str) -> None:
    """One line on stdout, whole: a single write, under ``STDOUT_LOCK`` (``print`` writes the
    line and its newline apart, and another thread's line could come between them)."""
    with STDOUT_LOCK:
        sys.stdout.write(line + "\n")


def share_stdout_lock(handler: logging.Handler) -> None:
    """Have a log handler that writes to stdout take ``STDOUT_LOCK`` for each record, so that its
    lines and the EMF documents are written one after the other, never into each other."""
    handler.lock = STDOUT_LOCK


def count_skips(metrics: Metrics, skips: Sequence[Skip]) -> None:
    """Count occurrences recorded as skipped: ``SkippedOccurrences`` by ``reason``, the sum of
    their counts (a coalesced row of 3,600 skipped occurrences counts 3,600)."""
    by_reason: dict[str, int] = defaultdict(int)
    for skip in skips:
        by_reason[str(skip.reason)] += skip.count
    for reason, count in by_reason.items():
        metrics.count(c.METRIC_SKIPPED, count, reason=reason)


def own_lateness_ms(execution: StartedExecution) -> float:
    """How late a started execution began (``lateness_ms``) less its wait for its target's slot
    (``waited_ms``): the scheduler's own delay. The wait is the job's own limits' (a rate of one a
    second, a key full of slow deliveries), known to the millisecond, and no sign that the
    scheduler falls behind."""
    return execution.lateness_ms - execution.waited_ms


def count_lateness(metrics: Metrics, executions: Iterable[StartedExecution]) -> None:
    """Count how late each started execution began (``LatenessMs``, one document per trigger,
    each execution a value of it): the scheduler's own lateness (``own_lateness_ms``), so that
    one owner's limits never hold the lateness alarm; their wait is ``SlotWaitMs``
    (``count_slot_wait``)."""
    by_trigger: dict[str, list[float]] = {}
    for execution in executions:
        if execution.trigger == Trigger.BACKFILL:
            continue  # an occurrence of a past range: its age is not the scheduler's lateness
        by_trigger.setdefault(execution.trigger, []).append(max(own_lateness_ms(execution), 0.0))
    for trigger, values in by_trigger.items():
        metrics.milliseconds_each(c.METRIC_LATENESS_MS, values, trigger=trigger)


def count_slot_wait(metrics: Metrics, execution: StartedExecution) -> None:
    """Count how long a limited delivery that has its slot waited for it (``SlotWaitMs``, 0 for
    one that took it at once), from its first hand-back when it was handed back."""
    metrics.milliseconds(c.METRIC_SLOT_WAIT_MS, float(execution.waited_ms))
