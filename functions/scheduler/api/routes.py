"""The route table of the API: every method and path, the operation (route function) serving
it and the parameters it reads. One table, from which the rest is derived: the routers'
decorators (``rule``), the 405 answers (``allowed_methods``), the OpenAPI check of the tests and
the API Gateway resources and methods of ``infra/api.py``.

Standard library only: the infrastructure code loads this file by path, without the
``scheduler`` package and its dependencies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """One method of one path. ``path`` is in OpenAPI form (``/v1/jobs/{job_id}``)."""

    method: str
    path: str
    operation: str
    body: bool = False  # takes a JSON object as its body
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    # Needs no caller identity (probes call it unsigned): API Gateway answers it itself.
    anonymous: bool = False

    @property
    def path_parameters(self) -> tuple[str, ...]:
        """The names of the path's ``{parameters}``."""
        return tuple(re.findall(r"\{(\w+)\}", self.path))


_JOB = "/v1/jobs/{job_id}"
_CALENDAR = "/v1/calendars/{name}"
_ALERT_RULE = "/v1/alert-rules/{name}"

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "health", anonymous=True),
    Route("GET", "/v1/jobs", "list_jobs", query=("state", "tag", "name_prefix", "limit", "cursor")),
    Route("POST", "/v1/jobs", "create_job", body=True),
    # Bulk actions (issue 33): static paths beside /v1/jobs/{job_id}, which takes no POST.
    Route("POST", "/v1/jobs/pause", "pause_jobs", body=True),
    Route("POST", "/v1/jobs/resume", "resume_jobs", body=True),
    Route("GET", _JOB, "get_job"),
    Route("PUT", _JOB, "replace_job", body=True, headers=("If-Match",)),
    Route("PATCH", _JOB, "patch_job", body=True, headers=("If-Match",)),
    Route("DELETE", _JOB, "delete_job"),
    Route("POST", f"{_JOB}/pause", "pause_job"),
    Route("POST", f"{_JOB}/resume", "resume_job"),
    Route("POST", f"{_JOB}/run", "run_job"),
    Route("POST", f"{_JOB}/backfill", "backfill_job", body=True),
    Route("GET", f"{_JOB}/executions", "list_executions", query=("status", "limit", "cursor")),
    Route("GET", f"{_JOB}/changes", "list_changes", query=("limit", "cursor")),
    Route("GET", "/v1/executions", "list_owner_executions", query=("status", "job_id", "since", "limit", "cursor")),
    Route("GET", "/v1/executions/{execution_id}", "get_execution"),
    Route("POST", "/v1/schedules/preview", "preview_schedule", body=True),
    Route("GET", "/v1/calendars", "list_calendars", query=("limit", "cursor")),
    Route("POST", "/v1/calendars", "create_calendar", body=True),
    Route("GET", _CALENDAR, "get_calendar"),
    Route("PUT", _CALENDAR, "replace_calendar", body=True, headers=("If-Match",)),
    Route("DELETE", _CALENDAR, "delete_calendar"),
    Route("GET", f"{_CALENDAR}/changes", "list_calendar_changes", query=("limit", "cursor")),
    Route("GET", "/v1/alerts", "list_alerts", query=("job_id", "status", "limit", "cursor")),
    Route("GET", "/v1/alert-rules", "list_alert_rules", query=("limit", "cursor")),
    Route("GET", _ALERT_RULE, "get_alert_rule"),
    Route("PUT", _ALERT_RULE, "put_alert_rule", body=True, headers=("If-Match",)),
    Route("DELETE", _ALERT_RULE, "delete_alert_rule"),
    Route("GET", f"{_ALERT_RULE}/changes", "list_alert_rule_changes", query=("limit", "cursor")),
)

_BY_OPERATION = {route.operation: route for route in ROUTES}


def rule(operation: str) -> tuple[str, str]:
    """``(rule, method)`` of an operation, for ``router.route``: the path in the resolver's
    form (``/v1/jobs/<job_id>``)."""
    route = _BY_OPERATION[operation]
    return re.sub(r"\{(\w+)\}", r"<\1>", route.path), route.method


def _pattern(path: str) -> re.Pattern[str]:
    # Trailing slashes are tolerated, as the resolver does; a parameter is one segment.
    parts = re.split(r"\{\w+\}", path)
    return re.compile("^" + "[^/]+".join(re.escape(part) for part in parts) + r"/*\Z")


_PATHS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (_pattern(path), tuple(sorted(route.method for route in ROUTES if route.path == path)))
    for path in dict.fromkeys(route.path for route in ROUTES)
)


def allowed_methods(path: str) -> tuple[str, ...]:
    """The methods a path of the API answers, sorted (empty: no such resource)."""
    for pattern, methods in _PATHS:
        if pattern.match(path or ""):
            return methods
    return ()


_STATIC_PATHS = tuple(_pattern(route.path) for route in ROUTES if "{" not in route.path)


def fixed_path_methods(path: str) -> tuple[str, ...]:
    """The methods of a path without parameters (``/v1/jobs/pause``), sorted; empty for any
    other. Such a path also has the shape of a parameter's (``/v1/jobs/{job_id}``), whose routes
    would answer its other methods with a 404 rather than a 405."""
    if any(pattern.match(path or "") for pattern in _STATIC_PATHS):
        return allowed_methods(path)
    return ()
