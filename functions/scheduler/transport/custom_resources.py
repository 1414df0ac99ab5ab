"""CloudFormation custom resources: one answer, by whichever way the request came.

A function behind ``aws_cdk.custom_resources.Provider`` returns its answer, and the provider
framework (whose own function talks to CloudFormation) reports it; the framework hides the
request's ``ResponseURL`` (``"..."``). A function that is the resource's ``ServiceToken``
itself must PUT the answer to ``ResponseURL`` (a presigned S3 URL in AWS), failure included,
or CloudFormation waits an hour. :func:`respond` does either for a function that computes its
answer with ``produce``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

# CloudFormation's limit on a response body; the reason is cut well below it.
_MAX_REASON = 2000


def is_direct(event: Mapping[str, Any]) -> bool:
    """Whether CloudFormation sent ``event`` to this function itself (it then waits at ``ResponseURL``)."""
    url = event.get("ResponseURL")
    return isinstance(url, str) and url.startswith(("https://", "http://"))


def response_body(event: Mapping[str, Any], *, answer: Mapping[str, Any] | None, error: str | None) -> dict[str, Any]:
    """The body CloudFormation expects at ``ResponseURL``: SUCCESS with the answer, or FAILED with a reason."""
    physical_id = (
        (answer or {}).get("PhysicalResourceId") or event.get("PhysicalResourceId") or event.get("LogicalResourceId")
    )
    body: dict[str, Any] = {
        "Status": "FAILED" if error is not None else "SUCCESS",
        "PhysicalResourceId": physical_id,
        "StackId": event.get("StackId"),
        "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"),
    }
    if error is not None:
        body["Reason"] = error[:_MAX_REASON]
    elif answer and answer.get("Data"):
        body["Data"] = answer["Data"]
    return body


def _put(url: str, body: Mapping[str, Any]) -> None:
    import urllib.request  # only a direct request needs it: the migrate function's cold start skips it

    data = json.dumps(body).encode()
    # A presigned S3 URL signs no content type: send none (an empty one, as the cfn-response module does).
    request = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def respond(
    event: Mapping[str, Any],
    produce: Callable[[Mapping[str, Any]], dict[str, Any]],
    *,
    put: Callable[[str, Mapping[str, Any]], None] = _put,
) -> dict[str, Any]:
    """``produce(event)``, answered as the request came: returned (provider framework), or PUT to
    ``ResponseURL`` (a direct request), where an exception becomes a FAILED answer with its message."""
    if not is_direct(event):
        return produce(event)
    try:
        answer = produce(event)
    except Exception as error:  # every failure must reach CloudFormation, or it waits an hour
        logger.exception("custom resource request failed")
        body = response_body(event, answer=None, error=f"{type(error).__name__}: {error}")
        put(event["ResponseURL"], body)
        return body
    body = response_body(event, answer=answer, error=None)
    put(event["ResponseURL"], body)
    return body
