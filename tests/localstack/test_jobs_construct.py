"""Jobs as code on LocalStack: a user's stack with a ``Job`` (tests/localstack/jobs_app.py) deployed
with ``cdk deploy`` against the scheduler stack the session deployed, importing its exports. The
job exists through the API once the stack is up, follows an update of the stack, and is deleted
when the stack is destroyed.

The function signs with the keys of its signing secret (``test2``, the variant's second tenant):
LocalStack's API Gateway checks no IAM signature and the variant's API verifies signatures
against its own access keys, which the role's temporary credentials are not."""

from __future__ import annotations

import json
import sys
import time

import botocore.credentials
import pytest

from scheduler.client import SchedulerClient
from tests.localstack.environment import REGION, ROOT, TIMINGS

pytestmark = [pytest.mark.slow]

APP = f"{sys.executable} {ROOT / 'tests' / 'localstack' / 'jobs_app.py'}"
STACK = "JobsTest"
KEYS = {"access_key_id": "test2", "secret_access_key": "test2"}


def _definition(schedule: str) -> str:
    return json.dumps(
        {
            "name": "stack-nightly",
            "schedule": schedule,
            "retry": {"max_attempts": 4},
            "target": {"type": "http", "url": "http://127.0.0.1:9/nightly", "body": "{{scheduled_at}}"},
        }
    )


def test_a_job_lives_and_dies_with_the_user_s_stack(localstack, deployment):
    owner = SchedulerClient(
        deployment.api_url, sigv4=True, region=REGION, credentials=botocore.credentials.Credentials("test2", "test2")
    )
    context = {
        "stack_name": STACK,
        "scheduler_stack": deployment.stack_name,
        "python_version": localstack.lambda_runtime.removeprefix("python"),
    }
    parameters = {"SigningKeys": json.dumps(KEYS, separators=(",", ":"))}
    started = time.monotonic()
    try:
        localstack.deploy_app(APP, STACK, {**context, "definition": _definition("0 3 * * *")}, parameters)
        TIMINGS["cdk deploy of a user stack with a Job"] = time.monotonic() - started
        job = owner.jobs.get("stack-nightly")
        assert (job.schedule, job.retry.max_attempts, job.state) == ("0 3 * * *", 4, "active")
        assert job.owner == "arn:aws:iam::000000000000:user/test2"  # whoever signs owns the job

        localstack.deploy_app(APP, STACK, {**context, "definition": _definition("30 3 * * *")}, parameters)
        updated = owner.jobs.get("stack-nightly")
        assert updated.id == job.id and updated.schedule == "30 3 * * *" and updated.version == job.version + 1
    finally:
        started = time.monotonic()
        localstack.destroy_app(APP, STACK, {**context, "definition": _definition("30 3 * * *")})
        TIMINGS["cdk destroy of the user stack"] = time.monotonic() - started
    assert "stack-nightly" not in [j.name for j in owner.jobs.list()]
