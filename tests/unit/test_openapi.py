"""The committed openapi.json is the one the resolver generates."""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.api.openapi import openapi_json, openapi_schema
from scheduler.api.routes import ROUTES, allowed_methods, rule

COMMITTED = Path(__file__).parents[2] / "openapi.json"
REGENERATE = "cd functions && python -m scheduler.api.openapi > ../openapi.json"


def test_committed_openapi_is_current():
    assert COMMITTED.exists(), f"openapi.json is missing: run `{REGENERATE}`"
    assert json.loads(COMMITTED.read_text()) == json.loads(openapi_json()), f"openapi.json is stale: run `{REGENERATE}`"


def test_openapi_documents_every_route_and_the_envelope():
    schema = openapi_schema()
    routes = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    assert routes == {(route.method, route.path) for route in ROUTES}
    for route in ROUTES:  # each served by the operation the table names
        operation = schema["paths"][route.path][route.method.lower()]
        assert operation["operationId"].startswith(route.operation + "_"), route
    create = schema["paths"]["/v1/jobs"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/JobSpec"}
    assert set(create["responses"]) == {"201", "400", "403", "409", "413", "415", "503"}
    assert set(schema["paths"]["/v1/health"]["get"]["responses"]) == {"200"}  # it reads no database
    assert "422" not in json.dumps(schema["paths"])
    models = set(schema["components"]["schemas"])
    assert {"JobSpec", "Job", "JobList", "Execution", "ExecutionList", "RunAccepted", "ErrorEnvelope"} <= models


def test_the_405_answers_come_from_the_route_table():
    assert allowed_methods("/v1/health") == ("GET",)
    assert allowed_methods("/v1/jobs/") == ("GET", "POST")
    assert allowed_methods("/v1/jobs/abc") == ("DELETE", "GET", "PATCH", "PUT")
    assert allowed_methods("/v1/jobs/abc/pause") == allowed_methods("/v1/jobs/abc/run") == ("POST",)
    assert allowed_methods("/v1/jobs/abc/executions") == ("GET",)
    assert allowed_methods("/v1/executions") == ("GET",) and allowed_methods("/v1/schedules/preview") == ("POST",)
    assert allowed_methods("/v1/jobs/a/b") == allowed_methods("/v2/jobs") == allowed_methods("") == ()
    assert rule("get_job") == ("/v1/jobs/<job_id>", "GET")
