"""The management API: a Powertools ``APIGatewayRestResolver`` with one router per resource.

``make_app`` takes its dependencies (a store provider, a secret box provider, the settings), so
the Lambda handler, local mode and tests each give their own. Before routing, the resolver
checks what must hold for any request: a body of at most 1 MiB (413), UTF-8 JSON text (400,
415), and a caller identity (403; ``/v1/health`` needs none). A path that exists answers 405 to
a method it does not serve.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from scheduler.api import activity, alert_rules, alerts, calendars, changes, executions, jobs, providers
from scheduler.api.cursors import CursorCodec, cursor_key
from scheduler.api.errors import (
    ApiError,
    MalformedBody,
    NoSuchResource,
    PayloadTooLarge,
    UnsupportedMediaType,
    documented,
    envelope,
    error_response,
    register_error_handlers,
)
from scheduler.api.gateway_auth import with_principal
from scheduler.api.identity import require_owner
from scheduler.api.routes import allowed_methods, fixed_path_methods, rule
from scheduler.api.serialize import Health
from scheduler.core.constants import ANSWER_HEADERS, MAX_REQUEST_BODY_BYTES
from scheduler.ports import JobStore
from scheduler.schedules.planning_time import planning_time_limit
from scheduler.secrets import SecretBox

HEALTH_PATH = rule("health")[0]

# The caller of a checked event, or ``Forbidden``.
Identify = Callable[[Mapping[str, Any]], str]

# Powertools' resolver logs the validated route arguments at DEBUG, and those hold the request's
# secrets in plaintext: its DEBUG lines are never emitted, whatever the root logger's level.
logging.getLogger("aws_lambda_powertools.event_handler").setLevel(logging.INFO)


def _loads_json(text: str) -> Any:
    """``json.loads`` whose every failure is a ``JSONDecodeError`` (so a 400, never a 500):
    too deep a nesting or an integer of too many digits included."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise json.JSONDecodeError(type(exc).__name__, "", 0) from None


def is_json_media(content_type: str, method: str) -> bool:
    """Whether a body of ``content_type`` is read as JSON: ``application/json``, or for PATCH
    ``application/merge-patch+json`` (RFC 7396), with no charset but UTF-8 (RFC 8259's only one).
    Any other type (``application/json-patch+json``, a list of types) is a 415."""
    media, _, parameters = content_type.partition(";")
    media = media.strip().lower()
    if not (media == "application/json" or (method == "PATCH" and media == "application/merge-patch+json")):
        return False
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def _header(event: Mapping[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name:
            return value
    return None


def _with_header(event: dict[str, Any], name: str, value: str) -> None:
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != name}
    headers[name] = value
    event["headers"] = headers
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() != name}
    multi[name] = [value]
    event["multiValueHeaders"] = multi


