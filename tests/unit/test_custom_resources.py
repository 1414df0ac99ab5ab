"""A custom resource's answer reaches CloudFormation whichever way the request came: returned to
the provider framework, or PUT to the request's ``ResponseURL`` (a real HTTP server here),
failures included."""

from __future__ import annotations

import json

import pytest

from scheduler.transport.custom_resources import is_direct, respond
from tests.support import RecordingServer

EVENT = {
    "RequestType": "Create",
    "StackId": "arn:aws:cloudformation:us-east-1:000000000000:stack/s/1",
    "RequestId": "r-1",
    "LogicalResourceId": "Migrations",
    "ResourceProperties": {"MigrationsHash": "abc"},
}


@pytest.fixture
def cloudformation():
    server = RecordingServer()
    yield server
    server.close()


def test_through_the_provider_framework_the_answer_is_returned():
    framework_event = {**EVENT, "ResponseURL": "..."}  # the framework hides the URL
    assert not is_direct(framework_event)
    assert respond(framework_event, lambda e: {"PhysicalResourceId": "p", "Data": {"n": 1}}) == {
        "PhysicalResourceId": "p",
        "Data": {"n": 1},
    }
    with pytest.raises(RuntimeError):  # the framework reports the failure itself
        respond(framework_event, lambda e: (_ for _ in ()).throw(RuntimeError("no")))


def test_a_direct_request_is_answered_at_its_response_url(cloudformation):
    event = {**EVENT, "ResponseURL": f"{cloudformation.url}/response?X-Amz-Signature=abc"}
    respond(event, lambda e: {"PhysicalResourceId": "migrations", "Data": {"Applied": 10}})
    [request] = cloudformation.wait_for(1)
    assert request["method"] == "PUT" and request["path"] == "/response?X-Amz-Signature=abc"
    assert json.loads(request["body"]) == {
        "Status": "SUCCESS",
        "PhysicalResourceId": "migrations",
        "StackId": EVENT["StackId"],
        "RequestId": "r-1",
        "LogicalResourceId": "Migrations",
        "Data": {"Applied": 10},
    }


def test_a_failure_is_answered_failed_with_its_reason(cloudformation):
    event = {
        **EVENT,
        "RequestType": "Update",
        "PhysicalResourceId": "migrations",
        "ResponseURL": f"{cloudformation.url}/r",
    }

    def fails(_event):
        raise ValueError("migration 0011 failed: relation exists")

    body = respond(event, fails)
    [request] = cloudformation.wait_for(1)
    sent = json.loads(request["body"])
    assert sent == body
    assert sent["Status"] == "FAILED" and sent["PhysicalResourceId"] == "migrations"
    assert sent["Reason"] == "ValueError: migration 0011 failed: relation exists"
