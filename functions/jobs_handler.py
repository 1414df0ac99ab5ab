"""Lambda: a scheduler job as a CloudFormation custom resource (``Custom::SchedulerJob``, the
``Job`` construct of ``infra/jobs.py``), kept in step with the user's stack through the
deployed API.

The function is the resource's ``ServiceToken``: CloudFormation sends it the request and waits
for the answer at ``ResponseURL`` (``scheduler.transport.custom_resources.respond``). Properties:

- ``Endpoint``: the API's base URL (the scheduler stack's ``ApiUrl``);
- ``Definition``: the job's definition as JSON text (CloudFormation would turn numbers and
  booleans of an object into strings);
- ``Secrets``: JSON ``{"target.auth.token": "<secret ARN>" or ["<ARN>", "<json key>"]}``, each
  read from Secrets Manager and put at its path (a definition holds no secret value: a template
  is readable by whoever may read the stack);
- ``SecretsVersion`` (optional, not read): text the user changes when a secret is rotated, so
  that CloudFormation sends an Update, which reads the secrets anew;
- ``SigningSecretArn`` (optional): a secret ``{"access_key_id", "secret_access_key"}`` to sign
  with, for an API that verifies signatures against access keys of its own (the LocalStack
  variant); without it the function signs with its execution role's credentials, which API
  Gateway's IAM authorization checks on AWS. The jobs belong to whoever signs.

Create posts the job (a name already taken fails the resource, as CloudFormation does for any
named resource); Update puts the whole definition over the job the resource made (its physical
id is the job's id; a rename is done in place, history kept; a job deleted meanwhile is created
again); Delete deletes it (one already gone is fine). Standard library and botocore only: no
layer is needed.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from scheduler.transport.api_wire import (
    API_PREFIX,
    SERVICE,
    ApiCallFailed,
    error_from_response,
    is_job_id,
    job_path,
    region_of_endpoint,
)
from scheduler.transport.custom_resources import respond

HTTP_TIMEOUT = 20.0
Send = Callable[[str, str, Any], Any]


def _credentials(signing_secret_arn: str | None, read_secret: Callable[[str], str]) -> Any:
    """The credentials to sign with: the signing secret's keys, else the execution role's."""
    if signing_secret_arn:
        from botocore.credentials import Credentials

        keys = json.loads(read_secret(signing_secret_arn))
        return Credentials(keys["access_key_id"], keys["secret_access_key"])
    import botocore.session

    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        raise RuntimeError("no AWS credentials to sign with (the function's role gave none)")
    return credentials.get_frozen_credentials()


def _loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def signed_sender(endpoint: str, credentials: Any, region: str) -> Send:
    """``send(method, path_and_query, body)``: one SigV4-signed call to the API, its JSON answer
    (None when empty), an ``ApiCallFailed`` for an error status."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    base = endpoint.rstrip("/")
    # An API on loopback (the emulator) is never reached through a proxy.
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if _loopback(base) else []))

    def send(method: str, path: str, body: Any = None) -> Any:
        url = base + path
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        signed = AWSRequest(method=method, url=url, data=data or b"", headers=headers)
        SigV4Auth(credentials, SERVICE, region).add_auth(signed)
        request = urllib.request.Request(url, data=data, method=method, headers=dict(signed.headers.items()))
        try:
            with opener.open(request, timeout=HTTP_TIMEOUT) as answer:
                text = answer.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            raise error_from_response(error.code, error.read().decode("utf-8", "replace")) from None
        return json.loads(text) if text.strip() else None

    return send


def _set_path(definition: dict[str, Any], path: str, value: str) -> None:
    """Put ``value`` at a dotted path (``target.auth.token``, ``target.headers.Authorization``;
    a number is a list's item: ``alerts.0.target.auth.token``)."""
    node: Any = definition
    *parents, last = path.split(".")
    for key in parents:
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
            continue
        child = node.get(key)
        if not isinstance(child, (dict, list)):
            child = node[key] = {}
        node = child
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    else:
        node[last] = value


def definition_of(properties: Mapping[str, Any], read_secret: Callable[[str], str]) -> dict[str, Any]:
    """The job's definition with each secret of ``Secrets`` read and put at its path."""
    definition = json.loads(properties["Definition"])
    for path, where in json.loads(properties.get("Secrets") or "{}").items():
        arn, key = (where, None) if isinstance(where, str) else (where[0], where[1])
        value = read_secret(arn)
        _set_path(definition, path, json.loads(value)[key] if key else value)
    return definition


def _answer(job: Mapping[str, Any]) -> dict[str, Any]:
    return {"PhysicalResourceId": job["id"], "Data": {"JobId": job["id"], "JobName": job["name"]}}


def _create(send: Send, definition: dict[str, Any]) -> dict[str, Any]:
    try:
        return _answer(send("POST", f"{API_PREFIX}/jobs", definition))
    except ApiCallFailed as error:
        if error.status == 409:
            raise RuntimeError(
                f"a job named {definition.get('name')!r} exists already (made outside this stack, or by "
                "another resource): delete it, or give this Job another name"
            ) from None
        raise


def apply_request(event: Mapping[str, Any], send: Send, read_secret: Callable[[str], str]) -> dict[str, Any]:
    """What the request asks of the API, done: the custom resource's answer."""
    kind = event.get("RequestType")
    physical_id = str(event.get("PhysicalResourceId") or "")
    if kind == "Delete":
        if is_job_id(physical_id):
            try:
                send("DELETE", job_path(physical_id), None)
            except ApiCallFailed as error:
                if error.status != 404:
                    raise
        return {"PhysicalResourceId": physical_id or str(event.get("LogicalResourceId"))}
    definition = definition_of(event["ResourceProperties"], read_secret)
    if kind == "Update" and is_job_id(physical_id):
        try:
            return _answer(send("PUT", job_path(physical_id), definition))
        except ApiCallFailed as error:
            if error.status != 404:
                raise
    return _create(send, definition)


def _read_secret(arn: str) -> str:
    import boto3

    return boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]


def on_event(event: Mapping[str, Any], *, read_secret: Callable[[str], str] = _read_secret) -> dict[str, Any]:
    """The answer to one custom-resource request, signed as the properties say."""
    properties = event.get("ResourceProperties") or {}
    endpoint = str(properties["Endpoint"])
    region = region_of_endpoint(endpoint) or os.environ.get("AWS_REGION") or "us-east-1"
    credentials = _credentials(properties.get("SigningSecretArn") or None, read_secret)
    try:
        return apply_request(event, signed_sender(endpoint, credentials, region), read_secret)
    except ApiCallFailed as error:
        fields = "; ".join(f"{d.get('field')}: {d.get('message')}" for d in error.details if d.get("field"))
        raise RuntimeError(f"the scheduler API refused: {error}" + (f" ({fields})" if fields else "")) from None


def handler(event: dict, context: object) -> dict:
    """CloudFormation's request, answered at its ``ResponseURL`` (a failure too, with its reason)."""
    return respond(event, on_event)
