"""The committed openapi.json is the one the resolver generates."""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.api.openapi import openapi_json, openapi_schema

COMMITTED = Path(__file__).parents[2] / "openapi.json"
REGENERATE = "cd functions && python -m scheduler.api.openapi > ../openapi.json"


def test_committed_openapi_is_current():
    assert COMMITTED.exists(), f"openapi.json is missing: run `{REGENERATE}`"
    assert json.loads(COMMITTED.read_text()) == json.loads(openapi_json()), f"openapi.json is stale: run `{REGENERATE}`"


def test_openapi_documents_every_route_and_the_envelope():
    schema = openapi_schema()
    routes = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    assert routes == {("GET", "/v1/health"), ("POST", "/v1/jobs"), ("GET", "/v1/jobs"), ("GET", "/v1/jobs/{job_id}"),
                      ("PUT", "/v1/jobs/{job_id}"), ("PATCH", "/v1/jobs/{job_id}"), ("DELETE", "/v1/jobs/{job_id}"),
                      ("POST", "/v1/jobs/{job_id}/pause"), ("POST", "/v1/jobs/{job_id}/resume"),
                      ("POST", "/v1/jobs/{job_id}/run"), ("GET", "/v1/jobs/{job_id}/executions"),
                      ("GET", "/v1/executions"), ("POST", "/v1/schedules/preview")}
    create = schema["paths"]["/v1/jobs"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/JobSpec"}
    assert set(create["responses"]) == {"201", "400", "403", "409", "413", "415"}
    assert "422" not in json.dumps(schema["paths"])
    models = set(schema["components"]["schemas"])
    assert {"JobSpec", "Job", "JobList", "Execution", "ExecutionList", "RunAccepted", "ErrorEnvelope"} <= models
