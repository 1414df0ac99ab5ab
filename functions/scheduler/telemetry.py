"""Metrics as a small port: CloudWatch EMF through Powertools in Lambda, nothing (or a log line)
in local mode and tests. Metric names live in ``scheduler.constants``."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Protocol


class Metrics(Protocol):
    """Where the domain code reports its figures."""

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        """Add to a counter (``Count`` unit)."""

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
        """Record a duration in milliseconds."""

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        """Record a level (backlog, age)."""


class NullMetrics:
    """Drops everything."""

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        pass

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
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

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        self._add(name, value, dimensions)

    def total(self, name: str, **dimensions: str) -> float:
        """The sum of a metric's values with exactly these dimensions."""
        return sum(self.values.get((name, tuple(sorted(dimensions.items()))), []))


class PowertoolsMetrics:
    """CloudWatch metrics in the Embedded Metric Format, one EMF document per data point so that
    dimensions (such as an execution's status) can differ between points."""

    def __init__(self, namespace: str, service: str):
        self.namespace = namespace
        self.service = service

    def _emit(self, name: str, unit: str, value: float, dimensions: dict[str, str]) -> None:
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        with single_metric(name=name, unit=getattr(MetricUnit, unit), value=value, namespace=self.namespace) as metric:
            metric.add_dimension(name="service", value=self.service)
            for key, val in dimensions.items():
                metric.add_dimension(name=key, value=val)

    def count(self, name: str, value: float = 1, **dimensions: str) -> None:
        self._emit(name, "Count", value, dimensions)

    def milliseconds(self, name: str, value: float, **dimensions: str) -> None:
        self._emit(name, "Milliseconds", value, dimensions)

    def gauge(self, name: str, value: float, unit: str = "Count", **dimensions: str) -> None:
        self._emit(name, unit, value, dimensions)
