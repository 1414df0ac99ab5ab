"""Who signed an API Gateway event, where the gateway does not say (the LocalStack variant).

On AWS, API Gateway verifies every request's SigV4 signature (IAM authorization) and hands the
function the caller's principal (``requestContext.identity``). LocalStack's free edition
checks nothing and passes no identity, so its variant of the stack gives the api function a
set of access keys (a credentials document as ``scheduler local --credentials`` takes,
``scheduler.transport.sigv4.parse_credentials``) and the function verifies each request itself:
two access keys are two tenants, as two IAM principals are in AWS.

The client signed the URL it called, which the event gives only in parts: the stage path
(``requestContext.path``, ``/prod/v1/jobs``), the API's id, and the query as decoded
parameters. The signature is checked against each form of the URL the gateway answers at
(``/prod/...`` on the API's own host name, LocalStack's path-style
``/_aws/execute-api/<api id>/prod/...`` and its older ``/restapis/<api id>/prod/_user_request_/...``),
with the query encoded canonically (RFC 3986, as SigV4 prescribes and this project's client sends).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.api.errors import Forbidden
from scheduler.settings import Settings

if TYPE_CHECKING:
    # Loaded when a deployment verifies signatures itself: on AWS the gateway does, and the
    # api function's cold start does not pay for the verifier.
    from scheduler.transport.sigv4 import Credentials


def signed_paths(event: Mapping[str, Any]) -> list[str]:
    """The request paths a client may have signed for this event, most likely first."""
    context = event.get("requestContext") or {}
    path = str(event.get("path") or "/")
    stage = str(context.get("stage") or "")
    stage_path = str(context.get("path") or (f"/{stage}{path}" if stage else path))
    paths = [stage_path]
    api_id = context.get("apiId")
    if api_id:
        paths.append(f"/_aws/execute-api/{api_id}{stage_path}")
        if stage:
            paths.append(f"/restapis/{api_id}/{stage}/_user_request_{path}")
    return paths


def canonical_query(event: Mapping[str, Any]) -> str:
    """The query string of the event's decoded parameters, encoded as SigV4 canonicalizes it."""
    multi = event.get("multiValueQueryStringParameters") or {}
    single = event.get("queryStringParameters") or {}
    pairs = []
    for key in multi or single:
        values = multi.get(key) if multi else [single[key]]
        for value in values or [""]:
            pairs.append((quote(str(key), safe="-_.~"), quote(str(value), safe="-_.~")))
    return "&".join(f"{key}={value}" for key, value in sorted(pairs))


def _headers(event: Mapping[str, Any]) -> list[tuple[str, str]]:
    multi = event.get("multiValueHeaders") or {}
    if multi:
        return [(name, str(value)) for name, values in multi.items() for value in (values or [])]
    return [(name, str(value)) for name, value in (event.get("headers") or {}).items()]


def verify_event(
    event: Mapping[str, Any],
    credentials: Credentials,
    *,
    region: str | None,
    now: dt.datetime | float | None = None,
) -> str:
    """The principal that signed ``event`` (its body already decoded to text), or ``SignatureError``."""
    from scheduler.transport.sigv4 import SignatureError, verify_request

    method = str(event.get("httpMethod") or "GET")
    query = canonical_query(event)
    headers = _headers(event)
    body = event.get("body")
    first: SignatureError | None = None
    for path in signed_paths(event):
        try:
            return verify_request(method, path, query, headers, body, credentials, region=region, now=now)
        except SignatureError as error:
            if "signature does not match" not in error.message:
                raise  # not about the path: every form fails alike
            first = first or error
    assert first is not None
    raise first


def signature_identifier(credentials: Credentials, *, region: str | None) -> Callable[[Mapping[str, Any]], str]:
    """What the API calls to learn a request's principal: the verified signer, or 403 with the reason."""
    from scheduler.transport.sigv4 import SignatureError

    def identify(event: Mapping[str, Any]) -> str:
        try:
            return verify_event(event, credentials, region=region)
        except SignatureError as error:
            raise Forbidden(f"the request's signature was refused: {error.message}") from None

    return identify


def with_principal(event: Mapping[str, Any], principal: str) -> dict[str, Any]:
    """A copy of ``event`` whose ``requestContext.identity`` names ``principal`` (as API Gateway's would)."""
    context = dict(event.get("requestContext") or {})
    identity = dict(context.get("identity") or {})
    identity.update({"userArn": principal, "caller": principal})
    context["identity"] = identity
    return {**event, "requestContext": context}


def identifier_for(settings: Settings) -> Callable[[Mapping[str, Any]], str] | None:
    """The signature check of a deployment whose gateway authenticates nobody (its settings carry
    access keys), for the function's own region; None where API Gateway's IAM authorization
    does the work."""
    if not settings.api_credentials:
        return None
    from scheduler.transport.sigv4 import parse_credentials

    return signature_identifier(
        parse_credentials(settings.api_credentials), region=os.environ.get("AWS_REGION") or None
    )
