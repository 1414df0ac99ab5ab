"""What an operator needs before `cdk deploy` in production: rotation that can reach Secrets
Manager, an application database user, alarms, bounded executor concurrency, no secret in any
function's environment, stack-scoped names."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C
from tests.infra.test_infra_broker_observability import alarms, metric_names
from tests.infra.test_infra_functions import actions, statements

HTTPS = 443


def group_id(synth, prefix: str) -> str:
    (found,) = [k for k in synth.resources("AWS::EC2::SecurityGroup") if k.startswith(prefix)]
    return found


def admits(template: dict, target: str, source: str, port: int) -> bool:
    """Whether security group ``target`` takes ``port`` from ``source`` (an ingress rule, either
    form), and ``source`` may send it there (all outbound, or an egress rule)."""
    resources = template["Resources"]
    ref = {"Fn::GetAtt": [source, "GroupId"]}
    dest = {"Fn::GetAtt": [target, "GroupId"]}
    ingress = any(
        r["Type"] == "AWS::EC2::SecurityGroupIngress"
        and r["Properties"]["GroupId"] == dest
        and r["Properties"].get("SourceSecurityGroupId") == ref
        and r["Properties"]["FromPort"] <= port <= r["Properties"]["ToPort"]
        for r in resources.values()
    ) or any(
        rule.get("SourceSecurityGroupId") == ref and rule["FromPort"] <= port <= rule["ToPort"]
        for rule in resources[target]["Properties"].get("SecurityGroupIngress", [])
    )
    egress_rules = resources[source]["Properties"].get("SecurityGroupEgress", [])
    open_out = any(rule.get("CidrIp") == "0.0.0.0/0" and rule.get("IpProtocol") == "-1" for rule in egress_rules)
    egress = open_out or any(
        r["Type"] == "AWS::EC2::SecurityGroupEgress"
        and r["Properties"]["GroupId"] == ref
        and r["Properties"].get("DestinationSecurityGroupId") == dest
        and r["Properties"]["FromPort"] <= port <= r["Properties"]["ToPort"]
        for r in resources.values()
    )
    return ingress and egress


# -- 1. rotation --------------------------------------------------------------------------------


def test_rotation_functions_reach_secrets_manager_through_the_endpoint(aws):
    endpoints = group_id(aws, "NetworkEndpointsSecurityGroup")
    rotation = group_id(aws, "DatabaseRotationSecurityGroup")
    assert admits(aws.json, endpoints, rotation, HTTPS)
    # Every hosted rotation runs in that group, through the Secrets Manager endpoint.
    apps = aws.resources("AWS::Serverless::Application").values()
    assert len(apps) == 2
    for app in apps:
        assert app["Properties"]["Parameters"]["vpcSecurityGroupIds"] == {"Fn::GetAtt": [rotation, "GroupId"]}


def test_the_rotation_rule_check_fails_on_the_broken_form(aws):
    """The template as it was (no rule from the rotation group) is caught by the same check."""
    endpoints = group_id(aws, "NetworkEndpointsSecurityGroup")
    rotation = group_id(aws, "DatabaseRotationSecurityGroup")
    broken = json.loads(json.dumps(aws.json))
    broken["Resources"] = {
        k: v
        for k, v in broken["Resources"].items()
        if not (
            v["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
            and {"Fn::GetAtt": [rotation, "GroupId"]} in v["Properties"].values()
            and {"Fn::GetAtt": [endpoints, "GroupId"]} in v["Properties"].values()
        )
    }
    assert not admits(broken, endpoints, rotation, HTTPS)


def test_each_rotation_has_a_failure_alarm(aws):
    found = alarms(aws)
    names = {
        app["Properties"]["Parameters"]["functionName"]
        for app in aws.resources("AWS::Serverless::Application").values()
    }
    watched = {alarm["Dimensions"][0]["Value"] for name, alarm in found.items() if name.startswith("RotationFailures")}
    assert watched == names
    for name, alarm in found.items():
        if name.startswith("RotationFailures"):
            assert alarm["MetricName"] == "Errors" and alarm["Namespace"] == "AWS/Lambda"
            assert alarm["TreatMissingData"] == "notBreaching"


# -- 2. the application user, least privilege ----------------------------------------------------


def secret_reads(synth, handler: str) -> list[Any]:
    """The secrets ``handler``'s role may read (each resource of each statement)."""
    found: list[Any] = []
    for statement in statements(synth, handler):
        if "secretsmanager:GetSecretValue" in actions(statement):
            resource = statement["Resource"]
            found.extend(resource if isinstance(resource, list) else [resource])
    return found


