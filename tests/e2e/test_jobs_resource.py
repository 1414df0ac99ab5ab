"""The Job construct's function (functions/jobs_handler.py) against a real ``scheduler local
--auth sigv4``: CloudFormation's requests (Create, Update, Delete) as CloudFormation sends them,
the answer PUT to a real ResponseURL (a recording server), every API call SigV4-signed with the
keys of the signing secret and verified by the API itself."""

from __future__ import annotations

import json
import sys

import botocore.credentials
import pytest

from scheduler.client import SchedulerClient
from tests.support import ROOT, LocalScheduler, RecordingServer

sys.path.insert(0, f"{ROOT}/functions")
import jobs_handler

pytestmark = pytest.mark.slow

KEYS = {"access_key_id": "AKIDJOBS", "secret_access_key": "jobs-secret"}
SECRETS = {
    "arn:aws:secretsmanager:us-east-1:000000000000:secret:signing": json.dumps(KEYS),
    "arn:aws:secretsmanager:us-east-1:000000000000:secret:token": json.dumps({"token": "t0ken"}),
}


@pytest.fixture
def signed_api(db_url, tmp_path):
    creds = tmp_path / "creds.json"
    creds.write_text(
        json.dumps({"AKIDJOBS": {"secret_access_key": "jobs-secret", "principal": "arn:aws:iam::1:user/ci"}})
    )
    api = LocalScheduler(db_url, str(tmp_path / "data"), "--credentials", str(creds))
    yield api
    assert api.stop() == 0, "".join(api.lines)


@pytest.fixture
def cloudformation():
    server = RecordingServer()
    yield server
    server.close()


def _request(kind, endpoint, definition, response_url, physical_id=None):
    event = {
        "RequestType": kind,
        "ResponseURL": response_url,
        "StackId": "arn:aws:cloudformation:us-east-1:000000000000:stack/Reports/1",
        "RequestId": f"req-{kind}",
        "LogicalResourceId": "NightlyResource",
        "ResourceType": "Custom::SchedulerJob",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:000000000000:function:provider",
            "Endpoint": endpoint + "/",
            "Definition": json.dumps(definition),
            "Secrets": json.dumps({"target.auth.token": [next(k for k in SECRETS if k.endswith("token")), "token"]}),
            "SigningSecretArn": next(k for k in SECRETS if k.endswith("signing")),
        },
    }
    if physical_id:
        event["PhysicalResourceId"] = physical_id
    return event


def _send(event, cloudformation):
    before = len(cloudformation.requests)
    jobs_handler.respond(event, lambda request: jobs_handler.on_event(request, read_secret=SECRETS.__getitem__))
    [answer] = cloudformation.wait_for(before + 1)[before:]
    assert answer["method"] == "PUT"
    return json.loads(answer["body"])


def test_create_update_and_delete_through_the_signed_api(signed_api, cloudformation, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    owner = SchedulerClient(
        signed_api.url,
        sigv4=True,
        region="us-east-1",
        credentials=botocore.credentials.Credentials("AKIDJOBS", "jobs-secret"),
    )
    definition = {
        "name": "nightly-report",
        "schedule": "0 3 * * *",
        "retry": {"max_attempts": 4},
        "target": {"type": "http", "url": "http://127.0.0.1:9/report", "auth": {"type": "bearer", "token": "***"}},
    }
    created = _send(_request("Create", signed_api.url, definition, cloudformation.url + "/r/1"), cloudformation)
    assert created["Status"] == "SUCCESS", created
    job_id = created["PhysicalResourceId"]
    assert created["Data"] == {"JobId": job_id, "JobName": "nightly-report"}
    job = owner.jobs.get("nightly-report")
    assert job.id == job_id and job.retry.max_attempts == 4 and job.owner == "arn:aws:iam::1:user/ci"
    assert job.target["auth"]["token"] == "***"  # stored from the secret, never answered

    # A second Create of the same name fails the resource, saying why (no silent adoption).
    taken = _send(_request("Create", signed_api.url, definition, cloudformation.url + "/r/2"), cloudformation)
    assert taken["Status"] == "FAILED" and "exists already" in taken["Reason"]

    # Update: renamed and rescheduled in place (same id, history kept).
    changed = {**definition, "name": "nightly", "schedule": "30 3 * * *"}
    updated = _send(_request("Update", signed_api.url, changed, cloudformation.url + "/r/3", job_id), cloudformation)
    assert updated["Status"] == "SUCCESS" and updated["PhysicalResourceId"] == job_id
    assert owner.jobs.get(job_id).schedule == "30 3 * * *" and owner.jobs.get(job_id).name == "nightly"

    # A bad definition fails the update with the API's reason, the field named.
    bad = {**changed, "schedule": "61 * * * *"}
    refused = _send(_request("Update", signed_api.url, bad, cloudformation.url + "/r/4", job_id), cloudformation)
    assert refused["Status"] == "FAILED" and "schedule" in refused["Reason"] and "61" in refused["Reason"]

    # Delete: gone; a second delete (already gone) succeeds.
    for attempt in (5, 6):
        deleted = _send(
            _request("Delete", signed_api.url, changed, cloudformation.url + f"/r/{attempt}", job_id), cloudformation
        )
        assert deleted["Status"] == "SUCCESS"
    assert list(owner.jobs.list()) == []


def test_an_unsigned_or_unknown_signer_is_refused_by_the_api(signed_api, cloudformation, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    wrong = dict(SECRETS)
    wrong[next(k for k in SECRETS if k.endswith("signing"))] = json.dumps(
        {"access_key_id": "AKIDJOBS", "secret_access_key": "no"}
    )
    event = _request(
        "Create",
        signed_api.url,
        {"name": "x", "schedule": "@daily", "target": {"type": "http", "url": "http://127.0.0.1:9/"}},
        cloudformation.url + "/r/x",
    )
    before = len(cloudformation.requests)
    jobs_handler.respond(event, lambda request: jobs_handler.on_event(request, read_secret=wrong.__getitem__))
    answer = json.loads(cloudformation.wait_for(before + 1)[before]["body"])
    assert answer["Status"] == "FAILED" and "403" in answer["Reason"] and "signature" in answer["Reason"]
