"""Jobs as code: a scheduler job in your own CDK app, created, updated and deleted with your stack.

```python
from infra.jobs import Job, SchedulerApi

api = SchedulerApi.from_stack_exports(self, "Scheduler")  # the scheduler stack's exports
Job(self, "Nightly", api=api, definition={
    "name": "nightly-report", "schedule": "0 3 * * *",
    "target": {"type": "http", "url": "https://example.com/report", "auth": {"type": "bearer", "token": "***"}},
}, secrets={"target.auth.token": token_secret})
```

A ``Job`` is a CloudFormation custom resource (``Custom::SchedulerJob``) whose ``ServiceToken``
is a small function of this project (``functions/jobs_handler.py``, one per stack, shared by its
jobs): it calls the deployed API, SigV4-signed, and answers CloudFormation at the
``ResponseURL`` itself (no provider framework: its Node.js function cannot run where the
LocalStack tests run it). The scheduler stack exports what it needs (``SchedulerApiExports``):
the API's URL (``<stack>-ApiUrl``) and a managed policy allowing ``execute-api:Invoke`` on its
routes (``<stack>-ApiInvokePolicyArn``), attached to the function's role.

Who owns the jobs: whoever signs. On AWS the function signs with its execution role, so the jobs
belong to that role (``arn:aws:sts::<account>:assumed-role/<role name>``, whatever the
session); give ``role=`` a role of your own to know its name (and assume it to see the jobs
with the CLI). An API whose gateway checks no IAM signature (the LocalStack variant verifies
signatures itself against access keys it was given, and the role's temporary keys are not among
them) takes ``signing_secret=``: a secret ``{"access_key_id", "secret_access_key"}`` of one of
those keys, which the function signs with instead.

Secrets: a definition is template text, readable by whoever may read the stack, so it may hold
no secret value: ``secrets=`` maps a field's path to a Secrets Manager secret (or
``JobSecret(secret, json_field)``), read by the function whenever CloudFormation creates or
updates the resource; a literal secret in ``definition``, or a path that is no secret's place,
is refused at synth time (``"***"`` there is fine: it is replaced). A rotated secret changes
nothing in the template, so CloudFormation would not update the job: give ``secrets_version=``
a text that changes with the rotation (the secret's version id, a date) to send it again.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, CustomResource, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.nag import LAMBDA_BASIC, acknowledge
from infra.shared import FUNCTIONS_DIR, C

RESOURCE_TYPE = "Custom::SchedulerJob"
HANDLER = "jobs_handler.handler"
LATEST_PYTHON = "3.14"
# What the function runs: its handler and the standard-library modules of the package it uses.
PROVIDER_FILES = (
    "jobs_handler.py",
    "scheduler/__init__.py",
    "scheduler/core/__init__.py",
    "scheduler/core/errors.py",
    "scheduler/transport/__init__.py",
    "scheduler/transport/api_wire.py",
    "scheduler/transport/custom_resources.py",
)
# Where a job holds a secret value (docs/api.md, "Secrets").
SECRET_FIELDS = ("password", "token", "value")


class SchedulerApiExports(Construct):
    """In the scheduler's stack: the managed policy a caller of the API needs, exported for the
    ``Job`` constructs of other stacks (``<stack>-ApiInvokePolicyArn``; the stack exports its
    ``ApiUrl`` as ``<stack>-ApiUrl``)."""

    def __init__(self, scope: Construct, construct_id: str, *, rest_api: apigw.RestApi, stage: str) -> None:
        super().__init__(scope, construct_id)
        stack_name = Stack.of(self).stack_name
        self.invoke_policy = iam.ManagedPolicy(
            self,
            "ApiInvokePolicy",
            description=f"Call the {stack_name} scheduler's API (SigV4; each caller sees its own jobs)",
            statements=[
                iam.PolicyStatement(
                    actions=["execute-api:Invoke"],
                    resources=[rest_api.arn_for_execute_api(method="*", path="/v1/*", stage=stage)],
                )
            ],
        )
        stack = Stack.of(self)
        api_id = stack.resolve(stack.get_logical_id(rest_api.node.default_child))  # type: ignore[arg-type]
        arn = f"arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<{api_id}>/{stage}/*/v1/*"
        acknowledge(
            self.invoke_policy,
            {
                f"AwsSolutions-IAM5[Resource::{arn}]": "execute-api:Invoke on the scheduler API's own routes under /v1 (every method "
                "of the job and execution routes); the API scopes every job to its caller."
            },
        )
        CfnOutput(
            scope,
            "ApiInvokePolicyArn",
            value=self.invoke_policy.managed_policy_arn,
            description="Managed policy allowing execute-api:Invoke on the API's routes (attach it to callers)",
            export_name=f"{stack_name}-ApiInvokePolicyArn",
        )


@dataclass(frozen=True)
class JobSecret:
    """A secret for a job's field: the secret's whole value, or one field of its JSON."""

    secret: secretsmanager.ISecret
    json_field: str | None = None


@dataclass(frozen=True)
class SchedulerApi:
    """What a ``Job`` needs of a deployed scheduler: its API's base URL, the managed policy that
    lets a function call it, and (an API that checks signatures itself) the keys to sign with."""

    url: str
    invoke_policy: iam.IManagedPolicy
    signing_secret: secretsmanager.ISecret | None = None

    @classmethod
    def from_stack_exports(
        cls, scope: Construct, stack_name: str = "Scheduler", *, signing_secret: secretsmanager.ISecret | None = None
    ) -> SchedulerApi:
        """The scheduler stack ``stack_name`` of this account and region, through its exports."""
        policy_id = f"SchedulerApiInvokePolicy{stack_name}"
        stack = Stack.of(scope)
        policy = stack.node.try_find_child(policy_id) or iam.ManagedPolicy.from_managed_policy_arn(
            stack, policy_id, Fn.import_value(f"{stack_name}-ApiInvokePolicyArn")
        )
        return cls(Fn.import_value(f"{stack_name}-ApiUrl"), policy, signing_secret)  # type: ignore[arg-type]


def _url_password(url: str) -> str | None:
    """The password of a URL's user info (``amqps://user:PASSWORD@host``), None without one."""
    authority = url.split("://", 1)[-1].split("/", 1)[0]
    if "@" not in authority:
        return None
    user_info = authority.rsplit("@", 1)[0]
    return user_info.split(":", 1)[1] if ":" in user_info else None


