"""Amazon MQ broker, dashboard and alarms."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C

DASHBOARD_TITLES = (
    "Executions per minute by status",
    "Failures per minute",
    "Lateness (ms)",
    "Claimed vs dispatched per minute",
    "Due backlog and oldest due age",
    "Fan-out duration (ms)",
    "Executor errors and throttles",
    "Executor duration (ms)",
    "API 4xx / 5xx",
    "API latency (ms)",
    "Database CPU (%)",
    "Database connections",
    "Dead-letter queue depth",
    "RDS Proxy borrow latency (us)",
    "RDS Proxy pinned sessions",
    "Partition upkeep: steps left to the next run",
    "Waits for a target's slot",
    "Occurrences skipped, pauses ended (per minute)",
    "Alert deliveries per minute",
)


def test_rabbitmq_broker_is_private_and_its_url_is_the_executors_default(aws):
    ((broker_id, broker),) = aws.resources("AWS::AmazonMQ::Broker").items()
    props = broker["Properties"]
    assert props["EngineType"] == "RABBITMQ"
    assert props["HostInstanceType"] == "mq.t3.micro"
    assert props["PubliclyAccessible"] is False
    assert len(props["SubnetIds"]) == 1
    (user,) = props["Users"]
    assert "{{resolve:secretsmanager:" in json.dumps(user["Password"])
    env = aws.function(C.EXECUTOR_HANDLER)[1]["Environment"]["Variables"]
    assert env[C.ENV_DEFAULT_BROKER_URL] == {"Fn::Select": [0, {"Fn::GetAtt": [broker_id, "AmqpEndpoints"]}]}
    secret_ref = env[C.ENV_DEFAULT_BROKER_SECRET_ARN]["Ref"]
    assert aws.json["Resources"][secret_ref]["Type"] == "AWS::SecretsManager::Secret"
    assert C.ENV_DEFAULT_BROKER_SECRET_ARN not in aws.function(C.API_HANDLER)[1]["Environment"]["Variables"]


def test_a_cluster_broker_runs_three_nodes_with_its_endpoint_in_each_az(aurora, aws):
    """broker_deployment=cluster: Amazon MQ's cluster (three nodes across AZs, one endpoint), on an
    instance type that runs one (mq.m7g.large by default), its endpoint in the isolated subnet of
    each of the VPC's AZs; the rest as one node's (private, the executor's default, alarmed)."""
    ((broker_id, broker),) = aurora.resources("AWS::AmazonMQ::Broker").items()
    props = broker["Properties"]
    assert (props["DeploymentMode"], props["HostInstanceType"]) == ("CLUSTER_MULTI_AZ", "mq.m7g.large")
    assert props["EngineVersion"] == "3.13" and props["PubliclyAccessible"] is False
    subnets = aurora.resources("AWS::EC2::Subnet")
    zones = [subnets[ref["Ref"]]["Properties"]["AvailabilityZone"] for ref in props["SubnetIds"]]
    assert len(zones) == 2 and len({json.dumps(z) for z in zones}) == 2  # one per AZ of the VPC
    assert all("Isolated" in ref["Ref"] for ref in props["SubnetIds"])
    env = aurora.function(C.EXECUTOR_HANDLER)[1]["Environment"]["Variables"]
    assert env[C.ENV_DEFAULT_BROKER_URL] == {"Fn::Select": [0, {"Fn::GetAtt": [broker_id, "AmqpEndpoints"]}]}
    assert {"BrokerMemory", "BrokerDiskFree"} <= set(alarms(aurora))
    ((single_id, single),) = aws.resources("AWS::AmazonMQ::Broker").items()
    assert single["Properties"]["DeploymentMode"] == "SINGLE_INSTANCE"
    # A switch between the two replaces the broker, which CloudFormation does for a named
    # resource only under a new name: the cluster's name is its own, the single node's as ever.
    assert broker_id == single_id
    assert props["BrokerName"].endswith("-cluster") and not single["Properties"]["BrokerName"].endswith("-cluster")
    # Its name keeps the hash of the construct's path (two stacks' long names differ by it alone).
    assert re.search(r"-[0-9A-F]{8}-cluster$", props["BrokerName"]) and len(props["BrokerName"]) <= 50


def test_the_broker_is_open_to_the_deployment_s_own_account_by_default(aws):
    """One broker login serves every AMQP job without a url: by default only the principals of
    the deployment's account may use it (broker_owners), in the API (a 400) and the executor."""
    owners = {"Fn::Join": ["", ["arn:*:*::", {"Ref": "AWS::AccountId"}, ":*"]]}
    for handler in (C.API_HANDLER, C.EXECUTOR_HANDLER):
        assert aws.function(handler)[1]["Environment"]["Variables"][C.ENV_DEFAULT_BROKER_OWNERS] == owners, handler


def test_broker_owners_are_account_any_or_patterns():
    from aws_cdk import App

    from infra.config import Config

    def owners(value: object) -> tuple[str, ...]:
        return Config.from_context(App(context={"broker_owners": value}).node).broker_owners

    assert owners("account") == ("account",) and owners("*") == ()
    assert owners("account, arn:aws:iam::2:user/*") == ("account", "arn:aws:iam::2:user/*")
    assert (
        Config.from_context(App(context={"broker_owners": "account,arn:aws:iam::2:user/*"}).node).broker_owner_patterns(
            "1"
        )
        == "arn:*:*::1:*,arn:aws:iam::2:user/*"
    )
    assert owners("arn:aws:iam::1:user/a, arn:aws:sts::2:*") == ("arn:aws:iam::1:user/a", "arn:aws:sts::2:*")
    assert Config.from_context(App(context={"broker_owners": "*"}).node).broker_owner_patterns("1") == ""
    for bad in ("", "alice", "arn:*", "*,account"):
        with pytest.raises(ValueError, match="broker_owners"):
            owners(bad)


def test_broker_none_means_no_broker_and_no_default(lean):
    assert lean.resources("AWS::AmazonMQ::Broker") == {}
    for handler in (C.API_HANDLER, C.EXECUTOR_HANDLER):
        env = lean.function(handler)[1]["Environment"]["Variables"]
        assert C.ENV_DEFAULT_BROKER_URL not in env
        assert C.ENV_DEFAULT_BROKER_SECRET_ARN not in env


def test_dashboard_shows_the_scheduler_the_functions_the_api_and_the_database(aws):
    (dashboard,) = aws.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for title in DASHBOARD_TITLES:
        assert title in body, title
    for metric in (
        C.METRIC_EXECUTIONS,
        C.METRIC_LATENESS_MS,
        C.METRIC_CLAIMED,
        C.METRIC_DISPATCHED,
        C.METRIC_DUE_BACKLOG,
        C.METRIC_OLDEST_DUE_AGE_S,
        C.METRIC_FANOUT_DURATION_MS,
    ):
        assert f'\\\\"{metric}\\\\"' in body or f'\\"{metric}\\"' in body, metric
    assert aws.stack.config.metrics_namespace in body


def alarms(synth) -> dict[str, dict]:
    """Alarms by construct id (logical id ``Observability<id><8 hex digits>``)."""
    return {
        logical_id.removeprefix("Observability")[:-8]: alarm["Properties"]
        for logical_id, alarm in synth.resources("AWS::CloudWatch::Alarm").items()
    }


def metric_names(alarm: dict) -> set[str]:
    if "MetricName" in alarm:
        return {alarm["MetricName"]}
    return {m["MetricStat"]["Metric"]["MetricName"] for m in alarm["Metrics"] if "MetricStat" in m}


def test_alarms_notify_the_topic(aws):
    found = alarms(aws)
    assert set(found) >= {"DeadLetterQueueNotEmpty", "FailureRate", "BacklogAge", "FanoutErrors", "DatabaseCpu"}
    (topic_id,) = aws.resources("AWS::SNS::Topic")
    for name, alarm in found.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
    assert found["BacklogAge"]["Threshold"] == 120
    assert metric_names(found["BacklogAge"]) == {C.METRIC_OLDEST_DUE_AGE_S}
    assert found["DeadLetterQueueNotEmpty"]["Threshold"] == 1
    assert metric_names(found["DeadLetterQueueNotEmpty"]) == {"ApproximateNumberOfMessagesVisible"}
    assert metric_names(found["FanoutErrors"]) == {"Errors"}
    assert metric_names(found["DatabaseCpu"]) == {"CPUUtilization"}
    assert metric_names(found["FailureRate"]) == {C.METRIC_EXECUTIONS}
    assert "IF(" in json.dumps(found["FailureRate"]["Metrics"])


def test_the_fanout_heartbeat_alarm_fires_after_one_period_of_five_minutes(aws):
    """Fewer than 3 ticks in 5 minutes (the README's and the description's words), at once: one
    period, one datapoint, and no tick at all is a breach."""
    alarm = alarms(aws)["FanoutNotRunning"]
    assert metric_names(alarm) == {"Invocations"}
    assert (alarm["Period"], alarm["Statistic"], alarm["Threshold"]) == (300, "Sum", 3)
    assert alarm["ComparisonOperator"] == "LessThanThreshold"
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (1, 1)
    assert alarm["TreatMissingData"] == "breaching"
    assert "fewer than 3 times in 5 minutes" in alarm["AlarmDescription"]


def test_partition_upkeep_left_undone_for_a_day_is_alarmed(aws):
    """Every fan-out run for 24 hours left steps to the next (the fewest in each hour above 0):
    a lock that never comes free, while the days ahead run out 3 days later."""
    alarm = alarms(aws)["PartitionsSkipped"]
    assert metric_names(alarm) == {C.METRIC_PARTITIONS_SKIPPED}
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Minimum", 3600, 24)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["TreatMissingData"] == "notBreaching"  # no fan-out at all is FanoutNotRunning's
    assert {"Name": "service", "Value": aws.stack.config.service_name} in alarm["Dimensions"]
    widget = graph(dashboard_body(aws), "Partition upkeep: steps left to the next run")
    assert {m[1] for m in widget["metrics"]} == {C.METRIC_PARTITIONS_SKIPPED}


def test_a_limited_jobs_wait_for_its_slot_is_graphed_apart_from_the_lateness(aws):
    body = dashboard_body(aws)
    waits = graph(body, "Waits for a target's slot")
    assert [(m[1], m[-1].get("stat")) for m in waits["metrics"]] == [
        (C.METRIC_SLOT_WAIT_MS, "p50"),
        (C.METRIC_SLOT_WAIT_MS, "p99"),
        (C.METRIC_HANDED_BACK, "Sum"),
    ]
    assert C.METRIC_SLOT_WAIT_MS not in json.dumps(graph(body, "Lateness (ms)"))
    assert C.METRIC_SLOT_WAIT_MS not in json.dumps(alarms(aws)["LatenessP99"])


def test_the_dashboard_graphs_every_figure_the_runner_emits(aws):
    """What the code emitted and no widget showed: skipped occurrences (as executions, and by
    reason), chained runs' lateness, helper fan-outs, pauses ended, hand-backs, alert deliveries."""
    body = dashboard_body(aws)

    def lines(title: str) -> list[tuple]:
        return [tuple(part for part in m if not isinstance(part, dict))[1:] for m in graph(body, title)["metrics"]]

    service = ("service", aws.stack.config.service_name)
    assert (C.METRIC_EXECUTIONS, *service, "status", "skipped") in lines("Executions per minute by status")
    assert (C.METRIC_LATENESS_MS, *service, "trigger", "chain") in lines("Lateness (ms)")
    assert (C.METRIC_FANOUT_HELPERS, *service) in lines("Claimed vs dispatched per minute")
    skipped = graph(body, "Occurrences skipped, pauses ended (per minute)")["metrics"]
    assert "SEARCH(" in skipped[0][0]["expression"] and C.METRIC_SKIPPED in skipped[0][0]["expression"]
    assert (C.METRIC_RESUMED, *service) in lines("Occurrences skipped, pauses ended (per minute)")
    assert (C.METRIC_HANDED_BACK, *service) in lines("Waits for a target's slot")
    assert [line[-1] for line in lines("Alert deliveries per minute")] == ["delivered", "pending", "failed"]


def test_an_alert_given_up_is_alarmed(aws):
    alarm = alarms(aws)["AlertDeliveriesFailed"]
    assert metric_names(alarm) == {C.METRIC_ALERT_DELIVERIES}
    assert {"Name": "status", "Value": "failed"} in alarm["Dimensions"]
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"]) == ("Sum", 300, 1)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert alarm["TreatMissingData"] == "notBreaching"


def test_alarm_email_is_optional(aws, lean):
    assert aws.resources("AWS::SNS::Subscription") == {}
    (subscription,) = lean.resources("AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "ops@example.com"


def test_alarm_topic_requires_tls(aws):
    (policy,) = aws.resources("AWS::SNS::TopicPolicy").values()
    statement = json.dumps(policy["Properties"]["PolicyDocument"])
    assert "aws:SecureTransport" in statement


def dashboard_body(synth) -> dict:
    """The dashboard's JSON body, each reference to a resource written as ``${LogicalId}`` (a Ref)
    or ``${LogicalId.Attribute}`` (a GetAtt)."""
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]

    def render(part: object) -> str:
        if isinstance(part, str):
            return part
        assert isinstance(part, dict), part
        if "Ref" in part:
            return "${" + part["Ref"] + "}"
        logical_id, attribute = part["Fn::GetAtt"]
        return "${" + f"{logical_id}.{attribute}" + "}"

    return json.loads("".join(render(part) for part in parts))


@pytest.mark.parametrize("variant", ["aws", "lean", "aurora"])
def test_the_dashboard_opens_with_the_state_of_every_alarm(variant, synthesize):
    synth = synthesize(variant)
    header, status, *graphs = dashboard_body(synth)["widgets"]
    assert header["type"] == "text"
    assert status["type"] == "alarm" and status["width"] == 24 and status["y"] == header["height"]
    assert status["properties"]["sortBy"] == "stateUpdatedTimestamp"  # ALARM first, then the rest
    every_alarm = {f"${{{logical_id}.Arn}}" for logical_id in synth.resources("AWS::CloudWatch::Alarm")}
    assert len(status["properties"]["alarms"]) == len(every_alarm)
    assert set(status["properties"]["alarms"]) == every_alarm
    assert all(widget["type"] == "metric" for widget in graphs)


def graph(body: dict, title: str) -> dict:
    (found,) = [w["properties"] for w in body["widgets"] if w["properties"].get("title") == title]
    return found


@pytest.mark.parametrize("variant", ["aws", "aurora"])
def test_the_dashboard_shows_the_proxys_borrow_latency_and_pinned_sessions(variant, synthesize):
    synth = synthesize(variant)
    ((proxy_id, _),) = synth.resources("AWS::RDS::DBProxy").items()
    body = dashboard_body(synth)
    borrow = graph(body, "RDS Proxy borrow latency (us)")
    assert [m[:4] for m in borrow["metrics"]] == [
        ["AWS/RDS", "DatabaseConnectionsBorrowLatency", "ProxyName", f"${{{proxy_id}}}"]
    ] * 2
    assert [m[4].get("stat", "Average") for m in borrow["metrics"]] == ["Average", "Maximum"]
    assert borrow["annotations"]["horizontal"][0]["value"] == alarms(synth)["ProxyConnections"]["Threshold"]
    pinned = graph(body, "RDS Proxy pinned sessions")
    assert [m[:4] for m in pinned["metrics"]] == [
        ["AWS/RDS", "DatabaseConnectionsCurrentlySessionPinned", "ProxyName", f"${{{proxy_id}}}"]
    ]


@pytest.mark.parametrize("variant", ["aws", "other"])
def test_the_broker_logs_keeps_a_maintenance_window_and_is_alarmed(variant, synthesize):
    """The broker's general log goes to CloudWatch Logs, kept log_retention_days (set by CDK's
    log-retention function: Amazon MQ makes that group); minor upgrades wait for Sunday 03:00 UTC;
    two alarms watch what makes RabbitMQ block publishers (memory, free disk)."""
    synth = synthesize(variant)
    ((broker_id, broker),) = synth.resources("AWS::AmazonMQ::Broker").items()
    props = broker["Properties"]
    assert props["Logs"] == {"General": True}
    assert props["MaintenanceWindowStartTime"] == {"DayOfWeek": "SUNDAY", "TimeOfDay": "03:00", "TimeZone": "UTC"}
    assert props["DeploymentMode"] == "SINGLE_INSTANCE"
    (retention,) = [
        r
        for r in synth.resources("Custom::LogRetention").values()
        if r["Properties"]["LogGroupName"]
        == {"Fn::Join": ["", ["/aws/amazonmq/broker/", {"Ref": broker_id}, "/general"]]}
    ]
    assert retention["Properties"]["RetentionInDays"] == synth.stack.config.log_retention_days
    found = alarms(synth)
    (topic_id,) = synth.resources("AWS::SNS::Topic")
    watched = {
        "BrokerMemory": {"RabbitMQMemUsed", "RabbitMQMemLimit"},
        "BrokerDiskFree": {"RabbitMQDiskFree", "RabbitMQDiskFreeLimit"},
    }
    for name, metrics in watched.items():
        alarm = found[name]
        assert metric_names(alarm) == metrics, name
        for metric in alarm["Metrics"]:
            if "MetricStat" in metric:
                assert metric["MetricStat"]["Metric"]["Namespace"] == "AWS/AmazonMQ"
                assert metric["MetricStat"]["Metric"]["Dimensions"] == [
                    {"Name": "Broker", "Value": props["BrokerName"]}
                ]
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
    assert found["BrokerMemory"]["ComparisonOperator"] == "GreaterThanThreshold"
    assert found["BrokerDiskFree"]["ComparisonOperator"] == "LessThanThreshold"


def test_no_broker_no_broker_alarms(lean):
    assert not {"BrokerMemory", "BrokerDiskFree"} & set(alarms(lean))
