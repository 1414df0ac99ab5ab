"""The EMF documents the Lambdas print are the ones Powertools' ``single_metric`` would print
(the dashboard's and the alarms' metric filters read them), written without its per-point cost."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable

import pytest
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from scheduler.runner.telemetry import EmfMetrics, share_stdout_lock


def _powertools(capsys, name: str, unit: str, value: float, dimensions: dict[str, str]) -> dict:
    with single_metric(name=name, unit=getattr(MetricUnit, unit), value=value, namespace="Scheduler") as metric:
        metric.add_dimension(name="service", value="scheduler")
        for key, val in dimensions.items():
            metric.add_dimension(name=key, value=val)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("method", "name", "unit", "value", "dimensions"),
    [
        ("count", "Executions", "Count", 1, {"status": "succeeded"}),
        ("milliseconds", "LatenessMs", "Milliseconds", 12.5, {"trigger": "schedule"}),
        ("gauge", "DueBacklog", "Count", 3, {}),
        ("gauge", "OldestDueAgeSeconds", "Seconds", 0.25, {}),
        ("count", "Deliveries", "Count", 2, {"status": "failed", "target": "http"}),
    ],
)
def test_emf_document_is_the_one_powertools_prints(capsys, method, name, unit, value, dimensions):
    expected = _powertools(capsys, name, unit, value, dimensions)
    lines: list[str] = []
    metrics = EmfMetrics("Scheduler", "scheduler", write=lines.append)
    if method == "gauge":
        metrics.gauge(name, value, unit, **dimensions)
    else:
        getattr(metrics, method)(name, value, **dimensions)
    (line,) = lines
    ours = json.loads(line)
    assert abs(ours["_aws"].pop("Timestamp") - expected["_aws"].pop("Timestamp")) < 5_000
    assert ours == expected


def test_emf_goes_to_stdout_one_line_per_point(capsys):
    EmfMetrics("Scheduler", "scheduler").count("Executions", status="succeeded")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out)["Executions"] == [1.0]


def test_an_unknown_unit_is_refused():
    with pytest.raises(ValueError, match="Bytes"):
        EmfMetrics("Scheduler", "scheduler", write=print).gauge("X", 1, unit="Bytes")


def test_a_groups_durations_share_a_document_of_at_most_a_hundred_values():
    """EMF takes up to 100 values of a metric in one document: a group's lateness is one line
    (each value still counts for the percentiles), not one line per execution."""
    lines: list[str] = []
    metrics = EmfMetrics("Scheduler", "scheduler", write=lines.append)
    metrics.milliseconds_each("LatenessMs", [float(v) for v in range(250)], trigger="schedule")
    documents = [json.loads(line) for line in lines]
    assert [len(d["LatenessMs"]) for d in documents] == [100, 100, 50]
    assert [v for d in documents for v in d["LatenessMs"]] == [float(v) for v in range(250)]
    single: list[str] = []
    EmfMetrics("Scheduler", "scheduler", write=single.append).milliseconds("LatenessMs", 7.0, trigger="schedule")
    for document in documents:  # each the single point's document, but for its values
        expected = json.loads(single[0])
        assert {**document, "LatenessMs": None, "_aws": {**document["_aws"], "Timestamp": 0}} == {
            **expected,
            "LatenessMs": None,
            "_aws": {**expected["_aws"], "Timestamp": 0},
        }


class ChoppyStdout:
    """A stdout whose writes reach the pipe in pieces, letting other threads in between (as an
    unbuffered stream flushing each write does): two lines written at once without a lock come
    out fused."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def write(self, text: str) -> int:
        for start in range(0, len(text), 16):
            self.pieces.append(text[start : start + 16])
            time.sleep(0)
        return len(text)

    def flush(self) -> None:
        pass

    def lines(self) -> list[str]:
        return "".join(self.pieces).splitlines()


def _at_once(*work: Callable[[], None], threads: int = 8) -> None:
    """Each of ``work`` on ``threads`` threads, all started together."""
    start = threading.Barrier(threads * len(work))

    def run(task: Callable[[], None]) -> None:
        start.wait()
        task()

    running = [threading.Thread(target=run, args=(task,)) for task in work for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()


def _whole(line: str) -> bool:
    """A whole EMF document or a whole log line (``log <n>`` or the JSON of one)."""
    if line.startswith("log "):
        return line[4:].isdigit()
    try:
        document = json.loads(line)
    except ValueError:
        return False
    return document.get("message", "").startswith("log ") or document.get("Executions") == [1.0]


def test_emf_lines_and_log_lines_written_by_threads_at_once_never_fuse(monkeypatch):
    """Delivery threads count lateness while others log: every line of stdout stays whole."""
    stdout = ChoppyStdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    metrics = EmfMetrics("Scheduler", "scheduler")
    handler = logging.StreamHandler(stdout)
    share_stdout_lock(handler)
    log = logging.getLogger("tests.emf.threads")
    log.addHandler(handler)
    log.propagate = False
    try:
        _at_once(
            lambda: [metrics.count("Executions", status="succeeded") for _ in range(100)],
            lambda: [log.warning("log %d", n) for n in range(100)],
        )
    finally:
        log.removeHandler(handler)
    lines = stdout.lines()
    assert len(lines) == 1600
    assert [line for line in lines if not _whole(line)] == []


def test_the_lambdas_log_handler_shares_the_lock_of_the_emf_lines(monkeypatch):
    """``route_domain_logs_to`` (every handler module calls it): the Powertools handler's JSON lines,
    a domain logger's included, and the EMF documents never fuse either."""
    from aws_lambda_powertools import Logger

    from scheduler.wiring import route_domain_logs_to

    stdout = ChoppyStdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    domain = logging.getLogger("scheduler")
    kept = (domain.handlers[:], domain.propagate, domain.level)
    logging.getLogger("scheduler.tests.emf")  # a domain logger, as the handler modules' imports make
    try:
        route_domain_logs_to(Logger(service="emf-threads-test", logger_output_stream=stdout))
        metrics = EmfMetrics("Scheduler", "scheduler")
        log = logging.getLogger("scheduler.tests.emf")
        _at_once(
            lambda: [metrics.count("Executions", status="succeeded") for _ in range(50)],
            lambda: [log.info("log %d", n) for n in range(50)],
        )
    finally:
        domain.handlers[:], domain.propagate = kept[0], kept[1]
        domain.setLevel(kept[2])
    lines = stdout.lines()
    assert len(lines) == 800
    assert [line for line in lines if not _whole(line)] == []
