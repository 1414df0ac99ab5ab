"""The scheduler API's wire rules, shared by every client of it (``scheduler.client``, the
``Job`` construct's function): the errors its answers become, query strings in SigV4's
canonical form, ``If-Match``, job ids and AWS endpoints. Standard library only: the construct's
function runs where neither ``requests`` nor pydantic is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

from scheduler.core.errors import NO_SUCH_EXECUTION, SchedulerError  # noqa: F401 (the clients' name for it)

API_PREFIX = "/v1"
SERVICE = "execute-api"

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
# https://{api-id}.execute-api.{region}.amazonaws.com, or a VPC endpoint's
# {api-id}-{vpce-id}.execute-api.{region}.vpce.amazonaws.com
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?\Z")


class ClientError(SchedulerError):
    """Base of the client's errors (a ``SchedulerError``, as the CLI catches them)."""


class ApiCallFailed(ClientError):
    """The API answered an error status; ``code``/``message``/``details`` are its envelope's.
    (The client's own name for it: ``scheduler.api.errors.ApiError`` is the server's.)

    ``field`` is the first field the API named (``"schedule"``, ``"target.url"``), ``fields``
    every one; a subclass says which kind of refusal it is (``InvalidRequest`` for a 400, ...).
    """

    def __init__(
        self, status: int, code: str, message: str, details: list[dict[str, Any]] | None = None, body: Any = None
    ):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details or [])
        self.body = body

    @property
    def fields(self) -> list[str]:
        """The fields the API named, in its order (dotted paths: ``target.auth.token``)."""
        return [str(d["field"]) for d in self.details if d.get("field")]

    @property
    def field(self) -> str | None:
        """The first field the API named, or None."""
        fields = self.fields
        return fields[0] if fields else None


class InvalidRequest(ApiCallFailed):
    """400: the request was refused (a field missing, unknown, out of its limits...)."""


class AccessDenied(ApiCallFailed):
    """403: no identity, or a signature the API refused."""


class ResourceNotFound(ApiCallFailed):
    """404: no such job for this caller (absent, or another principal's), or no such route."""


class Conflict(ApiCallFailed):
    """409 (the name is taken) or 412 (``If-Match`` names another version)."""


class ServerError(ApiCallFailed):
    """5xx: a fault of the API's."""


class ConnectionFailed(ClientError):
    """The API could not be reached (refused, DNS, TLS, timeout...)."""


class NoCredentials(ClientError):
    """A request must be signed and the AWS credential chain found no credentials."""


class JobNotFound(ClientError):
    """No job has this name (name lookups only; an unknown id is a ``ResourceNotFound``)."""


class ExecutionNotFound(ClientError):
    """No execution of the caller's has this id (among those the lookup read)."""


def is_job_id(value: str) -> bool:
    """Whether ``value`` is a job id (a UUID in its canonical 8-4-4-4-12 form)."""
    return bool(_UUID.match(value))


def is_aws_endpoint(endpoint: str) -> bool:
    """Whether an endpoint is served by AWS (host ending in ``.amazonaws.com``/``.amazonaws.com.cn``)."""
    host = (urlsplit(endpoint).hostname or "").lower().rstrip(".")
    return host.endswith(".amazonaws.com") or host.endswith(".amazonaws.com.cn")


def base_url(endpoint: str) -> str:
    """An endpoint as requests go to it (``http://`` when it names no scheme; scheme and host in
    lower case, as botocore signs the host; no trailing ``/``); ``ValueError`` saying what is
    wrong with one that is not an http(s) URL without query or fragment, or has a bad port."""
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    parts = urlsplit(endpoint)
    if parts.query or parts.fragment:
        raise ValueError(f"an endpoint has no query or fragment: {endpoint}")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {endpoint}")
    try:
        parts.port  # noqa: B018 - it checks the port (urlsplit reads it lazily)
    except ValueError:
        raise ValueError(f"the port is not a number from 0 to 65535: {endpoint}") from None
    return parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower()).geturl().rstrip("/")


def region_of_endpoint(endpoint: str) -> str | None:
    """The region in an ``execute-api`` host name (``abc.execute-api.eu-west-1.amazonaws.com``)."""
    match = _EXECUTE_API_HOST.search((urlsplit(endpoint).hostname or "").lower().rstrip("."))
    return match.group(1) if match else None