def check_definition(definition: Mapping[str, Any]) -> None:
    """Refuse, at synth time, a definition without a name or that would carry a secret in the
    template (a secret's place holds ``"***"`` or nothing: ``secrets=`` fills it): in its target
    and in each alert rule's (an auth's secret, a URL's password, a credential header)."""
    if not isinstance(definition.get("name"), str) or not definition["name"]:
        raise ValueError("a Job's definition needs its name (a job is kept in step by its name)")
    _check_target(definition.get("target"), "target")
    alerts = definition.get("alerts")
    for i, rule in enumerate(alerts if isinstance(alerts, list) else []):
        if isinstance(rule, Mapping):
            _check_target(rule.get("target"), f"alerts.{i}.target")


# The paths ``secrets=`` may fill: a target's (a job's, an alert rule's) auth secret, its URL (an
# AMQP URL with its password) or a credential header.
_SECRET_PATH = re.compile(r"^(alerts\.\d+\.)?target\.(auth\.(password|token|value)|url|headers\.([^.]+))\Z")


def check_secret_paths(paths: Iterable[str], definition: Mapping[str, Any]) -> None:
    """Refuse, at synth time, a ``secrets=`` path that names no secret's place (a typo such as
    ``target.auth.tokne`` would be a 400 at deployment), a header whose name is not a
    credential's, or the ``url`` of a target that is not AMQP (only a broker URL's password is
    sealed: an HTTP URL, a webhook's, would be stored and answered as written)."""
    for path in paths:
        found = _SECRET_PATH.match(path)
        if found is None:
            raise ValueError(
                f"secrets: {path}: not a secret's place; one of target.auth.password, target.auth.token, "
                "target.auth.value, target.url, target.headers.<credential header>, the same under alerts.<n>."
            )
        if path.endswith("target.url") and _target_at(definition, found.group(1)).get("type") != "amqp":
            raise ValueError(
                f"secrets: {path}: only an AMQP target's url holds a secret (its password); another target's url "
                "would be stored and answered as written: put its credential in auth or a credential header"
            )
        header = found.group(4)
        if header is not None and not C.is_secret_header(header):
            raise ValueError(
                f"secrets: {path}: {header} is not a credential header (Authorization, *token*, *key*, *secret*, "
                "*password*...): its value would be stored and answered as written"
            )


def _target_at(definition: Mapping[str, Any], alert: str | None) -> Mapping[str, Any]:
    """The target of a ``secrets=`` path: the job's, or the alert rule's (``alerts.<n>.``)."""
    owner: Any = definition
    if alert:
        rules = definition.get("alerts")
        index = int(alert.split(".")[1])
        owner = rules[index] if isinstance(rules, list) and index < len(rules) else {}
    target = owner.get("target") if isinstance(owner, Mapping) else None
    return target if isinstance(target, Mapping) else {}


def _check_target(given: Any, where: str) -> None:
    target: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    auth: Mapping[str, Any] = target["auth"] if isinstance(target.get("auth"), Mapping) else {}
    places = [f"auth.{key}" for key in SECRET_FIELDS if auth.get(key) not in (None, "", "***")]
    headers: Mapping[str, Any] = target["headers"] if isinstance(target.get("headers"), Mapping) else {}
    places += [f"headers.{name}" for name, value in headers.items() if C.is_secret_header(name) and value != "***"]
    if places:
        raise ValueError(
            f"{where}.{places[0]}: a secret may not be written in a Job's definition (the template is readable by "
            f"whoever may read the stack); write it as *** and give secrets={{'{where}.{places[0]}': "
            "<a Secrets Manager secret>}"
        )
    if _url_password(str(target.get("url") or "")) not in (None, "***"):
        raise ValueError(
            f"{where}.url: a URL with a password is a secret; write the password as *** and give "
            f"secrets={{'{where}.url': <a secret holding the whole URL>}}"
        )


