"""A client of the scheduler's HTTP API (base path ``/v1``): the Python SDK (``docs/sdk.md``), and
what the ``scheduler`` CLI calls.

Requests are signed with SigV4 (botocore's ``SigV4Auth``, service ``execute-api``, the normal
AWS credential chain: environment, ``--profile``/``AWS_PROFILE``, SSO, instance roles...) when
the endpoint is AWS (its host ends in ``.amazonaws.com``) or when asked (``sigv4=True``, for a
local server started with ``--auth sigv4``); otherwise they go unsigned.

Query strings are built already in SigV4 canonical form (every character but ``A-Za-z0-9-_.~``
percent-encoded, ``%20`` for a space), so that the query botocore signs is the query API Gateway
checks.

Errors: an answer of 4xx/5xx raises an ``ApiCallFailed`` (with the API's error envelope parsed:
``status``, ``code``, ``message``, ``field``/``details``), of the subclass of its kind
(``InvalidRequest`` 400, ``AccessDenied`` 403, ``ResourceNotFound`` 404, ``Conflict`` 409/412,
``ServerError`` 5xx); a network failure raises ``ConnectionFailed``; a signed request without
credentials raises ``NoCredentials``. The wire rules live in ``scheduler.transport.api_wire``,
the records in ``scheduler.transport.api_models``; both are re-exported here.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import requests

from scheduler.transport import api_wire
from scheduler.transport.api_alert_rules import AlertRuleCalls
from scheduler.transport.api_calendars import CalendarCalls
from scheduler.transport.api_job_actions import JobActionCalls
from scheduler.transport.api_models import Execution, Job, JobStats, Page, Retry, RunRequest, execution_timing
from scheduler.transport.api_resources import Executions, Jobs, Schedules
from scheduler.transport.api_wire import (
    API_PREFIX,
    SERVICE,
    AccessDenied,
    ApiCallFailed,
    ClientError,
    Conflict,
    ConnectionFailed,
    ExecutionNotFound,
    InvalidRequest,
    JobNotFound,
    NoCredentials,
    ResourceNotFound,
    ServerError,
    encode_query,
    error_from_response,
    is_aws_endpoint,
    is_job_id,
    job_path,
    not_scheduler,
    region_of_endpoint,
)

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"
ENDPOINT_ENV = "SCHEDULER_ENDPOINT"
DEFAULT_TIMEOUT = 30.0
# How often a request answered 429 (throttled) or 503 (the database away) is sent again
# (``api_wire.retry_delay``: which answers, for which methods, after how long).
DEFAULT_RETRIES = 3
# A listing that has not ended after this many pages is taken for a fault (a server that keeps
# answering new cursors): 20 million jobs at 200 a page, 5 million at the default 50, past any
# real listing, and said within minutes.
MAX_PAGES = 100_000


class SchedulerClient(AlertRuleCalls, CalendarCalls, JobActionCalls):
    """The HTTP API of the scheduler (``docs/sdk.md``).

    Two faces: the typed one, ``client.jobs``, ``client.executions`` and ``client.schedules``
    (``Job`` and ``Execution`` records, iterators over every page), and one method per route
    answering the API's JSON as dicts (``create_job``, ``list_jobs``...), which the CLI prints.

    ``endpoint``: the API's base URL, with the stage if any (``https://abc.execute-api.
    eu-west-1.amazonaws.com/prod``); the ``/v1`` routes are appended to it. ``sigv4``: None signs
    only AWS endpoints, True/False force it. ``region``: the signing region (default: the one in
    an ``execute-api`` host name, else ``AWS_REGION``, else the AWS config chain, else
    ``us-east-1``). ``profile``: the AWS profile of the credential chain. ``credentials``:
    botocore credentials to sign with, instead of the chain (tests). ``retries``: how often a
    request is sent again after a throttle (429, any method) or the database's absence (503; GET,
    PUT, PATCH, DELETE; also 502 and 504 for a GET), after the answer's ``Retry-After`` or a
    backoff from 0.5 s, at most 30 s a wait; 0 never. ``on_retry``: called before each such wait
    with the answer's error, the seconds about to be waited, the retry's number (from 1) and
    ``retries``: the CLI says on stderr why a command is waiting.
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
        retries: int = DEFAULT_RETRIES,
        on_retry: Callable[[ApiCallFailed, float, int, int], None] | None = None,
    ):
        endpoint = (endpoint or os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).strip()
        self.endpoint = api_wire.base_url(endpoint)
        self.sigv4 = is_aws_endpoint(self.endpoint) if sigv4 is None else sigv4
        self.profile = profile
        self.timeout = timeout
        self.http = session or requests.Session()
        self.user_agent = user_agent
        self.retries = retries
        self.on_retry = on_retry
        self._region = region
        self._credentials = credentials
        self._botocore_session: Any = None
        #: The typed API (``docs/sdk.md``): records and page iterators.
        self.jobs = Jobs(self)
        self.executions = Executions(self)
        self.schedules = Schedules(self)

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
        for attempt in range(self.retries + 1):
            response = self._send(method, url, data, signed_headers)
            again = api_wire.retry_delay(method, response.status_code, response.headers.get("Retry-After"), attempt)
            if again is None or attempt == self.retries:
                break
            if self.on_retry is not None:
                text = response.content.decode("utf-8", "replace")
                self.on_retry(error_from_response(response.status_code, text), again, attempt + 1, self.retries)
            time.sleep(again)  # a throttle, or the database away: the same request again (signed anew)
        text = response.content.decode("utf-8", "replace")
        if response.status_code >= 400:
            raise error_from_response(response.status_code, text)
        if response.status_code >= 300:
            raise error_from_response(response.status_code, text or f"redirected to {response.headers.get('Location')}")
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past what can be read
            raise ApiCallFailed(
                response.status_code, "invalid_response", f"the answer is not JSON: {' '.join(text.split())[:200]}"
            ) from None

    def _send(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> requests.Response:
        """One sending of a request, signed now when the client signs (``ConnectionFailed``)."""
        signed = self._sign(method, url, headers, data) if self.sigv4 else headers
        try:
            return self.http.request(
                method,
                url,
                data=data,
                headers={"User-Agent": self.user_agent, **signed},
                timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise ConnectionFailed(f"cannot connect to {self.endpoint}: {_short(exc)}") from None

    # -- jobs ----------------------------------------------------------------------------------

    @staticmethod
    def _job_path(job_id: str, suffix: str = "") -> str:
        return job_path(job_id, suffix)

    def create_job(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/jobs``: the new job."""
        return api_wire.expect_job(self.request("POST", f"{API_PREFIX}/jobs", body=spec))

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
        return api_wire.expect_list(
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
        return api_wire.expect_job(self.request("GET", self._job_path(job_id)))

    def replace_job(self, job_id: str, spec: Mapping[str, Any], *, if_match: str | int | None = None) -> dict[str, Any]:
        """``PUT /v1/jobs/{id}``: a full definition; ``If-Match`` when ``if_match`` is given."""
        answer = self.request("PUT", self._job_path(job_id), body=spec, headers=api_wire.if_match(if_match))
        return api_wire.expect_job(answer)

    def patch_job(self, job_id: str, patch: Mapping[str, Any], *, if_match: str | int | None = None) -> dict[str, Any]:
        """``PATCH /v1/jobs/{id}``: a JSON merge patch (``null`` removes a field)."""
        answer = self.request("PATCH", self._job_path(job_id), body=patch, headers=api_wire.if_match(if_match))
        return api_wire.expect_job(answer)

    def delete_job(self, job_id: str, *, if_match: str | int | None = None) -> None:
        """``DELETE /v1/jobs/{id}`` (and its executions); ``If-Match`` when ``if_match`` is given
        (412, nothing deleted, if the job is at another version)."""
        api_wire.expect_empty(self.request("DELETE", self._job_path(job_id), headers=api_wire.if_match(if_match)))

    # -- executions ----------------------------------------------------------------------------

    def list_executions(
        self, job_id: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /v1/jobs/{id}/executions``: one page, ``{"executions": [...], "next_cursor": ...}``."""
        return api_wire.expect_list(
            self.request(
                "GET", self._job_path(job_id, "/executions"), query={"status": status, "limit": limit, "cursor": cursor}
            ),
            "executions",
        )

    def iter_execution_pages(self, job_id: str, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_executions``, following ``next_cursor``."""
        return self._pages(lambda **kw: self.list_executions(job_id, **kw), filters)

    def list_changes(self, job_id: str, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """``GET /v1/jobs/{id}/changes``: one page of the job's change log, newest first,
        ``{"changes": [...], "next_cursor": ...}`` (kept after the job's delete)."""
        return api_wire.expect_list(
            self.request("GET", self._job_path(job_id, "/changes"), query={"limit": limit, "cursor": cursor}),
            "changes",
        )

    def iter_change_pages(self, job_id: str, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_changes``, following ``next_cursor``."""
        return self._pages(lambda **kw: self.list_changes(job_id, **kw), filters)

    def get_execution(self, execution_id: str) -> dict[str, Any]:
        """``GET /v1/executions/{id}``: one of the caller's executions, whole, with its job's name."""
        return api_wire.expect_fields(self.request("GET", api_wire.execution_path(execution_id)), id=str)

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
        return api_wire.expect_list(answer, "executions")

    def list_alerts(
        self,
        *,
        job_id: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``GET /v1/alerts``: one page of the caller's alert deliveries, newest first."""
        path = f"{API_PREFIX}/alerts"
        with _route_missing_on_404("GET", path, self.endpoint):
            answer = self.request(
                "GET", path, query={"job_id": job_id, "status": status, "limit": limit, "cursor": cursor}
            )
        return api_wire.expect_list(answer, "alerts")

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
        """The pages, to the last (``next_cursor`` null). A cursor answered twice, or a listing
        past ``MAX_PAGES``, is an ``invalid_response`` error: never a listing cut short in silence."""
        cursor, seen = filters.pop("cursor", None), set()
        for _ in range(MAX_PAGES):
            page = fetch(**filters, cursor=cursor)
            yield page
            cursor = page.get("next_cursor") if isinstance(page, dict) else None
            if not cursor:
                return
            if cursor in seen:
                raise ApiCallFailed(200, "invalid_response", "the listing answered a cursor it had answered before")
            seen.add(cursor)
        raise ApiCallFailed(200, "invalid_response", f"the listing did not end after {MAX_PAGES:,} pages")

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
            raise type(exc)(
                404,
                exc.code,
                f"the API at {endpoint} has no {method} {path} (a server older than this client?)",
                exc.details,
                exc.body,
            ) from None
        raise


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
    "API_PREFIX",
    "SERVICE",
    "AccessDenied",
    "ApiCallFailed",
    "ClientError",
    "Conflict",
    "ConnectionFailed",
    "DEFAULT_ENDPOINT",
    "Execution",
    "ExecutionNotFound",
    "InvalidRequest",
    "Job",
    "JobNotFound",
    "JobStats",
    "NoCredentials",
    "Page",
    "ResourceNotFound",
    "Retry",
    "RunRequest",
    "SchedulerClient",
    "ServerError",
    "encode_query",
    "error_from_response",
    "execution_timing",
    "is_aws_endpoint",
    "is_job_id",
    "not_scheduler",
    "region_of_endpoint",
]
