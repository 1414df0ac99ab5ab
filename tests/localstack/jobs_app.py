"""A user's CDK app with one ``Job`` (infra/jobs.py), deployed by tests/localstack/test_jobs_construct.py
against the scheduler stack deployed on LocalStack: ``cdk --app "python tests/localstack/jobs_app.py"``.

Context: ``stack_name`` (this stack), ``scheduler_stack`` (the scheduler stack whose exports it
imports), ``definition`` (the job's JSON), ``python_version`` (the host interpreter's, which
LocalStack's host executor runs the function with). The stack parameter ``SigningKeys`` (NoEcho)
is the signing secret's value: LocalStack's API Gateway checks no IAM signature, and the
variant's API accepts only the access keys it was given, not the function role's temporary ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aws_cdk import App, CfnParameter, SecretValue, Stack
from aws_cdk import aws_secretsmanager as secretsmanager

from infra.jobs import Job, SchedulerApi
from infra.nag import acknowledge, add_checks


def build(app: App) -> Stack:
    """The user's stack: a signing secret and one job."""
    context = app.node.try_get_context
    stack = Stack(app, context("stack_name") or "JobsTest")
    keys = CfnParameter(stack, "SigningKeys", type="String", no_echo=True, description="access key to sign with (JSON)")
    secret = secretsmanager.Secret(stack, "SigningSecret", secret_string_value=SecretValue.cfn_parameter(keys))
    acknowledge(
        secret, {"AwsSolutions-SMG4": "An emulator's access key, given as the stack's parameter at each deploy."}
    )
    api = SchedulerApi.from_stack_exports(stack, context("scheduler_stack") or "SchedulerTest", signing_secret=secret)
    Job(
        stack,
        "Nightly",
        api=api,
        definition=json.loads(context("definition")),
        python_version=context("python_version") or "3.13",
    )
    return stack


if __name__ == "__main__":
    application = App()
    build(application)
    add_checks(application)
    application.synth()
