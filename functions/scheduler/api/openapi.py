"""The OpenAPI document of the API, generated from the resolver.

Regenerate the committed copy with ``python -m scheduler.api.openapi > openapi.json`` (run from
``functions/``, or with the package installed); ``tests/unit/test_openapi.py`` fails when it is
stale.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import APIKey, Server

from scheduler.api.app import SchedulerResolver, make_app

TITLE = "Scheduler management API"
VERSION = "1.0.0"
DESCRIPTION = (
    "Schedule HTTP requests and AMQP messages. Every request is signed with AWS SigV4 (API Gateway "
    "IAM auth); each job belongs to the IAM principal that created it. Errors carry "
    '`{"error": {"code", "message", "details": [{"field", "message"}]}}`.'
)
EXAMPLE_JOB = {
    "name": "nightly-report",
    "description": "optional text",
    "tags": ["billing"],
    "schedule": "0 3 * * *",
    "timezone": "Europe/Berlin",
    "target": {
        "type": "http",
        "url": "https://example.com/hook",
        "method": "POST",
        "headers": {"Content-Type": "application/json"},
        "body": '{"at": "{{scheduled_at}}"}',
        "auth": {"type": "basic", "username": "u", "password": "secret"},
        "timeout_seconds": 30,
        "success_codes": [200, 201, 202, 204],
    },
    "retry": {"max_attempts": 4, "min_backoff_seconds": 1, "max_backoff_seconds": 300, "max_age_seconds": 3600},
    "missed_runs": "run_once",
}
EXAMPLE_PATCH = {"description": "moved to 04:30", "schedule": "30 4 * * *", "tags": None}
EXAMPLE_PREVIEW = {"schedule": "30 2 * * *", "timezone": "Europe/Berlin", "after": "2027-03-27T12:00:00Z", "count": 3}
# Powertools' own validation answers (422) are turned into our 400 envelope; drop them.
_UNUSED = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def _unavailable() -> Any:
    raise RuntimeError("documentation only")


def openapi_schema(app: SchedulerResolver | None = None) -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    app = app or make_app(_unavailable, _unavailable, None)
    schema = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=VERSION,
            description=DESCRIPTION,
            servers=[Server(url="/")],
            security_schemes={
                "sigv4": APIKey.model_validate(
                    {
                        "type": "apiKey",
                        "name": "Authorization",
                        "in": "header",
                        "description": "AWS Signature Version 4 (API Gateway IAM auth)",
                    }
                )
            },
            security=[{"sigv4": []}],
        )
    )
    for route, path in schema.get("paths", {}).items():
        for method, operation in path.items():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for answer in responses.values():
                if answer.get("content") == {}:
                    del answer["content"]
            body = operation.get("requestBody", {}).get("content", {})
            if "application/json" in body:
                body["application/json"]["example"] = EXAMPLE_PATCH if method == "patch" else EXAMPLE_JOB
                if route == "/v1/schedules/preview":
                    body["application/json"]["example"] = dict(EXAMPLE_PREVIEW)  # a copy: fuzzers edit examples
            if method == "patch" and "application/json" in body:
                body["application/merge-patch+json"] = body["application/json"]
    components = schema.get("components", {}).get("schemas", {})
    for name in _UNUSED:
        components.pop(name, None)
    return schema


def openapi_json() -> str:
    """The OpenAPI document as committed: indented, stable key order, trailing newline."""
    return json.dumps(openapi_schema(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    print(openapi_json(), end="")


if __name__ == "__main__":
    main()
