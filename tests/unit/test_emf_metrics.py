"""The EMF documents the Lambdas print are the ones Powertools' ``single_metric`` would print
(the dashboard's and the alarms' metric filters read them), written without its per-point cost."""

from __future__ import annotations

import json

import pytest
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from scheduler.runner.telemetry import EmfMetrics


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
