"""The API's own words for what pydantic refuses (scheduler.schema.messages): each detail reads
after its field, never pydantic's "String should have at least 1 character"."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.schema.models import JobSpec, validation_details

HTTP = {"type": "http", "url": "https://example.com/h"}


def details(body: dict) -> dict[str, str]:
    with pytest.raises(ValidationError) as error:
        JobSpec.model_validate(body)
    return {d["field"]: d["message"] for d in validation_details(error.value)}


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"name": "", "schedule": "@daily", "target": HTTP}, "name", "must not be empty"),
        ({"name": "a", "schedule": "@daily"}, "target", "is required"),
        ({"name": "a", "schedule": "@daily", "target": {"type": "http"}}, "target.url", "is required"),
        (
            {"name": "a", "schedule": "@daily", "target": {"url": "https://e.com"}},
            "target.type",
            "is required: one of http, amqp",
        ),
        (
            {"name": "a", "schedule": "@daily", "target": HTTP, "retry": {"max_attempts": 0}},
            "retry.max_attempts",
            "must be at least 1",
        ),
        (
            {"name": "a", "schedule": "@daily", "target": HTTP, "retry": {"max_attempts": "3"}},
            "retry.max_attempts",
            "must be a whole number (a JSON integer)",
        ),
        (
            {"name": "a", "schedule": "@daily", "target": HTTP, "colour": "red"},
            "colour",
            "is not a field here (unknown fields are refused)",
        ),
        ({"name": "a", "schedule": "@daily", "target": HTTP, "missed_runs": "never"}, "missed_runs", "must be one of"),
        ({"name": "a", "schedule": "@daily", "target": HTTP, "tags": [""]}, "tags.0", "must not be empty"),
        # a number field's whole bound reads as written, not 86400.0
        (
            {"name": "a", "schedule": "@daily", "target": HTTP, "retry": {"max_backoff_seconds": 86401}},
            "retry.max_backoff_seconds",
            "must be at most 86400",
        ),
        (
            {"name": "a", "schedule": "@daily", "target": HTTP, "limits": {"per_second": 0}},
            "limits.per_second",
            "must be more than 0",
        ),
    ],
)
def test_each_refusal_is_worded_by_the_api(body, field, message):
    found = details(body)
    assert found[field].startswith(message), found
    assert not found[field].startswith(message + ".0"), found
    assert not any("should" in text or "Field required" in text for text in found.values()), found