def test_functions_log_in_as_the_application_user_and_only_migrate_holds_the_master(aws):
    (master_id,) = [
        k for k in aws.resources("AWS::SecretsManager::SecretTargetAttachment") if "AppCredentials" not in k
    ]
    (app_id,) = [k for k in aws.resources("AWS::SecretsManager::SecretTargetAttachment") if "AppCredentials" in k]
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER):
        env = aws.function(handler)[1]["Environment"]["Variables"]
        assert env[C.ENV_DATABASE_SECRET_ARN] == {"Ref": app_id}, handler
        assert C.ENV_DATABASE_APP_SECRET_ARN not in env
        assert {"Ref": master_id} not in secret_reads(aws, handler), handler
    migrate = aws.function(C.MIGRATE_HANDLER)[1]["Environment"]["Variables"]
    assert migrate[C.ENV_DATABASE_SECRET_ARN] == {"Ref": master_id}
    assert migrate[C.ENV_DATABASE_APP_SECRET_ARN] == {"Ref": app_id}
    assert {"Ref": master_id} in secret_reads(aws, C.MIGRATE_HANDLER)
    (app_secret,) = [v for k, v in aws.resources("AWS::SecretsManager::Secret").items() if "AppCredentials" in k]
    assert f'"username":"{C.APP_DATABASE_USER}"' in json.dumps(
        app_secret["Properties"]["GenerateSecretString"]
    ).replace("\\", "").replace(" ", "")


def test_only_the_executor_reads_the_broker_secret(aws):
    (broker_secret,) = [k for k in aws.resources("AWS::SecretsManager::Secret") if k.startswith("BrokerCredentials")]
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        assert {"Ref": broker_secret} not in secret_reads(aws, handler), handler
    # The executor delivers to the default broker with those credentials: it needs them.
    assert {"Ref": broker_secret} in secret_reads(aws, C.EXECUTOR_HANDLER)


# -- 3. alarms -----------------------------------------------------------------------------------


def test_the_alarms_an_operator_expects_exist_with_missing_data_handled(aws, lean):
    found = alarms(aws)
    assert set(found) >= {
        "Api5xx",
        "ApiLatency",
        "ExecutorErrors",
        "ExecutorThrottles",
        "LatenessP99",
        "DatabaseFreeStorage",
        "DatabaseCpuCredits",
        "ProxyConnections",
        "RotationFailures",
        "RotationFailures2",
    }
    assert metric_names(found["Api5xx"]) == {"5XXError"}
    assert metric_names(found["ApiLatency"]) == {"Latency"}
    assert metric_names(found["ExecutorErrors"]) == {"Errors"}
    assert metric_names(found["ExecutorThrottles"]) == {"Throttles"}
    assert metric_names(found["LatenessP99"]) == {C.METRIC_LATENESS_MS}
    (lateness,) = [m["MetricStat"]["Metric"] for m in found["LatenessP99"]["Metrics"] if "MetricStat" in m]
    assert {"Name": "trigger", "Value": "schedule"} in lateness["Dimensions"]
    assert metric_names(found["DatabaseFreeStorage"]) == {"FreeStorageSpace"}
    assert metric_names(found["DatabaseCpuCredits"]) == {"CPUCreditBalance"}
    assert metric_names(found["ProxyConnections"]) == {"DatabaseConnectionsBorrowLatency"}
    for name, alarm in found.items():
        assert alarm.get("TreatMissingData") in {"notBreaching", "breaching", "missing"}, name
    # Minute precision tolerates more lateness.
    assert alarms(lean)["LatenessP99"]["Threshold"] > found["LatenessP99"]["Threshold"]