def encode_query(params: Mapping[str, Any] | None) -> str:
    """A query string in SigV4 canonical form: sorted pairs, RFC 3986 encoding; None values left out."""
    if not params:
        return ""
    pairs = []
    for key, value in params.items():
        if value is None:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, bool):
                v = "true" if v else "false"
            pairs.append((quote(str(key), safe="-_.~"), quote(str(v), safe="-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


# The answers a client sends its request again after (``retry_delay``), by method: a throttle
# (429: API Gateway refused it before the function ran) whatever the method; the database away
# (503) where sending it again does no more than once (a read, a replacement, a merge patch, a
# deletion); a gateway's timeout or bad answer (502, 504) for reads only (the function may have
# acted). A POST (a creation, a run) only after a throttle.
_RETRIED_AFTER = {
    "GET": frozenset({429, 502, 503, 504}),
    "HEAD": frozenset({429, 502, 503, 504}),
    "PUT": frozenset({429, 503}),
    "PATCH": frozenset({429, 503}),
    "DELETE": frozenset({429, 503}),
}
_THROTTLED_ONLY = frozenset({429})
#: The longest a client waits before sending again, whatever ``Retry-After`` asks.
RETRY_WAIT_CAP_SECONDS = 30.0


def retry_delay(method: str, status: int, retry_after: str | None, attempt: int) -> float | None:
    """How long to wait before sending again a request answered ``status`` (its ``attempt``-th
    retry, from 0), or None when it is not to be sent again: ``Retry-After`` in seconds when the
    answer has one, else 0.5 s doubled each time; at most ``RETRY_WAIT_CAP_SECONDS``."""
    if status not in _RETRIED_AFTER.get(method.upper(), _THROTTLED_ONLY):
        return None
    try:
        wait = float(retry_after) if retry_after else -1.0
    except ValueError:  # an HTTP date: the backoff instead
        wait = -1.0
    if not wait >= 0:  # absent, negative or NaN
        wait = 0.5 * 2**attempt
    return min(wait, RETRY_WAIT_CAP_SECONDS)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def _kind(status: int) -> type[ApiCallFailed]:
    if status == 400:
        return InvalidRequest
    if status in (401, 403):
        return AccessDenied
    if status == 404:
        return ResourceNotFound
    if status in (409, 412):
        return Conflict
    return ServerError if status >= 500 else ApiCallFailed


def api_error(
    status: int, code: str, message: str, details: list[dict[str, Any]] | None = None, body: Any = None
) -> ApiCallFailed:
    """The ``ApiCallFailed`` subclass of ``status`` (``InvalidRequest`` for a 400, ...)."""
    return _kind(status)(status, code, message, details, body)


def error_from_response(status: int, text: str) -> ApiCallFailed:
    """An ``ApiCallFailed`` of an error answer: the API's envelope, API Gateway's ``{"message": ...}``,
    or the first bytes of whatever else came back."""
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        details = [d for d in err.get("details") or [] if isinstance(d, dict)]
        return api_error(status, str(err.get("code") or _reason(status)), str(err.get("message") or ""), details, body)
    if isinstance(body, dict):
        message = body.get("message") or body.get("Message")
        if isinstance(message, str):
            return api_error(status, _reason(status), message, [], body)
    excerpt = " ".join((text or "").split())[:200]
    return api_error(status, _reason(status), excerpt or f"HTTP {status}", [], body)


def not_scheduler(answer: Any) -> ApiCallFailed:
    """The error of an answer that is not the scheduler API's (another service on the endpoint)."""
    excerpt = " ".join(json.dumps(answer, ensure_ascii=False).split())[:120]
    return ApiCallFailed(200, "invalid_response", f"the endpoint does not answer as the scheduler API: {excerpt}")


def expect_list(answer: Any, key: str) -> dict[str, Any]:
    """A listing answer (``{key: [...], "next_cursor": ...}``), else ``not_scheduler``."""
    return expect_fields(answer, **{key: list})


def expect_job(answer: Any) -> dict[str, Any]:
    """A job answer (an object with a string ``id``), else ``not_scheduler``."""
    return expect_fields(answer, id=str)


def expect_fields(answer: Any, **kinds: type | tuple[type, ...]) -> dict[str, Any]:
    """An object answer with each named field of its kind (``name=str``, ``count=int``), else
    ``not_scheduler``: a write answered by another service is never taken for a success."""
    if not isinstance(answer, dict) or not all(isinstance(answer.get(k), kind) for k, kind in kinds.items()):
        raise not_scheduler(answer)
    return answer


def expect_empty(answer: Any) -> None:
    """A write's empty answer (204: a delete), else ``not_scheduler``."""
    if answer is not None:
        raise not_scheduler(answer)


def if_match(version: str | int | None) -> dict[str, str]:
    """The ``If-Match`` header of a version (``3``, ``"3"``, ``W/"3"`` or ``*``); none for None."""
    if version is None or version == "":
        return {}
    text = str(version).strip()
    if text != "*" and not text.startswith(('"', "W/")):
        text = f'"{text}"'
    return {"If-Match": text}


def job_path(job_id: str, suffix: str = "") -> str:
    """``/v1/jobs/{id}`` (and a suffix: ``/pause``), the id percent-encoded."""
    return f"{API_PREFIX}/jobs/{quote(job_id, safe='')}{suffix}"


def execution_path(execution_id: str) -> str:
    """``/v1/executions/{id}``, the id percent-encoded."""
    return f"{API_PREFIX}/executions/{quote(execution_id, safe='')}"