def _decode_body(out: dict[str, Any]) -> None:
    """``out``'s body as text (a base64 body decoded), or an ``ApiError``: 413 past 1 MiB, 400
    for a body that is not UTF-8 text."""
    body = out.get("body")
    if body is None:
        return
    if not isinstance(body, str):
        raise MalformedBody("the request body is not text")
    if out.get("isBase64Encoded"):
        if len(body) > (MAX_REQUEST_BODY_BYTES + 2) // 3 * 4 + 4:
            raise PayloadTooLarge()
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedBody("the request body is not valid base64") from None
        if len(raw) > MAX_REQUEST_BODY_BYTES:
            raise PayloadTooLarge()
        try:
            out["body"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedBody("the request body is not UTF-8 text") from None
        out["isBase64Encoded"] = False
    elif len(body) > MAX_REQUEST_BODY_BYTES or (
        len(body) * 4 > MAX_REQUEST_BODY_BYTES and len(body.encode("utf-8", "surrogatepass")) > MAX_REQUEST_BODY_BYTES
    ):
        raise PayloadTooLarge()


def precheck(event: Mapping[str, Any], identify: Identify | None = None) -> dict[str, Any]:
    """The event to route, normalized (a base64 body decoded to text; a JSON media type, see
    ``is_json_media``, read as JSON), or an ``ApiError``: 413 past 1 MiB, 400 for a body that is
    not UTF-8, 415 for a body that is not JSON, 405 for a method a fixed path (``/v1/jobs/pause``)
    does not answer, 403 without a caller identity. ``identify``, where the gateway
    authenticates nobody (the LocalStack variant), names the caller of the decoded event or
    raises ``Forbidden``; its answer replaces any identity the event carries."""
    out = dict(event)
    # API Gateway passes the path as the client sent it, percent-encoded (a name with ":" is sent
    # as %3A by the SDK); a WSGI server decodes it. Routes match the decoded path: no name or id
    # holds a "%" or a "/" of its own.
    out["path"] = unquote(str(out.get("path") or ""))
    if any(ch < " " or ch == "\x7f" for ch in str(out.get("path") or "")):
        # No route has a control character (and a final newline would pass a "$" of Python's
        # re, which the routes' patterns no longer end with).
        raise NoSuchResource()
    _decode_body(out)
    method = str(out.get("httpMethod", "")).upper()
    content_type = _header(out, "content-type")
    if content_type is not None:
        if is_json_media(content_type, method):
            _with_header(out, "content-type", "application/json")
        elif out.get("body") and method in ("POST", "PUT", "PATCH"):
            raise UnsupportedMediaType()
        else:  # nothing to parse: the content type does not matter
            _with_header(out, "content-type", "application/json")
    if out.get("path") == HEALTH_PATH:
        return out
    fixed = fixed_path_methods(str(out.get("path") or ""))
    if fixed and method not in fixed and method not in ("HEAD", "OPTIONS"):
        raise ApiError(
            "the resource does not answer this method",
            [],
            status=405,
            code="method_not_allowed",
            headers={"Allow": ", ".join(fixed)},
        )
    if identify is not None:  # the signature covers the headers as sent, not as normalized here
        signed = {**out, "headers": event.get("headers"), "multiValueHeaders": event.get("multiValueHeaders")}
        out = with_principal(out, identify(signed))
    require_owner(out)
    return out


#: The time a request's calendar planning may take (a job's plans, a preview, a calendar's
#: replacement replanning its jobs): past it, a 400. Well within the API function's own timeout
#: (20 s, infra/api.py), itself within API Gateway's 29 s.
CALENDAR_PLANNING_SECONDS = 12.0


class SchedulerResolver(APIGatewayRestResolver):
    """The REST resolver with the request checks that must come before validation and routing.

    Powertools keeps the request in hand (``current_event``, ``lambda_context``) on its base
    class, shared by every resolver of the process: two threads resolving at once would read each
    other's request (a body, an owner). Here each thread reads its own; local mode's server gives
    each thread a resolver of its own besides (``per_thread_handler``: a resolver keeps the rest
    of the request's state, its route's arguments, on itself)."""

    identify: Identify | None = None
    _in_hand = threading.local()

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEvent:
        return SchedulerResolver._in_hand.event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEvent) -> None:
        SchedulerResolver._in_hand.event = value

    @property
    def lambda_context(self) -> Any:
        return SchedulerResolver._in_hand.context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        SchedulerResolver._in_hand.context = value

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        try:
            checked = precheck(event, self.identify)
        except ApiError as exc:
            return with_answer_headers(_error_result(event, exc))
        # This thread's request (Powertools sets its base class's too, which no resolver of ours reads).
        self.current_event = cast(APIGatewayProxyEvent, self._to_proxy_event(dict(checked)))
        self.lambda_context = context
        with planning_time_limit(CALENDAR_PLANNING_SECONDS):
            answer = super().resolve(checked, context)
        return with_answer_headers(_located(answer, event))


def with_answer_headers(result: dict[str, Any]) -> dict[str, Any]:
    """The proxy result with ``ANSWER_HEADERS`` added to each of its header maps (a route's own
    ``Cache-Control`` kept); ``multiValueHeaders`` made when it has neither."""
    if "headers" not in result and "multiValueHeaders" not in result:
        result["multiValueHeaders"] = {}
    for key, as_value in (("multiValueHeaders", lambda value: [value]), ("headers", lambda value: value)):
        headers = result.get(key)
        if headers is None:
            continue
        present = {name.lower() for name in headers}
        for name, value in ANSWER_HEADERS.items():
            if name.lower() not in present:
                headers[name] = as_value(value)
    return result


