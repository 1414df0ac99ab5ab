"""The executor's right for AWS targets: sts:AssumeRole only, on the roles the context allows."""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C  # noqa: E402
from tests.infra.test_infra_functions import actions, statements  # noqa: E402

PARTITION = {"Ref": "AWS::Partition"}


def assume_role_resources(synth, handler: str) -> list:
    found = [s for s in statements(synth, handler) if "sts:AssumeRole" in actions(s)]
    for statement in found:
        assert actions(statement) == ["sts:AssumeRole"], statement
    return [r for s in found for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]


def test_executor_may_assume_any_role_by_default_and_nothing_else_of_the_target_services(aws):
    assert assume_role_resources(aws, C.EXECUTOR_HANDLER) == [{"Fn::Join": ["", ["arn:", PARTITION, ":iam::*:role/*"]]}]
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        assert assume_role_resources(aws, handler) == [], handler
    for statement in statements(aws, C.EXECUTOR_HANDLER):
        if "Fn::GetAtt" in statement["Resource"]:  # the stack's own resources (its dead-letter queue)
            continue
        assert not any(
            a.split(":")[0] in ("sqs", "sns", "events") or a == "lambda:InvokeFunction" for a in actions(statement)
        ), statement


def test_target_role_arns_restrict_the_roles(lean):
    resources = assume_role_resources(lean, C.EXECUTOR_HANDLER)
    assert len(resources) == 2 and "arn:aws:iam::123456789012:role/exact" in resources
    assert {"Fn::Join": ["", ["arn:", PARTITION, ":iam::*:role/scheduler-targets/*"]]} in resources


def test_bad_target_role_arns_are_refused():
    from aws_cdk import App

    from infra.config import Config

    with pytest.raises(ValueError, match="target_role_arns"):
        Config.from_context(App(context={"target_role_arns": "scheduler-targets"}).node)
    config = Config.from_context(App(context={"target_role_arns": ["/a/", "arn:aws:iam::1:role/b"]}).node)
    assert config.target_role_arns == ("/a/", "arn:aws:iam::1:role/b")
