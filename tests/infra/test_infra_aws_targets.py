"""The executor's right for AWS targets: sts:AssumeRole only, on the roles the context allows;
none, and AWS targets refused by the API, where the executor cannot reach AWS (no NAT gateway)."""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C
from tests.infra.test_infra_functions import actions, statements

PARTITION = {"Ref": "AWS::Partition"}


def assume_role_resources(synth, handler: str) -> list:
    found = [s for s in statements(synth, handler) if "sts:AssumeRole" in actions(s)]
    for statement in found:
        assert actions(statement) == ["sts:AssumeRole"], statement
    return [r for s in found for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]


def assume_role_conditions(synth, handler: str) -> list:
    return [s.get("Condition") for s in statements(synth, handler) if "sts:AssumeRole" in actions(s)]


def test_executor_may_assume_any_role_tagged_for_it_by_default_and_nothing_else_of_the_target_services(aws):
    """A role that trusts the executor's whole account (its root), with no ExternalId asked,
    would serve any tenant: by default the executor may assume only roles tagged
    ``scheduler-target=true`` (the tag is the role owner's consent)."""
    assert assume_role_resources(aws, C.EXECUTOR_HANDLER) == [{"Fn::Join": ["", ["arn:", PARTITION, ":iam::*:role/*"]]}]
    assert assume_role_conditions(aws, C.EXECUTOR_HANDLER) == [
        {"StringEquals": {"aws:ResourceTag/scheduler-target": "true"}}
    ]
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        assert assume_role_resources(aws, handler) == [], handler
    for statement in statements(aws, C.EXECUTOR_HANDLER):
        if "Fn::GetAtt" in statement["Resource"]:  # the stack's own resources (its dead-letter queue)
            continue
        assert not any(
            a.split(":")[0] in ("sqs", "sns", "events") or a == "lambda:InvokeFunction" for a in actions(statement)
        ), statement


def test_target_role_arns_restrict_the_roles_and_the_tag_may_be_another_or_none(synthesize):
    other = synthesize("other")
    resources = assume_role_resources(other, C.EXECUTOR_HANDLER)
    assert len(resources) == 2 and "arn:aws:iam::123456789012:role/exact" in resources
    assert {"Fn::Join": ["", ["arn:", PARTITION, ":iam::*:role/scheduler-targets/*"]]} in resources
    assert assume_role_conditions(other, C.EXECUTOR_HANDLER) == [None]  # target_role_tag=none: the list alone


def test_bad_target_role_tags_are_refused():
    from aws_cdk import App

    from infra.config import Config

    def tag(value: object) -> str:
        return Config.from_context(App(context={"target_role_tag": value}).node).target_role_tag

    assert tag("team:scheduler") == "team:scheduler" and tag("none") == "" and tag("") == ""
    for bad in ("aws:anything", "a" * 129, "bad,tag", 'quo"te'):
        with pytest.raises(ValueError, match="target_role_tag"):
            tag(bad)


def test_bad_target_role_arns_are_refused():
    from aws_cdk import App

    from infra.config import Config

    with pytest.raises(ValueError, match="target_role_arns"):
        Config.from_context(App(context={"target_role_arns": "scheduler-targets"}).node)
    config = Config.from_context(App(context={"target_role_arns": ["/a/", "arn:aws:iam::1:role/b"]}).node)
    assert config.target_role_arns == ("/a/", "arn:aws:iam::1:role/b")


# The interface endpoints AWS targets would need without a NAT gateway (STS for the role, then
# the target's service); the lean deployment has none of them, on purpose (README, "Context options").
AWS_TARGET_ENDPOINT_SERVICES = (".sts", ".sqs", ".sns", ".events")


def test_without_a_nat_gateway_the_api_refuses_aws_targets_and_the_executor_assumes_no_role(lean):
    """nat_gateways=0: no route to STS or the target services, and no interface endpoints for them
    (four more would add about $29 a month per AZ to a deployment chosen for its low cost, and
    reach targets in the stack's own region only): the API is told (SCHEDULER_AWS_TARGETS=false) and refuses AWS and
    SigV4 targets with a 400 at write time; the executor is granted no role to assume."""
    services = [str(e["Properties"]["ServiceName"]) for e in lean.resources("AWS::EC2::VPCEndpoint").values()]
    assert not [s for s in services for suffix in AWS_TARGET_ENDPOINT_SERVICES if suffix in s]
    assert lean.function(C.API_HANDLER)[1]["Environment"]["Variables"][C.ENV_AWS_TARGETS] == "false"
    assert assume_role_resources(lean, C.EXECUTOR_HANDLER) == []


def test_with_a_route_out_aws_targets_are_accepted(aws, aurora, localstack):
    for synth in (aws, aurora, localstack):
        assert C.ENV_AWS_TARGETS not in synth.function(C.API_HANDLER)[1]["Environment"]["Variables"]
        assert assume_role_resources(synth, C.EXECUTOR_HANDLER) != []


def test_the_refusal_follows_the_nat_gateways():
    from aws_cdk import App

    from infra.config import Config

    def config(**context: object) -> Config:
        return Config.from_context(App(context=context).node)

    assert config().aws_targets
    assert not config(nat_gateways="0").aws_targets
    assert config(nat_gateways="0", localstack="true").aws_targets  # LocalStack's endpoint is reachable
