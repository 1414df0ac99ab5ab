"""``scheduler executions get ID`` shows every field of the API's execution: each has its row,
``-`` when null or absent (the fields are read from the API's answer model, so a field added to
the contract cannot be left out of the CLI)."""

from __future__ import annotations

from typing import Any

from scheduler.api.serialize import Execution as ApiExecution
from scheduler.cli.output import format_execution_details
from tests.unit.test_cli import api, clean_env, execution, run  # noqa: F401 (fixtures)


def _sample(prop: dict[str, Any]) -> Any:
    """A value of an answer model's property, not null."""
    kind = next(k for k in prop.get("anyOf", [prop]) if k.get("type") != "null")
    if "enum" in kind:
        return kind["enum"][-1]
    if kind.get("format") == "date-time":
        return "2031-01-02T03:04:05Z"
    return {"integer": 987654, "string": "sentinel", "object": {"vars": {"k": "sentinel"}}}[kind["type"]]


def _labels(text: str) -> list[str]:
    return [line.partition(":")[0] for line in text.splitlines() if not line.startswith("  ")]


def test_every_field_of_the_apis_execution_has_its_row():
    samples = {name: _sample(prop) for name, prop in ApiExecution.model_json_schema()["properties"].items()}
    empty = format_execution_details({})
    assert _labels(format_execution_details(samples)) == _labels(empty)  # a null field keeps its row
    assert all(line.endswith("  -") for line in empty.splitlines() if not line.startswith("trigger"))
    for name, value in samples.items():
        assert format_execution_details({name: value}) != empty, f"{name} is not shown"


def test_a_field_the_cli_does_not_know_is_shown_too():
    rows = [line.split(":", 1) for line in format_execution_details({"new_field": {"a": 1}}).splitlines()]
    assert ["new field", '{"a": 1}'] in [[label, value.strip()] for label, value in rows]


def _get(api, capsys, wanted: dict[str, Any]) -> dict[str, str]:
    api.on("GET", f"/v1/executions/{wanted['id']}", {**wanted, "job_name": "nightly"})
    assert run(api, "executions", "get", wanted["id"]) == 0
    assert [r.path for r in api.requests][-1] == f"/v1/executions/{wanted['id']}"  # one call
    out = capsys.readouterr().out
    return {label.strip(): value.strip() for label, _, value in (line.partition(":") for line in out.splitlines())}


def test_a_skipped_execution_shows_why_and_how_many(api, capsys):
    skipped = execution(
        3, status="skipped", http_status=None, duration_ms=None, skip_reason="paused", skipped_count=3600
    )
    rows = _get(api, capsys, skipped)
    assert rows["skip reason"] == "paused" and rows["skipped count"] == "3600"
    assert rows["waited"] == "-" and rows["waited for"] == "-" and rows["overrides"] == "-"


def test_a_delivery_that_waited_shows_its_wait(api, capsys):
    waited = execution(4, waited_ms=1500, waited_for="max_in_flight 5 of billing-api")
    rows = _get(api, capsys, waited)
    assert rows["waited"] == "1.5s" and rows["waited for"] == "max_in_flight 5 of billing-api"
    assert rows["skip reason"] == "-" and rows["skipped count"] == "-"


def test_a_chained_shifted_manual_run_shows_its_cause_calendar_and_overrides(api, capsys):
    chained = execution(
        5,
        trigger="chain",
        caused_by="e1",
        caused_by_job_id="job-1",
        shifted_from="2026-12-25T09:00:00Z",
        excluded_by="uk",
        overrides={"vars": {"region": "eu"}},
    )
    rows = _get(api, capsys, chained)
    assert rows["caused by"] == "e1" and rows["caused by job"] == "job-1"
    assert rows["shifted from"] == "2026-12-25T09:00:00Z" and rows["excluded by"] == "uk"
    assert rows["overrides"] == '{"vars": {"region": "eu"}}'


def test_get_walks_the_listing_against_an_api_without_the_route_and_says_when_none_has_it(api, capsys):
    wanted = execution(6)
    api.on("GET", "/v1/executions", {"executions": [execution(7), wanted], "next_cursor": None})
    assert run(api, "executions", "get", wanted["id"]) == 0  # the route answers 404 "no route": walked
    assert [r.path for r in api.requests][-2:] == [f"/v1/executions/{wanted['id']}", "/v1/executions"]
    capsys.readouterr()
    api.on("GET", "/v1/executions/.*", {"error": {"code": "not_found", "message": "no such execution"}}, 404)
    assert run(api, "executions", "get", wanted["id"]) == 3  # the route says none has it: no walk
    assert [r.path for r in api.requests][-1] == f"/v1/executions/{wanted['id']}"
    assert "no execution" in capsys.readouterr().err
