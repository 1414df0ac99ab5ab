"""A client of the scheduler's HTTP API (base path ``/v1``), used by the ``scheduler`` CLI.

Requests are signed with SigV4 (botocore's ``SigV4Auth``, service ``execute-api``, the normal
AWS credential chain: environment, ``--profile``/``AWS_PROFILE``, SSO, instance roles...) when
the endpoint is AWS (its host ends in ``.amazonaws.com``) or when asked (``sigv4=True``, for a
local server started with ``--auth sigv4``); otherwise they go unsigned.

Query strings are built already in SigV4 canonical form (every character but ``A-Za-z0-9-_.~``
percent-encoded, ``%20`` for a space), so that the query botocore signs is the query API Gateway
checks.

Errors: an answer of 4xx/5xx raises ``ApiCallFailed`` (with the API's error envelope parsed); a
network failure raises ``ConnectionFailed``; a signed request without credentials raises
``NoCredentials``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from scheduler.core.errors import SchedulerError

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"
ENDPOINT_ENV = "SCHEDULER_ENDPOINT"
SERVICE = "execute-api"
API_PREFIX = "/v1"
DEFAULT_TIMEOUT = 30.0
MAX_PAGES = 10_000

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# https://{api-id}.execute-api.{region}.amazonaws.com, or a VPC endpoint's
# {api-id}-{vpce-id}.execute-api.{region}.vpce.amazonaws.com
_EXECUTE_API_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?$")


class ClientError(SchedulerError):
    """Base of the errors of this module (a ``SchedulerError``, as the CLI catches them)."""


class ApiCallFailed(ClientError):
    """The API answered an error status; ``code``/``message``/``details`` are its envelope's.
    (The client's own name for it: ``scheduler.api.errors.ApiError`` is the server's.)"""

    def __init__(
        self, status: int, code: str, message: str, details: list[dict[str, Any]] | None = None, body: Any = None
    ):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details or [])
        self.body = body


class ConnectionFailed(ClientError):
    """The API could not be reached (refused, DNS, TLS, timeout...)."""


class NoCredentials(ClientError):
    """A request must be signed and the AWS credential chain found no credentials."""


class JobNotFound(ClientError):
    """No job has this name (name lookups only; an unknown id is an ``ApiCallFailed`` 404)."""


def is_job_id(value: str) -> bool:
    """Whether ``value`` is a job id (a UUID in its canonical 8-4-4-4-12 form)."""
    return bool(_UUID.match(value))


def is_aws_endpoint(endpoint: str) -> bool:
    """Whether an endpoint is served by AWS (host ending in ``.amazonaws.com``/``.amazonaws.com.cn``)."""
    host = (urlsplit(endpoint).hostname or "").lower().rstrip(".")
    return host.endswith(".amazonaws.com") or host.endswith(".amazonaws.com.cn")


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


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


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
        return ApiCallFailed(
            status, str(err.get("code") or _reason(status)), str(err.get("message") or ""), details, body
        )
    if isinstance(body, dict):
        message = body.get("message") or body.get("Message")
        if isinstance(message, str):
            return ApiCallFailed(status, _reason(status), message, [], body)
    excerpt = " ".join((text or "").split())[:200]
    return ApiCallFailed(status, _reason(status), excerpt or f"HTTP {status}", [], body)


class SchedulerClient:
    """The HTTP API of the scheduler, one method per route.

    ``endpoint``: the API's base URL, with the stage if any (``https://abc.execute-api.
    eu-west-1.amazonaws.com/prod``); the ``/v1`` routes are appended to it. ``sigv4``: None signs
    only AWS endpoints, True/False force it. ``region``: the signing region (default: the one in
    an ``execute-api`` host name, else ``AWS_REGION``, else the AWS config chain, else
    ``us-east-1``). ``profile``: the AWS profile of the credential chain. ``credentials``:
    botocore credentials to sign with, instead of the chain (tests).
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        region: str | None = None,
        profile: str | None = None,
        sigv4: bool | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
        credentials: Any = None,
        user_agent: str = "scheduler-cli/0.1",
    ):
        endpoint = (endpoint or os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).strip()
        if "://" not in endpoint:
            endpoint = "http://" + endpoint
        parts = urlsplit(endpoint)
        if parts.query or parts.fragment:
            raise ValueError(f"an endpoint has no query or fragment: {endpoint}")
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {endpoint}")
        # botocore signs the host name in lower case: send it so
        self.endpoint = parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower()).geturl().rstrip("/")
        self.sigv4 = is_aws_endpoint(endpoint) if sigv4 is None else sigv4
        self.profile = profile
        self.timeout = timeout
        self.http = session or requests.Session()
        self.user_agent = user_agent
        self._region = region
        self._credentials = credentials
        self._botocore_session: Any = None

    # -- signing -------------------------------------------------------------------------------

    def _session(self) -> Any:
        if self._botocore_session is None:
            import botocore.session

            self._botocore_session = botocore.session.Session(profile=self.profile)
        return self._botocore_session

    @property
    def region(self) -> str:
        """The region requests are signed for."""
        if not self._region:
            region = region_of_endpoint(self.endpoint) or os.environ.get("AWS_REGION")
            if not region:
                try:
                    region = self._session().get_config_variable("region")
                except Exception:  # a broken config file or an unknown profile: fall back
                    region = None
            self._region = region or "us-east-1"
        return self._region

    def credentials(self) -> Any:
        """The frozen credentials of the AWS credential chain (``NoCredentials`` when none)."""
        if self._credentials is None:
            try:
                creds = self._session().get_credentials()
            except Exception as exc:  # ProfileNotFound, a broken SSO cache...
                raise NoCredentials(f"cannot load AWS credentials: {exc}") from None
            if creds is None:
                raise NoCredentials(
                    "no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or --profile)"
                )
            self._credentials = creds
        creds = self._credentials
        return creds.get_frozen_credentials() if hasattr(creds, "get_frozen_credentials") else creds

    def _sign(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=body or b"", headers=dict(headers))
        SigV4Auth(self.credentials(), SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())

    # -- transport -----------------------------------------------------------------------------

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """The full URL of an API path (``/v1/...``) with its query."""
        qs = encode_query(query)
        return f"{self.endpoint}{path}" + (f"?{qs}" if qs else "")

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request; the parsed JSON answer (None when empty) or ``ApiCallFailed``."""
        url = self.url(path, query)
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        signed_headers = {"Accept": "application/json"}
        if data is not None:
            signed_headers["Content-Type"] = "application/json"
        signed_headers.update(headers or {})
        if self.sigv4:
            signed_headers = self._sign(method, url, signed_headers, data)
        send_headers = {"User-Agent": self.user_agent, **signed_headers}
        try:
            response = self.http.request(
                method, url, data=data, headers=send_headers, timeout=self.timeout, allow_redirects=False
            )
        except requests.RequestException as exc:
            raise ConnectionFailed(f"cannot connect to {self.endpoint}: {_short(exc)}") from None
        text = response.content.decode("utf-8", "replace")
        if response.status_code >= 400:
            raise error_from_response(response.status_code, text)
        if response.status_code >= 300:
            raise error_from_response(response.status_code, text or f"redirected to {response.headers.get('Location')}")
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError:
            raise ApiCallFailed(
                response.status_code, "invalid_response", f"the answer is not JSON: {' '.join(text.split())[:200]}"
            ) from None

    # -- jobs ----------------------------------------------------------------------------------

    @staticmethod
    def _job_path(job_id: str, suffix: str = "") -> str:
        return f"{API_PREFIX}/jobs/{quote(job_id, safe='')}{suffix}"

    def create_job(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/jobs``: the new job."""
        return self.request("POST", f"{API_PREFIX}/jobs", body=spec)

    def list_jobs(
        self,
        *,
        state: str | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``GET /v1/jobs``: one page, ``{"jobs": [...], "next_cursor": ...}``."""
        return _expect_list(
            self.request(
                "GET",
                f"{API_PREFIX}/jobs",
                query={"state": state, "tag": tag, "name_prefix": name_prefix, "limit": limit, "cursor": cursor},
            ),
            "jobs",
        )

    def iter_job_pages(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_jobs``, following ``next_cursor``."""
        return self._pages(self.list_jobs, filters)

    def get_job(self, job_id: str) -> dict[str, Any]:
        """``GET /v1/jobs/{id}``."""
        return _expect_job(self.request("GET", self._job_path(job_id)))

    def replace_job(self, job_id: str, spec: Mapping[str, Any], *, if_match: str | int | None = None) -> dict[str, Any]:
        """``PUT /v1/jobs/{id}``: a full definition; ``If-Match`` when ``if_match`` is given."""
        return self.request("PUT", self._job_path(job_id), body=spec, headers=_if_match(if_match))

    def patch_job(self, job_id: str, patch: Mapping[str, Any], *, if_match: str | int | None = None) -> dict[str, Any]:
        """``PATCH /v1/jobs/{id}``: a JSON merge patch (``null`` removes a field)."""
        return self.request("PATCH", self._job_path(job_id), body=patch, headers=_if_match(if_match))

    def delete_job(self, job_id: str) -> None:
        """``DELETE /v1/jobs/{id}`` (and its executions)."""
        self.request("DELETE", self._job_path(job_id))

    def pause_job(self, job_id: str) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/pause``: the job."""
        return self.request("POST", self._job_path(job_id, "/pause"))

    def resume_job(self, job_id: str) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/resume``: the job."""
        return self.request("POST", self._job_path(job_id, "/resume"))

    def run_job(self, job_id: str) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/run``: ``{"job_id", "status": "queued", "requested_at", "job"}``."""
        return self.request("POST", self._job_path(job_id, "/run"))

    # -- executions ----------------------------------------------------------------------------

    def list_executions(
        self, job_id: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /v1/jobs/{id}/executions``: one page, ``{"executions": [...], "next_cursor": ...}``."""
        return _expect_list(
            self.request(
                "GET", self._job_path(job_id, "/executions"), query={"status": status, "limit": limit, "cursor": cursor}
            ),
            "executions",
        )

    def iter_execution_pages(self, job_id: str, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_executions``, following ``next_cursor``."""
        return self._pages(lambda **kw: self.list_executions(job_id, **kw), filters)

    def list_all_executions(
        self,
        *,
        status: str | None = None,
        job_id: str | None = None,
        since: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``GET /v1/executions``: one page of the caller's executions across jobs, newest first."""
        path = f"{API_PREFIX}/executions"
        with _route_missing_on_404("GET", path, self.endpoint):
            answer = self.request(
                "GET",
                path,
                query={"status": status, "job_id": job_id, "since": since, "limit": limit, "cursor": cursor},
            )
        return _expect_list(answer, "executions")

    def iter_all_execution_pages(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_all_executions``, following ``next_cursor``."""
        return self._pages(self.list_all_executions, filters)

    # -- schedules -----------------------------------------------------------------------------

    def preview_schedule(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/schedules/preview``: ``{"occurrences": [...]}``."""
        path = f"{API_PREFIX}/schedules/preview"
        with _route_missing_on_404("POST", path, self.endpoint):
            answer = self.request("POST", path, body=spec)
        if not isinstance(answer, dict) or not isinstance(answer.get("occurrences"), list):
            raise not_scheduler(answer)
        return answer

    # -- helpers -------------------------------------------------------------------------------

    def pages(self, fetch: Any, filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every page of a listing call ``fetch(**filters, cursor=...)``, following ``next_cursor``."""
        return self._pages(fetch, dict(filters))

    @staticmethod
    def _pages(fetch: Any, filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
        cursor, seen = filters.pop("cursor", None), set()
        for _ in range(MAX_PAGES):
            page = fetch(**filters, cursor=cursor)
            yield page
            cursor = page.get("next_cursor") if isinstance(page, dict) else None
            if not cursor or cursor in seen:
                return
            seen.add(cursor)

    def find_job_by_name(self, name: str) -> dict[str, Any]:
        """The job named exactly ``name`` (looked up with ``name_prefix``), or ``JobNotFound``."""
        for page in self.iter_job_pages(name_prefix=name, limit=200):
            for job in page.get("jobs") or []:
                if job.get("name") == name:
                    return job
        raise JobNotFound(f"no job named {name!r}")

    def resolve_job_id(self, id_or_name: str) -> str:
        """A job id as is; a name looked up (``JobNotFound`` when no job has it)."""
        if is_job_id(id_or_name):
            return id_or_name.lower()
        return str(self.find_job_by_name(id_or_name)["id"])


@contextmanager
def _route_missing_on_404(method: str, path: str, endpoint: str) -> Iterator[None]:
    """A 404 of a route without ids can only mean the server lacks the route: say so."""
    try:
        yield
    except ApiCallFailed as exc:
        if exc.status == 404:
            raise ApiCallFailed(
                404,
                exc.code,
                f"the API at {endpoint} has no {method} {path} (a server older than this client?)",
                exc.details,
                exc.body,
            ) from None
        raise


def not_scheduler(answer: Any) -> ApiCallFailed:
    """The error of an answer that is not the scheduler API's (another service on the endpoint)."""
    excerpt = " ".join(json.dumps(answer, ensure_ascii=False).split())[:120]
    return ApiCallFailed(200, "invalid_response", f"the endpoint does not answer as the scheduler API: {excerpt}")


def _expect_list(answer: Any, key: str) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get(key), list):
        raise not_scheduler(answer)
    return answer


def _expect_job(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
        raise not_scheduler(answer)
    return answer


def _if_match(version: str | int | None) -> dict[str, str]:
    if version is None or version == "":
        return {}
    text = str(version).strip()
    if text != "*" and not text.startswith(('"', "W/")):
        text = f'"{text}"'
    return {"If-Match": text}


def _short(exc: Exception) -> str:
    """A one-line reason of a requests exception (without urllib3's nested reprs)."""
    text = str(exc)
    for marker in (
        "Connection refused",
        "Name or service not known",
        "nodename nor servname",
        "timed out",
        "Temporary failure in name resolution",
        "CERTIFICATE_VERIFY_FAILED",
    ):
        if marker in text:
            return marker.lower() if marker != "CERTIFICATE_VERIFY_FAILED" else "TLS certificate verification failed"
    return " ".join(text.split())[:200]


__all__ = [
    "ApiCallFailed",
    "ClientError",
    "ConnectionFailed",
    "DEFAULT_ENDPOINT",
    "JobNotFound",
    "NoCredentials",
    "SchedulerClient",
    "encode_query",
    "error_from_response",
    "is_aws_endpoint",
    "is_job_id",
    "region_of_endpoint",
]
