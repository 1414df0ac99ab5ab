"""The error envelope of the API and the exception handlers that produce it.

``{"error": {"code": "...", "message": "...", "details": [{"field": "...", "message": "..."}]}}``

Bad input never gives a 5xx. An unexpected error answers 500 with a generic message; it is
logged with its traceback but without the request body (which may hold secrets).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType, RequestValidationError
from pydantic import BaseModel, ValidationError

from scheduler.core.constants import MAX_REQUEST_BODY_BYTES
from scheduler.core.errors import (
    AlertRuleExists,
    AlertRuleNotFound,
    CalendarInUse,
    CalendarNameTaken,
    CalendarNotFound,
    ChainError,
    EditConflict,
    MaskedSecretError,
    NameTaken,
    NotFound,
    ScheduleError,
    SchedulerError,
    StoreUnavailable,
    VersionMismatch,
)
from scheduler.schema.messages import plain_message
from scheduler.schema.models import validation_details

logger = logging.getLogger(__name__)


class ErrorDetail(BaseModel):
    """The field at fault and what is wrong with it."""

    field: str
    message: str


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[ErrorDetail] = []


class ErrorEnvelope(BaseModel):
    """Every error answer of the API."""

    error: ErrorBody


class ApiError(Exception):
    """An error answered with the envelope."""

    status: int = 400
    code: str = "invalid_request"
    message: str = "the request is not valid"

    def __init__(
        self,
        message: str | None = None,
        details: Iterable[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
    ):
        super().__init__(message or self.message)
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        self.message = message or self.message
        self.details = list(details or [])
        self.headers = headers or {}


class BadRequest(ApiError):
    """400: one field at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}", [{"field": field, "message": message}])


class Forbidden(ApiError):
    status, code, message = 403, "forbidden", "the request carries no caller identity"


class NoSuchResource(ApiError):
    status, code, message = 404, "not_found", "no such resource"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"
    message = f"the request body is larger than {MAX_REQUEST_BODY_BYTES} bytes"


class UnsupportedMediaType(ApiError):
    status, code, message = 415, "unsupported_media_type", "send the body as application/json"

    def __init__(self) -> None:
        super().__init__(details=[{"field": "Content-Type", "message": "must be application/json"}])


class MalformedBody(ApiError):
    status, code, message = 400, "malformed_json", "the request body is not valid JSON"

    def __init__(self, message: str | None = None):
        super().__init__(message or self.message, [{"field": "body", "message": message or self.message}])


# How long a caller is asked to wait after a 503 (the database unavailable): about the pool's
# first reconnection attempts.
UNAVAILABLE_RETRY_AFTER_SECONDS = 5


def domain_error(exc: SchedulerError) -> ApiError | None:
    """The API's answer to a domain error (the one place they are mapped to HTTP); None for an
    error that is the server's fault (answered 500)."""
    if isinstance(exc, NotFound):
        return ApiError("no such job", status=404, code="not_found")
    if isinstance(exc, AlertRuleNotFound):
        return ApiError("no such alert rule set", status=404, code="not_found")
    if isinstance(exc, (CalendarNotFound, CalendarNameTaken, CalendarInUse)):
        return _calendar_error(exc)
    if isinstance(exc, NameTaken):
        return ApiError(
            "a job of that name already exists",
            [{"field": "name", "message": "is already taken by another of your jobs"}],
            status=409,
            code="name_taken",
        )
    if isinstance(exc, AlertRuleExists):
        return ApiError(
            f"{exc} (If-None-Match: *)",
            [
                {
                    "field": "If-None-Match",
                    "message": "a rule set of that name exists: replace it, or choose another name",
                }
            ],
            status=412,
            code="version_mismatch",
        )
    if isinstance(exc, VersionMismatch):
        if exc.current is None:  # no rule set of the name: never made, or deleted since its version was read
            return ApiError(
                f"there is no {exc.what} of that name (If-Match)",
                [{"field": "If-Match", "message": f"there is no {exc.what} of that name to match"}],
                status=412,
                code="version_mismatch",
            )
        return ApiError(
            f"the {exc.what} changed: it is at version {exc.current} (If-Match)",
            [{"field": "If-Match", "message": f"the current version is {exc.current}"}],
            headers={"ETag": f'"{exc.current}"'},
            status=412,
            code="version_mismatch",
        )
    if isinstance(exc, EditConflict):
        return ApiError(
            "the job kept changing while it was being edited; send the edit again", status=409, code="conflict"
        )
    if isinstance(exc, (MaskedSecretError, ScheduleError, ChainError)):
        details = [{"field": exc.field, "message": exc.message}]
        return ApiError(_summary(details), details)
    if isinstance(exc, StoreUnavailable):
        logger.warning("database unavailable", extra={"error": str(exc)})
        return ApiError(
            f"{exc}; send the request again shortly",
            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)},
            status=503,
            code="database_unavailable",
        )
    return None


def _calendar_error(exc: SchedulerError) -> ApiError:
    if isinstance(exc, CalendarNotFound):
        return ApiError("no such calendar", status=404, code="not_found")
    if isinstance(exc, CalendarInUse):
        details = [{"field": "jobs", "message": f"{name} ({job_id})"} for job_id, name in exc.jobs]
        return ApiError(f"{exc}: remove it from them first", details, status=409, code="calendar_in_use")
    return ApiError(
        "a calendar of that name already exists",
        [{"field": "name", "message": "is already taken by another of your calendars"}],
        status=409,
        code="name_taken",
    )


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A Powertools ``Response`` carrying the envelope."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=envelope(code, message, details),
        headers=headers or {},
    )


