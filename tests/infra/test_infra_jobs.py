"""Jobs as code (infra/jobs.py): the scheduler stack exports what a Job needs, and a user's stack
with Jobs synthesizes a Custom::SchedulerJob per job, served by one function of ours that signs
with its role (or with the keys of a signing secret), clean under cdk-nag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk")
pytest.importorskip("cdk_nag")

DEFINITION = {
    "name": "nightly-report",
    "schedule": "0 3 * * *",
    "retry": {"max_attempts": 4},
    "target": {"type": "http", "url": "https://example.com/report", "auth": {"type": "bearer", "token": "***"}},
}


def _user_stack(**job_options):
    from aws_cdk import App, Stack
    from aws_cdk import aws_secretsmanager as secretsmanager
    from aws_cdk.assertions import Template

    from infra.jobs import Job, SchedulerApi
    from infra.nag import acknowledge, add_checks

    app = App()
    stack = Stack(app, "Reports")
    token = secretsmanager.Secret(stack, "Token")
    acknowledge(
        token, {"AwsSolutions-SMG4": "The user's own token for the target, rotated by its owner, not this stack."}
    )
    api = SchedulerApi.from_stack_exports(stack, "Scheduler")
    Job(stack, "Nightly", api=api, definition=DEFINITION, secrets={"target.auth.token": token}, **job_options)
    Job(stack, "Hourly", api=api, definition={**DEFINITION, "name": "hourly", "schedule": "@hourly"}, **job_options)
    add_checks(app)
    return stack, Template.from_stack(stack)


def test_the_scheduler_stack_exports_its_url_and_an_invoke_policy(aws):
    outputs = aws.json["Outputs"]
    assert outputs["ApiUrl"]["Export"] == {"Name": "Scheduler-ApiUrl"}
    assert outputs["ApiInvokePolicyArn"]["Export"] == {"Name": "Scheduler-ApiInvokePolicyArn"}
    [policy] = aws.resources("AWS::IAM::ManagedPolicy").values()
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    resource = json.dumps(statement["Resource"])
    assert "/prod/*/v1/*" in resource and "RestApi" in resource


def test_a_user_stack_gets_one_resource_per_job_and_one_function_for_all():
    from infra.nag import unacknowledged_findings

    stack, template = _user_stack()
    resources = template.to_json()["Resources"]
    jobs = {k: v for k, v in resources.items() if v["Type"] == "Custom::SchedulerJob"}
    functions = {k: v for k, v in resources.items() if v["Type"] == "AWS::Lambda::Function"}
    assert len(jobs) == 2 and len(functions) == 1
    [(function_id, function)] = functions.items()
    assert function["Properties"]["Handler"] == "jobs_handler.handler"
    assert function["Properties"]["Runtime"] == "python3.14"
    nightly = next(v["Properties"] for v in jobs.values() if "nightly-report" in json.dumps(v))
    assert nightly["ServiceToken"] == {"Fn::GetAtt": [function_id, "Arn"]}  # no provider framework
    assert nightly["Endpoint"] == {"Fn::ImportValue": "Scheduler-ApiUrl"}
    assert json.loads(nightly["Definition"]) == DEFINITION  # numbers stay numbers (JSON text)
    assert "Ref" in json.dumps(nightly["Secrets"])  # the secret's ARN, never its value
    assert "SigningSecretArn" not in nightly  # signed with the function's role
    role = next(v for v in resources.values() if v["Type"] == "AWS::IAM::Role")
    assert {"Fn::ImportValue": "Scheduler-ApiInvokePolicyArn"} in role["Properties"]["ManagedPolicyArns"]
    assert unacknowledged_findings(stack) == []


def test_a_signing_secret_is_passed_and_readable_for_an_emulator():
    from aws_cdk import App, Stack
    from aws_cdk import aws_secretsmanager as secretsmanager
    from aws_cdk.assertions import Template

    from infra.jobs import Job, SchedulerApi

    stack = Stack(App(), "Emulated")
    keys = secretsmanager.Secret(stack, "Keys")
    api = SchedulerApi.from_stack_exports(stack, "SchedulerTest", signing_secret=keys)
    Job(stack, "One", api=api, definition={**DEFINITION, "target": {"type": "http", "url": "http://127.0.0.1:9/x"}})
    template = Template.from_stack(stack).to_json()
    [job] = [v for v in template["Resources"].values() if v["Type"] == "Custom::SchedulerJob"]
    assert "Ref" in json.dumps(job["Properties"]["SigningSecretArn"])
    policy = json.dumps([v for v in template["Resources"].values() if v["Type"] == "AWS::IAM::Policy"])
    assert "secretsmanager:GetSecretValue" in policy


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (
            {"type": "http", "url": "https://e.com/h", "auth": {"type": "bearer", "token": "s3cret"}},
            "target.auth.token",
        ),
        (
            {"type": "http", "url": "https://e.com/h", "auth": {"type": "basic", "username": "u", "password": "p"}},
            "password",
        ),
        ({"type": "amqp", "url": "amqps://u:pw@broker.example.com/vh", "exchange": "x"}, "target.url"),
    ],
)
def test_a_literal_secret_is_refused_at_synth_time(target, field):
    from infra.jobs import check_definition

    with pytest.raises(ValueError, match=field):
        check_definition({"name": "j", "schedule": "@daily", "target": target})
    masked = json.loads(
        json.dumps(target).replace('"s3cret"', '"***"').replace('"p"}', '"***"}').replace(":pw@", ":***@")
    )
    check_definition({"name": "j", "schedule": "@daily", "target": masked})  # "***": filled from secrets=


def test_credential_headers_and_alert_targets_secrets_are_refused_at_synth_time_too():
    """The API treats them as secrets; written in a definition they were in the template in clear."""
    from infra.jobs import check_definition

    headers = {"type": "http", "url": "https://e.com/h", "headers": {"Authorization": "Bearer LITERAL", "X-Trace": "1"}}
    with pytest.raises(ValueError, match="target.headers.Authorization"):
        check_definition({"name": "j", "schedule": "@daily", "target": headers})
    masked = {**headers, "headers": {"Authorization": "***", "X-Trace": "1"}}
    check_definition({"name": "j", "schedule": "@daily", "target": masked})
    alert = {
        "on": "failure",
        "target": {"type": "http", "url": "https://hooks.example.com/", "auth": {"type": "bearer", "token": "t0k"}},
    }
    with pytest.raises(ValueError, match="alerts.0.target.auth.token"):
        check_definition({"name": "j", "schedule": "@daily", "target": masked, "alerts": [alert]})


def test_secrets_fill_list_items_and_headers():
    """``secrets=`` paths into an alert rule (a list's item) and a target's header."""
    import jobs_handler

    definition = {"target": {"headers": {"Authorization": "***"}}, "alerts": [{"target": {"auth": {"token": "***"}}}]}
    jobs_handler._set_path(definition, "target.headers.Authorization", "Bearer real")
    jobs_handler._set_path(definition, "alerts.0.target.auth.token", "t0k")
    assert definition == {
        "target": {"headers": {"Authorization": "Bearer real"}},
        "alerts": [{"target": {"auth": {"token": "t0k"}}}],
    }


def test_a_definition_without_a_name_is_refused():
    from infra.jobs import check_definition

    with pytest.raises(ValueError, match="name"):
        check_definition({"schedule": "@daily", "target": {"type": "http", "url": "https://e.com"}})


def test_the_function_s_code_is_self_sufficient():
    """The staged asset (the handler and the few modules it imports) loads without the package
    installed and without site-packages: standard library only at import time."""
    from infra.jobs import _provider_code

    code = _provider_code()
    path = Path(code.path)
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*.py")) == sorted(
        __import__("infra.jobs", fromlist=["PROVIDER_FILES"]).PROVIDER_FILES
    )
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import jobs_handler",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_jobs_of_one_stack_share_their_function_so_they_agree_on_its_role():
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam

    from infra.jobs import Job, SchedulerApi

    stack = Stack(App(), "Mixed")
    api = SchedulerApi.from_stack_exports(stack, "Scheduler")
    role = iam.Role(stack, "Owner", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    target = {"type": "http", "url": "https://e.com/h"}
    Job(stack, "A", api=api, definition={"name": "a", "schedule": "@daily", "target": target}, role=role)
    with pytest.raises(ValueError, match="same role"):
        Job(stack, "B", api=api, definition={"name": "b", "schedule": "@daily", "target": target})


def test_a_secrets_path_is_checked_at_synth_and_a_rotation_is_a_property():
    import pytest

    with pytest.raises(ValueError, match=r"target\.auth\.tokne: not a secret's place"):
        _user_stack_with_secret_path("target.auth.tokne")
    with pytest.raises(ValueError, match="X-Team is not a credential header"):
        _user_stack_with_secret_path("target.headers.X-Team")
    with pytest.raises(ValueError, match="only an AMQP target's url holds a secret"):
        _user_stack_with_secret_path("target.url")  # an HTTP target's: a webhook URL, answered as written
    _user_stack_with_secret_path("alerts.0.target.headers.X-Api-Key")  # a place of an alert rule's target
    # A rotation changes nothing in the template unless secrets_version says so.
    _, template = _user_stack(secrets_version="2026-12-08")
    jobs = [v["Properties"] for v in template.to_json()["Resources"].values() if v["Type"] == "Custom::SchedulerJob"]
    assert {job.get("SecretsVersion") for job in jobs} == {"2026-12-08"}


def _user_stack_with_secret_path(path: str) -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_secretsmanager as secretsmanager

    from infra.jobs import Job, SchedulerApi

    stack = Stack(App(), "Paths")
    api = SchedulerApi.from_stack_exports(stack, "Scheduler")
    Job(stack, "J", api=api, definition=DEFINITION, secrets={path: secretsmanager.Secret(stack, "S")})