# -- 4. bounded executor concurrency -------------------------------------------------------------


def test_executor_concurrency_is_reserved_and_told_to_the_fanout(aws, synthesize):
    _, executor = aws.function(C.EXECUTOR_HANDLER)
    assert executor["ReservedConcurrentExecutions"] == 50
    fanout_env = aws.function(C.FANOUT_HANDLER)[1]["Environment"]["Variables"]
    assert fanout_env[C.ENV_EXECUTOR_CONCURRENCY] == "50"
    other = synthesize("other")
    assert other.function(C.EXECUTOR_HANDLER)[1]["ReservedConcurrentExecutions"] == 7
    assert other.function(C.FANOUT_HANDLER)[1]["Environment"]["Variables"][C.ENV_EXECUTOR_CONCURRENCY] == "7"


# -- 5. no secret in an environment --------------------------------------------------------------


def _secret_parameters(template: dict) -> set[str]:
    return {name for name, p in template.get("Parameters", {}).items() if p.get("NoEcho")}


def resolved_secrets_in_environments(template: dict) -> list[tuple[str, str]]:
    """(function, variable) pairs whose value holds a resolved secret: a dynamic reference to
    Secrets Manager or SSM SecureString, or a NoEcho parameter."""
    hidden = _secret_parameters(template)
    found = []
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        for key, value in resource["Properties"].get("Environment", {}).get("Variables", {}).items():
            text = json.dumps(value)
            if "{{resolve:secretsmanager" in text or "{{resolve:ssm-secure" in text:
                found.append((logical_id, key))
            elif any(json.dumps({"Ref": name}) in text for name in hidden):
                found.append((logical_id, key))
    return found


def test_no_function_environment_holds_a_secret(aws, lean):
    for synth in (aws, lean):
        assert resolved_secrets_in_environments(synth.json) == []


def test_the_environment_check_catches_a_resolved_secret(aws):
    mutated = json.loads(json.dumps(aws.json))
    api_id, _ = aws.function(C.API_HANDLER)
    variables = mutated["Resources"][api_id]["Properties"]["Environment"]["Variables"]
    variables[C.ENV_CURSOR_SECRET] = {
        "Fn::Join": ["", ["{{resolve:secretsmanager:", {"Ref": "X"}, ":SecretString:::}}"]]
    }
    assert resolved_secrets_in_environments(mutated) == [(api_id, C.ENV_CURSOR_SECRET)]


# -- 7. stack-scoped names -----------------------------------------------------------------------


def names_of(synth) -> set[str]:
    """The names a stack claims in its account and region, besides the generated ones: the API's
    name, the metric namespace and service, the alarm topic's display name, tag values."""
    template = synth.json
    found: set[str] = set()
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::ApiGateway::RestApi":
            found.add(props["Name"])
        if resource["Type"] == "AWS::SNS::Topic":
            found.add(props.get("DisplayName", ""))
        if resource["Type"] == "AWS::Lambda::Function":
            variables = props.get("Environment", {}).get("Variables", {})
            for key in (C.ENV_SERVICE_NAME, C.ENV_METRICS_NAMESPACE):
                if key in variables:
                    found.add(variables[key])
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            namespaces = [props.get("Namespace")] + [
                m["MetricStat"]["Metric"]["Namespace"] for m in props.get("Metrics", []) if "MetricStat" in m
            ]
            found.update(ns for ns in namespaces if ns and not ns.startswith("AWS/"))
            for metric in [props] + [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]:
                found.update(d["Value"] for d in metric.get("Dimensions", []) if d["Name"] == "service")
        for tag in props.get("Tags", []) if isinstance(props.get("Tags"), list) else []:
            if isinstance(tag, dict) and tag.get("Key") == "service":
                found.add(tag["Value"])
    found.discard("")
    return found


def test_two_stacks_share_no_name(aws, synthesize):
    other = synthesize("other")
    mine, theirs = names_of(aws), names_of(other)
    assert len(mine) >= 4 and len(theirs) >= 4
    assert mine & theirs == set()
    assert f"{aws.stack.config.stack_name}-api" in mine
