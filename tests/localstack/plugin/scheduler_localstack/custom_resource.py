"""Lambda-backed CloudFormation custom resources for LocalStack's free edition.

Without a provider for ``AWS::CloudFormation::CustomResource`` (and every ``Custom::*`` type),
LocalStack marks such resources created and runs nothing, so a stack's migrations would be
silently skipped. This provider does what CloudFormation does: it sends the function named by
``ServiceToken`` the custom-resource request (``RequestType`` Create, Update or Delete, the
``ResourceProperties``, the previous ones and the physical id on Update and Delete) as an
asynchronous invoke, with a ``ResponseURL`` of LocalStack's own gateway; the function PUTs its
answer there (``Status`` SUCCESS or FAILED, ``Reason``, ``PhysicalResourceId``, ``Data``), and
the resource succeeds or fails, with the function's reason, accordingly. A function that never
answers fails the resource after its timeout plus a minute (CloudFormation waits an hour).

The ``Data`` keys become the resource's attributes (``Fn::GetAtt``). Only Lambda service tokens
are supported; an SNS one fails the resource, saying so.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from http import HTTPStatus
from typing import Any

from localstack import config
from localstack.http import Request, Response, route
from localstack.services.cloudformation.resource_provider import (
    CloudFormationResourceProviderPlugin,
    OperationStatus,
    ProgressEvent,
    ResourceProvider,
    ResourceRequest,
)
from localstack.services.edge import ROUTER

LOG = logging.getLogger(__name__)

RESPONSE_PATH = "/_scheduler/cloudformation-responses"
# Keys of ours in the resource's stored model, beside the properties and the Data attributes.
PHYSICAL_ID = "PhysicalResourceId"
STORED = "_SchedulerCustomResource"
EXTRA_WAIT_SECONDS = 60


class _Responses:
    """The answers functions PUT to their ``ResponseURL``, by request id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, threading.Event] = {}
        self._answers: dict[str, dict[str, Any]] = {}

    def expect(self, request_id: str) -> threading.Event:
        with self._lock:
            event = self._waiting[request_id] = threading.Event()
            return event

    def take(self, request_id: str) -> dict[str, Any] | None:
        with self._lock:
            self._waiting.pop(request_id, None)
            return self._answers.pop(request_id, None)

    @route(f"{RESPONSE_PATH}/<request_id>", methods=["PUT"])
    def put(self, request: Request, request_id: str) -> Response:
        try:
            answer = json.loads(request.get_data() or b"{}")
        except ValueError:
            return Response("not JSON", status=HTTPStatus.BAD_REQUEST)
        with self._lock:
            event = self._waiting.get(request_id)
            if event is None:
                return Response("no such request", status=HTTPStatus.NOT_FOUND)
            self._answers[request_id] = answer if isinstance(answer, dict) else {}
            event.set()
        return Response(status=HTTPStatus.OK)


_RESPONSES: _Responses | None = None
_RESPONSES_LOCK = threading.Lock()


def responses() -> _Responses:
    """The response endpoint, added to LocalStack's router on first use."""
    global _RESPONSES
    with _RESPONSES_LOCK:
        if _RESPONSES is None:
            _RESPONSES = _Responses()
            ROUTER.add(_RESPONSES)
        return _RESPONSES


def _properties(model: dict[str, Any] | None) -> dict[str, Any]:
    """The resource's properties as the template gave them (our stored keys and attributes removed)."""
    model = dict(model or {})
    stored = model.pop(STORED, None) or {}
    for key in [PHYSICAL_ID, *stored.get("attributes", [])]:
        model.pop(key, None)
    return model


class CustomResourceProvider(ResourceProvider[dict[str, Any]]):
    """``AWS::CloudFormation::CustomResource`` and ``Custom::*`` backed by a Lambda function."""

    TYPE = "AWS::CloudFormation::CustomResource"
    SCHEMA = {
        "typeName": TYPE,
        "properties": {"ServiceToken": {"type": "string"}, PHYSICAL_ID: {"type": "string"}},
        "required": ["ServiceToken"],
        "primaryIdentifier": [f"/properties/{PHYSICAL_ID}"],
        "readOnlyProperties": [f"/properties/{PHYSICAL_ID}"],
        "additionalProperties": True,
    }

    def create(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return self._send(request, "Create")

    def update(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return self._send(request, "Update")

    def delete(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return self._send(request, "Delete")

    def read(self, request: ResourceRequest[dict[str, Any]]) -> ProgressEvent[dict[str, Any]]:
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=request.desired_state)

    def _send(self, request: ResourceRequest[dict[str, Any]], request_type: str) -> ProgressEvent[dict[str, Any]]:
        desired = _properties(request.desired_state) if request_type != "Delete" else {}
        previous = request.previous_state or (request.desired_state if request_type == "Delete" else None)
        old_properties = _properties(previous) if previous else None
        physical_id = (previous or {}).get(PHYSICAL_ID)
        service_token = (desired or old_properties or {}).get("ServiceToken", "")
        if ":lambda:" not in service_token:
            return self._failed(f"custom resources need a Lambda function as ServiceToken, not {service_token!r}")

        request_id = str(uuid.uuid4())
        port = config.GATEWAY_LISTEN[0].port
        body: dict[str, Any] = {
            "RequestType": request_type,
            "ServiceToken": service_token,
            "ResponseURL": f"http://127.0.0.1:{port}{RESPONSE_PATH}/{request_id}",
            "StackId": request.stack_id,
            "RequestId": request_id,
            "LogicalResourceId": request.logical_resource_id,
            "ResourceType": request.resource_type,
            "ResourceProperties": desired if request_type != "Delete" else old_properties,
        }
        if request_type != "Create":
            body["PhysicalResourceId"] = physical_id
        if request_type == "Update":
            body["OldResourceProperties"] = old_properties

        lambda_client = request.aws_client_factory.lambda_
        timeout = lambda_client.get_function_configuration(FunctionName=service_token).get("Timeout", 60)
        answered = responses().expect(request_id)
        lambda_client.invoke(FunctionName=service_token, InvocationType="Event", Payload=json.dumps(body).encode())
        if not answered.wait(timeout + EXTRA_WAIT_SECONDS):
            responses().take(request_id)
            return self._failed(
                f"the function {service_token} sent no response within {timeout + EXTRA_WAIT_SECONDS} s"
            )
        answer = responses().take(request_id) or {}
        if answer.get("Status") != "SUCCESS":
            return self._failed(str(answer.get("Reason") or "the custom resource's function reported a failure"))
        if request_type == "Delete":
            return ProgressEvent(status=OperationStatus.SUCCESS, resource_model={})
        data = answer.get("Data") if isinstance(answer.get("Data"), dict) else {}
        model = {
            **desired,
            **data,
            PHYSICAL_ID: str(answer.get(PHYSICAL_ID) or physical_id or request.logical_resource_id),
            STORED: {"attributes": sorted(data)},
        }
        return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)

    @staticmethod
    def _failed(reason: str) -> ProgressEvent[dict[str, Any]]:
        LOG.warning("custom resource failed: %s", reason)
        return ProgressEvent(status=OperationStatus.FAILED, resource_model={}, message=reason)


class CustomResourceProviderPlugin(CloudFormationResourceProviderPlugin):
    """Registers the provider for ``AWS::CloudFormation::CustomResource`` (``Custom::*`` maps to it)."""

    name = "AWS::CloudFormation::CustomResource"

    def __init__(self) -> None:
        self.factory: type[ResourceProvider[dict[str, Any]]] | None = None

    def load(self) -> None:
        self.factory = CustomResourceProvider
