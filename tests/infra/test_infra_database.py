"""Database: encrypted PostgreSQL, backups, protection by context, rotated credentials, RDS Proxy."""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import C


def only(resources: dict) -> dict:
    (resource,) = resources.values()
    return resource


def test_postgres_current_major_encrypted_with_a_customer_key(aws):
    instance = only(aws.resources("AWS::RDS::DBInstance"))
    props = instance["Properties"]
    assert props["Engine"] == "postgres"
    assert int(props["EngineVersion"].split(".")[0]) >= 17
    assert props["StorageEncrypted"] is True
    key_id = props["KmsKeyId"]["Fn::GetAtt"][0]
    assert aws.json["Resources"][key_id]["Type"] == "AWS::KMS::Key"
    assert aws.json["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    assert props["PubliclyAccessible"] is False
    assert props["BackupRetentionPeriod"] >= 7
    assert props["DBInstanceClass"] == "db.t4g.micro"


def test_tls_is_forced(aws):
    group = only(aws.resources("AWS::RDS::DBParameterGroup"))
    assert group["Properties"]["Parameters"]["rds.force_ssl"] == "1"


def test_deletion_protection_and_removal_policy_follow_the_context(aws, lean):
    default = only(aws.resources("AWS::RDS::DBInstance"))
    assert default["Properties"]["DeletionProtection"] is True
    assert default["DeletionPolicy"] == "Snapshot"
    assert default["Properties"]["MultiAZ"] is False
    throwaway = only(lean.resources("AWS::RDS::DBInstance"))
    assert throwaway["Properties"]["DeletionProtection"] is False
    assert throwaway["DeletionPolicy"] == "Delete"
    assert throwaway["Properties"]["MultiAZ"] is True


def test_credentials_live_in_secrets_manager_and_rotate(aws):
    instance = only(aws.resources("AWS::RDS::DBInstance"))
    assert "{{resolve:secretsmanager:" in str(instance["Properties"]["MasterUserPassword"])
    schedules = aws.resources("AWS::SecretsManager::RotationSchedule").values()
    assert len(schedules) == 2  # the master user's and the application user's
    for schedule in schedules:
        assert schedule["Properties"]["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
        # Once at once, after the migrations (tests/infra/test_infra_rotation.py), then every 30 days.
        assert schedule["Properties"]["RotateImmediatelyOnUpdate"] is True


def test_postgres_log_goes_to_cloudwatch_logs_with_a_retention(aws):
    """The PostgreSQL log (errors, statements slower than a second) is exported, and CDK's
    log-retention resource keeps it for log_retention_days (30), like the functions' logs."""
    instance_id, instance = next(iter(aws.resources("AWS::RDS::DBInstance").items()))
    assert instance["Properties"]["EnableCloudwatchLogsExports"] == ["postgresql"]
    (retention,) = [
        r
        for r in aws.resources("Custom::LogRetention").values()
        if r["Properties"]["LogGroupName"]
        == {"Fn::Join": ["", ["/aws/rds/instance/", {"Ref": instance_id}, "/postgresql"]]}
    ]
    assert retention["Properties"]["RetentionInDays"] == 30
    parameters = only(aws.resources("AWS::RDS::DBParameterGroup"))["Properties"]["Parameters"]
    assert parameters["log_min_duration_statement"] == "1000"
    # The log is exported: a failed statement (an ALTER ROLE ... PASSWORD) must not put its text there.
    assert parameters["log_min_error_statement"] == "panic"


def test_the_log_retention_function_may_touch_three_log_groups_only(aws):
    """CDK's log-retention function would get logs:PutRetentionPolicy on every log group; its role
    here names the database's exported log, the broker's general log and the function's own (it
    sets that to one day), and each retention waits for that policy."""
    instance_id = next(iter(aws.resources("AWS::RDS::DBInstance")))
    broker_id = next(iter(aws.resources("AWS::AmazonMQ::Broker")))
    (function_id,) = [k for k in aws.resources("AWS::Lambda::Function") if k.startswith("LogRetention")]
    role_id = aws.json["Resources"][function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    assert role_id.startswith("DatabaseLogRetentionRole")
    ((policy_id, policy),) = [
        (k, v) for k, v in aws.resources("AWS::IAM::Policy").items() if {"Ref": role_id} in v["Properties"]["Roles"]
    ]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(statement["Action"]) == ["logs:DeleteRetentionPolicy", "logs:PutRetentionPolicy"]
    names = sorted(
        "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in r["Fn::Join"][1]) for r in statement["Resource"]
    )
    prefix = "arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:"
    assert names == sorted(
        prefix + name
        for name in (
            f"/aws/lambda/<{function_id}>",
            f"/aws/lambda/<{function_id}>:*",
            f"/aws/rds/instance/<{instance_id}>/postgresql",
            f"/aws/rds/instance/<{instance_id}>/postgresql:*",
            f"/aws/amazonmq/broker/<{broker_id}>/general",
            f"/aws/amazonmq/broker/<{broker_id}>/general:*",
        )
    )
    retentions = aws.resources("Custom::LogRetention").values()
    assert len(retentions) == 2
    for retention in retentions:
        assert policy_id in retention["DependsOn"]


def test_performance_insights_free_tier_encrypted_with_the_database_key(aws, lean):
    for synth in (aws, lean):
        props = only(synth.resources("AWS::RDS::DBInstance"))["Properties"]
        assert props["EnablePerformanceInsights"] is True
        assert props["PerformanceInsightsRetentionPeriod"] == 7  # the free retention
        assert props["PerformanceInsightsKMSKeyId"] == {"Fn::GetAtt": [props["KmsKeyId"]["Fn::GetAtt"][0], "Arn"]}


def test_proxy_requires_tls_and_uses_the_secret(aws):
    proxy = only(aws.resources("AWS::RDS::DBProxy"))["Properties"]
    assert proxy["RequireTLS"] is True
    assert proxy["EngineFamily"] == "POSTGRESQL"
    attachments = [{"Ref": k} for k in aws.resources("AWS::SecretsManager::SecretTargetAttachment")]
    assert len(proxy["Auth"]) == 2  # the master user (migrations' host) and the application user
    for auth in proxy["Auth"]:
        assert auth["AuthScheme"] == "SECRETS"
        assert auth["SecretArn"] in attachments


def test_functions_reach_the_database_through_the_proxy_but_migrate_goes_direct(aws):
    proxy_id = next(iter(aws.resources("AWS::RDS::DBProxy")))
    instance_id = next(iter(aws.resources("AWS::RDS::DBInstance")))
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER):
        env = aws.function(handler)[1]["Environment"]["Variables"]
        assert env[C.ENV_DATABASE_HOST] == {"Fn::GetAtt": [proxy_id, "Endpoint"]}, handler
        assert env[C.ENV_DATABASE_NAME] == "scheduler"
        assert C.ENV_DATABASE_SECRET_ARN in env
    env = aws.function(C.MIGRATE_HANDLER)[1]["Environment"]["Variables"]
    assert env[C.ENV_DATABASE_HOST] == {"Fn::GetAtt": [instance_id, "Endpoint.Address"]}


@pytest.mark.parametrize(
    ("variant", "policy", "days"),
    [("aws", "Retain", 30), ("other", "Retain", 90), ("aurora", "Retain", 30), ("lean", "Delete", 30)],
)
def test_log_groups_and_the_database_secrets_follow_removal_policy_and_log_retention_days(
    variant, policy, days, synthesize
):
    """Every log group of the stack (the functions', the access log, the VPC flow logs, the
    migrations provider's) is kept log_retention_days, and it and the database's two secrets are
    deleted with the stack only under removal_policy=destroy (snapshot, retain: kept)."""
    synth = synthesize(variant)
    groups = synth.resources("AWS::Logs::LogGroup")
    assert any(name.startswith("NetworkFlowLogs") for name in groups)
    assert any(name.startswith("MigrationsProviderLogs") for name in groups)
    for name, group in groups.items():
        assert group["Properties"]["RetentionInDays"] == days, name
        assert (group.get("DeletionPolicy"), group.get("UpdateReplacePolicy")) == (policy, policy), name
    (flow_log,) = synth.resources("AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["LogGroupName"]["Ref"] in groups
    secrets = {k: v for k, v in synth.resources("AWS::SecretsManager::Secret").items() if "Database" in k}
    assert len(secrets) == 2, sorted(secrets)
    for name, secret in secrets.items():
        assert (secret.get("DeletionPolicy"), secret.get("UpdateReplacePolicy")) == (policy, policy), name