def _located(result: dict[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """A ``Location`` of a route (``/v1/jobs/<id>``) under the prefix the client's path has before
    the route's: the stage (``/prod``) or a custom domain's base path, which API Gateway takes off
    ``path`` but leaves in ``requestContext.path``. None locally."""
    route = str(event.get("path") or "")
    seen = str((event.get("requestContext") or {}).get("path") or "")
    prefix = seen[: -len(route)] if route and seen.endswith(route) else ""
    if not prefix:
        return result
    for key in ("headers", "multiValueHeaders"):
        for name, value in (result.get(key) or {}).items():
            if name.lower() == "location":
                located = [
                    prefix + v if str(v).startswith("/v1/") else v
                    for v in (value if isinstance(value, list) else [value])
                ]
                result[key][name] = located if isinstance(value, list) else located[0]
    return result


def _error_result(event: Mapping[str, Any], exc: ApiError) -> dict[str, Any]:
    headers: dict[str, str | list[str]] = {"Content-Type": content_types.APPLICATION_JSON, **exc.headers}
    serialized = APIGatewayProxyEvent(dict(event)).header_serializer().serialize(headers=headers, cookies=[])
    return {
        "statusCode": exc.status,
        "body": json.dumps(envelope(exc.code, exc.message, exc.details)),
        "isBase64Encoded": False,
        **serialized,
    }


def _once(factory: Callable[[], Any]) -> Callable[[], Any]:
    lock = threading.Lock()
    made: list[Any] = []

    def get() -> Any:
        if not made:
            with lock:
                if not made:
                    made.append(factory())
        return made[0]

    return get


def make_app(
    store_provider: Callable[[], JobStore],
    secret_box_provider: Callable[[], SecretBox],
    settings: Any = None,
    *,
    identify: Identify | None = None,
    cursors: Callable[[], CursorCodec] | None = None,
) -> SchedulerResolver:
    """The API, given how to get its store and secret box (called lazily, on the first request
    that needs them), the settings (``cursor_secret``) and, where the gateway authenticates
    nobody, how to learn the caller of a request (``identify``, see ``precheck``). ``cursors``
    gives the cursor codec (by default one of this app's, made on first use).

    The resolver serves one request at a time (it keeps the current one on itself); to serve
    from several threads, see ``per_thread_handler``."""
    app = SchedulerResolver(enable_validation=True, json_body_deserializer=_loads_json)
    app.identify = identify
    register_error_handlers(app)

    @app.route(
        *rule("health"),
        summary="Health",
        tags=["health"],
        responses=documented(200, Health, "Up.", reads_database=False),
    )
    def health() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(jobs.router)
    app.include_router(executions.router)
    app.include_router(changes.router)
    app.include_router(activity.router)
    app.include_router(calendars.router)
    app.include_router(alerts.router)
    app.include_router(alert_rules.router)

    @app.exception_handler(NotFoundError)
    def no_route(exc: NotFoundError) -> Response:
        allowed = allowed_methods(app.current_event.path)
        if allowed and app.current_event.http_method.upper() not in allowed:
            return error_response(
                405,
                "method_not_allowed",
                "the resource does not answer this method",
                headers={"Allow": ", ".join(allowed)},
            )
        return error_response(404, "not_found", "no such resource")

    app.dependency_overrides[providers.get_store] = store_provider
    app.dependency_overrides[providers.get_secret_box] = secret_box_provider
    app.dependency_overrides[providers.get_settings] = lambda: settings
    app.dependency_overrides[providers.get_cursors] = cursors or _once(
        lambda: CursorCodec(cursor_key(settings, secret_box_provider()))
    )
    return app


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def per_thread_handler(
    store_provider: Callable[[], JobStore],
    secret_box_provider: Callable[[], SecretBox],
    settings: Any = None,
    *,
    identify: Identify | None = None,
) -> Handler:
    """A handler of API events that may be called from several threads at once (local mode's
    server): each thread resolves with an app of its own (``make_app``, built on the thread's
    first request), since a resolver keeps the current request on itself. The threads share the
    store (its connection pool is thread-safe), the secret box (immutable, or locked: KMS's
    cache) and one cursor codec: without a cursor secret its key may be random, and a cursor
    issued on one thread must be read on another."""
    cursors = _once(lambda: CursorCodec(cursor_key(settings, secret_box_provider())))
    mine = threading.local()

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        app = getattr(mine, "app", None)
        if app is None:
            app = mine.app = make_app(store_provider, secret_box_provider, settings, identify=identify, cursors=cursors)
        return app.resolve(event, context)

    return handle