def _provider_code() -> lambda_.Code:
    """The function's code: its handler and the few modules it imports, staged by content."""
    digest = hashlib.sha256()
    for name in PROVIDER_FILES:
        digest.update(name.encode() + b"\0" + (FUNCTIONS_DIR / name).read_bytes())
    staging = Path(tempfile.gettempdir()) / f"scheduler-jobs-provider-{digest.hexdigest()[:16]}"
    if not (staging / "jobs_handler.py").exists():
        partial = Path(tempfile.mkdtemp(prefix="scheduler-jobs-provider-"))
        for name in PROVIDER_FILES:
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(FUNCTIONS_DIR / name, partial / name)
        try:
            partial.rename(staging)
        except OSError:  # staged meanwhile by another synth
            shutil.rmtree(partial, ignore_errors=True)
    return lambda_.Code.from_asset(str(staging))


class JobProvider(Construct):
    """The function behind every ``Job`` of a stack that calls one API (made once, shared)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api: SchedulerApi,
        python_version: str = LATEST_PYTHON,
        role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.given_role, self.python_version = role, python_version
        log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=getattr(lambda_.Runtime, "PYTHON_" + python_version.replace(".", "_")),
            architecture=lambda_.Architecture.ARM_64,
            code=_provider_code(),
            handler=HANDLER,
            description="Keeps scheduler jobs in step with this stack (Custom::SchedulerJob)",
            timeout=Duration.minutes(2),
            memory_size=256,
            log_group=log_group,
            role=role,
        )
        self.function.role.add_managed_policy(api.invoke_policy)  # type: ignore[union-attr]
        if api.signing_secret is not None:
            api.signing_secret.grant_read(self.function)
        findings = {LAMBDA_BASIC: "AWS-managed policy that only lets the function write its own CloudWatch logs."}
        if python_version != LATEST_PYTHON:
            findings["AwsSolutions-L1"] = (
                f"Python {python_version} chosen by the Job's python_version (an emulator that runs functions with "
                "the host's interpreter)."
            )
        acknowledge(self, findings)

    @classmethod
    def of(cls, scope: Construct, api: SchedulerApi, python_version: str, role: iam.IRole | None) -> JobProvider:
        """The stack's provider for ``api`` (made on first use)."""
        stack = Stack.of(scope)
        endpoint = json.dumps(stack.resolve(api.url), sort_keys=True)
        construct_id = "SchedulerJobProvider" + hashlib.sha256(endpoint.encode()).hexdigest()[:8]
        found = stack.node.try_find_child(construct_id)
        if isinstance(found, JobProvider):
            if (role, python_version) != (found.given_role, found.python_version):
                raise ValueError(
                    "the Jobs of a stack that call one API share one function: give them the same role= and "
                    "python_version="
                )
            return found
        return cls(stack, construct_id, api=api, python_version=python_version, role=role)


class Job(Construct):
    """A scheduler job that lives and dies with this stack (see the module's documentation).

    ``job_id`` and ``job_name`` are the job's id and name once deployed (tokens)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api: SchedulerApi,
        definition: Mapping[str, Any],
        secrets: Mapping[str, secretsmanager.ISecret | JobSecret] | None = None,
        secrets_version: str | None = None,
        python_version: str = LATEST_PYTHON,
        role: iam.IRole | None = None,
    ) -> None:
        """``secrets_version``: any text that changes when a secret is rotated (a version id, a
        date): a deployment sends the job again, with the secrets read anew, only when one of the
        resource's properties changed, and a rotation changes none of them."""
        super().__init__(scope, construct_id)
        secrets = dict(secrets or {})
        check_definition(definition)
        check_secret_paths(secrets, definition)
        provider = JobProvider.of(self, api, python_version, role)
        wired: dict[str, Any] = {}
        for path, given in secrets.items():
            secret = given.secret if isinstance(given, JobSecret) else given
            field = given.json_field if isinstance(given, JobSecret) else None
            secret.grant_read(provider.function)
            wired[path] = [secret.secret_arn, field] if field else secret.secret_arn
        properties: dict[str, Any] = {
            "Endpoint": api.url,
            "Definition": Stack.of(self).to_json_string(dict(definition)),
            "Secrets": Stack.of(self).to_json_string(wired) if wired else "{}",
        }
        if secrets_version is not None:
            properties["SecretsVersion"] = secrets_version
        if api.signing_secret is not None:
            properties["SigningSecretArn"] = api.signing_secret.secret_arn
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=provider.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties=properties,
        )
        self.job_id = self.resource.get_att_string("JobId")
        self.job_name = self.resource.get_att_string("JobName")
