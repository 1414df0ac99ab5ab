"""Fixtures of the infrastructure tests: each variant of the stack is synthesized once per session.

Variants: ``aws`` (cdk.json as it is), ``lean`` (the other side of every option: no broker, no NAT
gateway, minute precision, throw-away database, alarm e-mail), ``localstack``, ``other`` (a
second stack with its own name, executor concurrency and target roles, kept on deletion and its
logs kept 90 days) and ``aurora`` (the production shape: the database as an Aurora Serverless v2
cluster with a reader, the broker a three-node cluster).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.lint import VARIANTS as LINTED_VARIANTS

# Node 20 is past its end of life for jsii; the banner would fill every test report.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

ROOT = Path(__file__).resolve().parents[2]

VARIANTS: dict[str, dict[str, Any]] = {
    "aws": {},
    "lean": {
        "broker": "none",
        "nat_gateways": "0",
        "endpoint_azs": "1",
        "precision": "minute",
        "deletion_protection": "false",
        "db_multi_az": "true",
        "removal_policy": "destroy",
        "alarm_email": "ops@example.com",
        "target_allow_list": "hooks.example.com",
        "fanout_max": "1",
        "claims_per_invoke": "1",
        "xray_sdk": "true",
        "console_url": "https://console.example.com/console/",
        "api_security_policy": "SecurityPolicy_TLS13_1_2_PFS_PQ_2025_09",
    },
    # Same architecture as the AWS variant, so the session builds one layer only.
    "localstack": {"localstack": "true", "architecture": "arm64"},
    # A second stack beside the default one in the same account, its target roles restricted (the
    # lean variant has no NAT gateway, so no AWS targets and no role to assume at all).
    "other": {
        "stack_name": "Other",
        # Kept on deletion, logs kept longer: what follows removal_policy and log_retention_days.
        "removal_policy": "retain",
        "log_retention_days": "90",
        "executor_concurrency": "7",
        "target_role_arns": "/scheduler-targets/,arn:aws:iam::123456789012:role/exact",
        "target_role_tag": "none",
    },
    # The database as an Aurora Serverless v2 cluster, with every Aurora option on, and the broker as
    # a cluster: the template infra/lint.py lints under that name.
    "aurora": LINTED_VARIANTS["aurora"],
}


@dataclass
class Synthesized:
    """One synthesized variant: the stack object and its CloudFormation template."""

    stack: Any
    template: Any  # aws_cdk.assertions.Template

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()

    def resources(self, type_name: str) -> dict[str, dict[str, Any]]:
        """Logical id -> resource, for every resource of that type."""
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_name}

    def function(self, handler: str) -> tuple[str, dict[str, Any]]:
        """The Lambda function with that handler: (logical id, properties)."""
        found = [
            (k, v["Properties"])
            for k, v in self.resources("AWS::Lambda::Function").items()
            if v["Properties"].get("Handler") == handler
        ]
        assert len(found) == 1, f"{len(found)} functions with handler {handler}"
        return found[0]


def cdk_json_context() -> dict[str, Any]:
    """The context of cdk.json (feature flags and defaults), as the CDK CLI would pass it."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    return cdk_json_context()


@pytest.fixture(scope="session")
def synthesize(tmp_path_factory):
    """Synthesize a variant of the app once per session (the nag checks run as part of it)."""
    pytest.importorskip("aws_cdk", reason="the infra extra (aws-cdk-lib, cdk-nag) is not installed")
    from aws_cdk.assertions import Template

    from infra import build_app

    cache: dict[str, Synthesized] = {}

    def get(variant: str) -> Synthesized:
        if variant not in cache:
            context = {**cdk_json_context(), **VARIANTS[variant]}
            app, stack = build_app(context=context, outdir=str(tmp_path_factory.mktemp(f"cdk-{variant}")))
            cache[variant] = Synthesized(stack=stack, template=Template.from_stack(stack))
        return cache[variant]

    return get


@pytest.fixture(scope="session")
def aws(synthesize) -> Synthesized:
    return synthesize("aws")


@pytest.fixture(scope="session")
def lean(synthesize) -> Synthesized:
    return synthesize("lean")


@pytest.fixture(scope="session")
def localstack(synthesize) -> Synthesized:
    return synthesize("localstack")


@pytest.fixture(scope="session")
def aurora(synthesize) -> Synthesized:
    return synthesize("aurora")