def envelope(code: str, message: str, details: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The error envelope as a dict."""
    return {"error": {"code": code, "message": message, "details": list(details or [])}}


class _Errors:
    """Lets ``validation_details`` read a list of pydantic error dicts."""

    def __init__(self, errors: list[dict[str, Any]]):
        self._errors = errors

    def errors(self, include_url: bool = False) -> list[dict[str, Any]]:
        return self._errors


_PARAM_NAMES = {"if-match": "If-Match"}


def request_validation_details(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """(code, details) of a Powertools ``RequestValidationError``: locations drop their
    ``body``/``query``/``path``/``header`` prefix, so a field reads as in the job JSON."""
    code = "invalid_request"
    details: list[dict[str, str]] = []
    for err in errors:
        loc = list(err.get("loc") or ())
        where = loc.pop(0) if loc else "body"
        kind = err.get("type")
        if kind == "json_invalid":
            code = "malformed_json"
            details.append({"field": "body", "message": "is not valid JSON"})
            continue
        if where == "body" and not loc and kind in ("missing", "model_type", "model_attributes_type", "dict_type"):
            message = "a JSON object is required" if kind == "missing" else "must be a JSON object"
            details.append({"field": "body", "message": message})
            continue
        if where == "body":
            details.extend(validation_details(_Errors([{**err, "loc": tuple(loc)}])))  # type: ignore[arg-type]
            continue
        field = ".".join(str(p) for p in loc) or where
        message = plain_message(err)
        details.append({"field": _PARAM_NAMES.get(field.lower(), field), "message": message})
    return code, details


def _summary(details: list[dict[str, str]]) -> str:
    if not details:
        return "the request is not valid"
    first = details[0]
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return f"{first['field']}: {first['message']}{more}"


def register_error_handlers(app: Any) -> None:
    """Install the exception handlers of the API on a resolver."""

    @app.exception_handler(ApiError)
    def _api_error(exc: ApiError) -> Response:
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(RequestValidationError)
    def _request_validation(exc: RequestValidationError) -> Response:
        code, details = request_validation_details(list(exc.errors()))
        message = "the request body is not valid JSON" if code == "malformed_json" else _summary(details)
        return error_response(400, code, message, details)

    @app.exception_handler(ValidationError)
    def _validation(exc: ValidationError) -> Response:
        details = validation_details(exc)
        return error_response(400, "invalid_request", _summary(details), details)

    @app.exception_handler(RequestUnsupportedContentType)
    def _media_type(exc: RequestUnsupportedContentType) -> Response:
        err = UnsupportedMediaType()
        return error_response(err.status, err.code, err.message, err.details)

    @app.exception_handler(SchedulerError)
    def _domain(exc: SchedulerError) -> Response:
        err = domain_error(exc)
        if err is None:
            return _unexpected(exc)
        return error_response(err.status, err.code, err.message, err.details, err.headers)

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response:
        # The traceback, never the request: bodies and headers may carry secrets.
        logger.error("unhandled error", exc_info=exc, extra={"error_type": type(exc).__name__})
        return error_response(500, "internal_error", HTTPStatus.INTERNAL_SERVER_ERROR.phrase)


_ERROR_DESCRIPTIONS = {
    400: "Bad input: `details` names each field at fault.",
    403: "The request carries no caller identity.",
    404: "No such job (or it belongs to another principal).",
    409: "A conflict, by its `code`: `name_taken` (the caller already has one of that name), `conflict` (an edit "
    "found the job changed by others five times in a row: send it again) or `calendar_in_use` (jobs name it).",
    412: "`If-Match` names another version than the current one (the answer's `ETag`), or "
    "`If-None-Match: *` found one (a rule set of that name; the job or calendar a PUT or PATCH would change).",
    413: "The request body is larger than 1 MiB.",
    415: "The request body is not JSON (`application/json`, or `application/merge-patch+json` for PATCH).",
    503: "The database is unavailable (`database_unavailable`): send the request again after `Retry-After`.",
}


_ETAG = {"description": 'The version, quoted (`"3"`): send it back in `If-Match`.', "schema": {"type": "string"}}
# The answers that carry their version as an ETag (and take it back in If-Match).
_VERSIONED = ("Job", "Calendar", "AlertRuleSet")


def documented(
    status: int,
    model: type[BaseModel] | None,
    description: str,
    *errors: int,
    headers: dict[str, Any] | None = None,
    reads_database: bool = True,
) -> dict[int, Any]:
    """The OpenAPI ``responses`` of a route: its answer and the error answers it can give (a 503
    too when it ``reads_database``). A versioned answer (a job's, a calendar's, a rule set's)
    documents its ``ETag`` header."""
    ok: dict[str, Any] = {"description": description}
    if model is not None:
        ok["content"] = {content_types.APPLICATION_JSON: {"model": model}}
    else:
        ok["content"] = {}
    if model is not None and model.__name__ in _VERSIONED:
        headers = {"ETag": _ETAG, **(headers or {})}
    if headers:
        ok["headers"] = headers
    out: dict[int, Any] = {status: ok}
    # A route that reads the database (every one but the health check) may answer 503.
    for code in (*errors, *((503,) if reads_database else ())):
        out[code] = {
            "description": _ERROR_DESCRIPTIONS[code],
            "content": {content_types.APPLICATION_JSON: {"model": ErrorEnvelope}},
        }
    return out
