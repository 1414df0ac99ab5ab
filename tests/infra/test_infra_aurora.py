"""``-c database=aurora-serverless``: an Aurora PostgreSQL Serverless v2 cluster behind the same
RDS Proxy, secrets, rotation, security groups and protections as the instance, with its own alarms.

The ``aurora`` variant turns every Aurora option on (a reader, I/O-Optimized storage, 32 ACUs at
most); the defaults of the shape are checked on the parsed options.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aws_cdk")

from aws_cdk import App

from infra.config import Config
from infra.observability import aurora_freeable_memory_limit
from infra.shared import C
from tests.infra.test_infra_broker_observability import alarms, metric_names
from tests.infra.test_infra_network import (
    ingress_rules,
    port,
    security_group_of,
    source_group,
)


def only(resources: dict) -> tuple[str, dict]:
    ((logical_id, resource),) = resources.items()
    return logical_id, resource


def cluster_of(synth) -> tuple[str, dict]:
    return only(synth.resources("AWS::RDS::DBCluster"))


def test_the_default_is_the_instance_and_the_aurora_shape_has_no_instance_class(aws, aurora):
    assert aws.resources("AWS::RDS::DBCluster") == {}
    assert len(aws.resources("AWS::RDS::DBInstance")) == 1
    instances = aurora.resources("AWS::RDS::DBInstance").values()
    assert {i["Properties"]["DBInstanceClass"] for i in instances} == {"db.serverless"}


def test_aurora_serverless_v2_encrypted_protected_and_backed_up(aurora):
    _, cluster = cluster_of(aurora)
    props = cluster["Properties"]
    assert props["Engine"] == "aurora-postgresql"
    assert int(props["EngineVersion"].split(".")[0]) >= 17
    assert props["ServerlessV2ScalingConfiguration"] == {"MinCapacity": 0.5, "MaxCapacity": 32}
    assert props["StorageEncrypted"] is True
    key_id = props["KmsKeyId"]["Fn::GetAtt"][0]
    assert aurora.json["Resources"][key_id]["Type"] == "AWS::KMS::Key"
    assert props["StorageType"] == "aurora-iopt1"
    assert props["BackupRetentionPeriod"] >= 7
    assert props["DeletionProtection"] is True
    assert props["CopyTagsToSnapshot"] is True
    assert cluster["DeletionPolicy"] == "Snapshot"
    assert props["DatabaseName"] == "scheduler"
    assert "{{resolve:secretsmanager:" in json.dumps(props["MasterUserPassword"])
    (parameters,) = aurora.resources("AWS::RDS::DBClusterParameterGroup").values()
    assert parameters["Properties"]["Parameters"]["rds.force_ssl"] == "1"
    assert props["DBClusterParameterGroupName"] == {
        "Ref": next(iter(aurora.resources("AWS::RDS::DBClusterParameterGroup")))
    }


def test_a_writer_and_a_reader_in_another_az_that_scales_with_it(aurora):
    cluster_id, cluster = cluster_of(aurora)
    key_id = cluster["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]
    members = sorted(aurora.resources("AWS::RDS::DBInstance").values(), key=lambda i: i["Properties"]["PromotionTier"])
    assert [m["Properties"]["PromotionTier"] for m in members] == [0, 1]  # tier 0-1 scales with the writer
    assert [m["Properties"]["AvailabilityZone"]["Fn::Select"][0] for m in members] == [0, 1]
    for member in members:
        props = member["Properties"]
        assert props["DBClusterIdentifier"] == {"Ref": cluster_id}
        assert props["PubliclyAccessible"] is False
        assert props["AutoMinorVersionUpgrade"] is True
        assert props["CACertificateIdentifier"] == "rds-ca-rsa2048-g1"
        assert props["EnablePerformanceInsights"] is True
        assert props["PerformanceInsightsKMSKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert props["PerformanceInsightsRetentionPeriod"] == 7  # the free retention


def test_the_options_of_the_shape_and_their_defaults():
    def config(**context: object) -> Config:
        return Config.from_context(App(context=context).node)

    default = config()
    assert default.database == "instance" and not default.aurora
    aurora = config(database="Aurora-Serverless")
    assert aurora.aurora
    assert (aurora.db_min_acu, aurora.db_max_acu, aurora.db_reader, aurora.db_io_optimized) == (0.5, 16, False, False)
    parsed = config(database="aurora-serverless", db_min_acu="2", db_max_acu="64.5", db_reader="yes")
    assert (parsed.db_min_acu, parsed.db_max_acu, parsed.db_reader) == (2.0, 64.5, True)
    for bad, message in [
        ({"database": "aurora"}, "'database' must be one of instance, aurora-serverless"),
        ({"db_min_acu": "0"}, "'db_min_acu' must be between 0.5 and 256"),
        ({"db_max_acu": "300"}, "'db_max_acu' must be between"),
        ({"db_max_acu": "1.25"}, "steps of 0.5"),
        ({"db_max_acu": "lots"}, "'db_max_acu' must be a number of ACUs"),
        ({"db_min_acu": "8", "db_max_acu": "4"}, "'db_min_acu' .8. must not exceed 'db_max_acu' .4."),
        ({"db_reader": "perhaps"}, "'db_reader' must be true or false"),
    ]:
        with pytest.raises(ValueError, match=message):
            config(**{"database": "aurora-serverless", **bad})


def test_the_defaults_of_the_shape_in_a_throwaway_stack(tmp_path, cdk_context):
    """One writer, Aurora Standard storage, 0.5 to 16 ACUs; without deletion protection and with
    removal_policy=destroy, the cluster goes with the stack, acknowledged for cdk-nag."""
    from aws_cdk.assertions import Template

    from infra import build_app
    from infra.nag import unacknowledged_findings

    # Synthesized here rather than as a session variant: one more full synthesis (about 15 s).
    context = {
        **cdk_context,
        "database": "aurora-serverless",
        "deletion_protection": "false",
        "removal_policy": "destroy",
    }
    _, stack = build_app(context=context, outdir=str(tmp_path))
    template = Template.from_stack(stack).to_json()
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::RDS::DBCluster"]
    assert cluster["Properties"]["ServerlessV2ScalingConfiguration"] == {"MinCapacity": 0.5, "MaxCapacity": 16}
    assert cluster["Properties"].get("StorageType", "aurora") == "aurora"
    assert cluster["Properties"]["DeletionProtection"] is False
    assert cluster["DeletionPolicy"] == "Delete"
    members = [r for r in template["Resources"].values() if r["Type"] == "AWS::RDS::DBInstance"]
    assert len(members) == 1 and members[0]["Properties"]["PromotionTier"] == 0
    assert unacknowledged_findings(stack) == []


def test_the_cluster_exports_its_postgres_log_with_a_retention(aurora):
    cluster_id, cluster = cluster_of(aurora)
    assert cluster["Properties"]["EnableCloudwatchLogsExports"] == ["postgresql"]
    (retention,) = [
        r
        for r in aurora.resources("Custom::LogRetention").values()
        if r["Properties"]["LogGroupName"]
        == {"Fn::Join": ["", ["/aws/rds/cluster/", {"Ref": cluster_id}, "/postgresql"]]}
    ]
    assert retention["Properties"]["RetentionInDays"] == 30


def test_the_cluster_admits_only_the_proxy_the_migrate_and_the_rotation_functions(aurora):
    _, cluster = cluster_of(aurora)
    (db_group,) = [ref["Fn::GetAtt"][0] for ref in cluster["Properties"]["VpcSecurityGroupIds"]]
    assert db_group.startswith("DatabaseSecurityGroup")
    rules = ingress_rules(aurora, db_group)
    assert {port(r) for r in rules} == {5432}
    (proxy,) = aurora.resources("AWS::RDS::DBProxy").values()
    (proxy_group,) = [ref["Fn::GetAtt"][0] for ref in proxy["Properties"]["VpcSecurityGroupIds"]]
    sources = {source_group(r) for r in rules}
    assert proxy_group in sources and security_group_of(aurora, C.MIGRATE_HANDLER) in sources
    assert len(sources) == 3  # proxy, migrate, rotation
    proxy_sources = {source_group(r) for r in ingress_rules(aurora, proxy_group)}
    assert proxy_sources == {
        security_group_of(aurora, h) for h in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER)
    }


def test_the_proxy_fronts_the_cluster_with_both_secrets_and_tls(aurora):
    cluster_id, _ = cluster_of(aurora)
    (target_group,) = aurora.resources("AWS::RDS::DBProxyTargetGroup").values()
    assert target_group["Properties"]["DBClusterIdentifiers"] == [{"Ref": cluster_id}]
    assert "DBInstanceIdentifiers" not in target_group["Properties"]
    proxy = only(aurora.resources("AWS::RDS::DBProxy"))[1]["Properties"]
    assert proxy["RequireTLS"] is True and proxy["EngineFamily"] == "POSTGRESQL"
    attachments = aurora.resources("AWS::SecretsManager::SecretTargetAttachment")
    assert len(proxy["Auth"]) == 2
    assert {a["SecretArn"]["Ref"] for a in proxy["Auth"]} == set(attachments)
    for attachment in attachments.values():
        assert attachment["Properties"]["TargetType"] == "AWS::RDS::DBCluster"
        assert attachment["Properties"]["TargetId"] == {"Ref": cluster_id}


def test_both_passwords_rotate_through_the_endpoint(aurora):
    schedules = aurora.resources("AWS::SecretsManager::RotationSchedule").values()
    assert len(schedules) == 2
    for schedule in schedules:
        assert schedule["Properties"]["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
        assert schedule["Properties"]["RotateImmediatelyOnUpdate"] is True  # after the migrations
    (rotation_group,) = [k for k in aurora.resources("AWS::EC2::SecurityGroup") if k.startswith("DatabaseRotation")]
    for app in aurora.resources("AWS::Serverless::Application").values():
        assert app["Properties"]["Parameters"]["vpcSecurityGroupIds"] == {"Fn::GetAtt": [rotation_group, "GroupId"]}


def test_functions_use_the_proxy_and_migrate_the_writer_once_it_exists(aurora):
    cluster_id, _ = cluster_of(aurora)
    proxy_id, _ = only(aurora.resources("AWS::RDS::DBProxy"))
    (app_attachment,) = [
        k for k in aurora.resources("AWS::SecretsManager::SecretTargetAttachment") if "AppCredentials" in k
    ]
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER):
        env = aurora.function(handler)[1]["Environment"]["Variables"]
        assert env[C.ENV_DATABASE_HOST] == {"Fn::GetAtt": [proxy_id, "Endpoint"]}, handler
        assert env[C.ENV_DATABASE_SECRET_ARN] == {"Ref": app_attachment}, handler
    env = aurora.function(C.MIGRATE_HANDLER)[1]["Environment"]["Variables"]
    assert env[C.ENV_DATABASE_HOST] == {"Fn::GetAtt": [cluster_id, "Endpoint.Address"]}  # the writer endpoint
    (writer_id,) = [
        k for k, v in aurora.resources("AWS::RDS::DBInstance").items() if v["Properties"]["PromotionTier"] == 0
    ]
    (migrations,) = aurora.resources("Custom::SchedulerMigrations").values()
    assert writer_id in migrations["DependsOn"]


def test_aurora_alarms_watch_capacity_and_memory_not_storage_or_credits(aurora, aws):
    found = alarms(aurora)
    cluster_id, _ = cluster_of(aurora)
    assert "DatabaseFreeStorage" not in found and "DatabaseCpuCredits" not in found
    assert metric_names(found["DatabaseCapacity"]) == {"ACUUtilization"}
    assert found["DatabaseCapacity"]["Threshold"] == 90
    assert metric_names(found["DatabaseFreeableMemory"]) == {"FreeableMemory"}
    assert (
        found["DatabaseFreeableMemory"]["Threshold"] == aurora_freeable_memory_limit(32) == int(32 * 2 * 1024**3 * 0.1)
    )
    assert found["DatabaseFreeableMemory"]["ComparisonOperator"] == "LessThanThreshold"
    assert metric_names(found["DatabaseCpu"]) == {"CPUUtilization"}
    for name in ("DatabaseCapacity", "DatabaseFreeableMemory", "DatabaseCpu"):
        assert found[name]["Namespace"] == "AWS/RDS"
        assert found[name]["Dimensions"] == [{"Name": "DBClusterIdentifier", "Value": {"Ref": cluster_id}}], name
        assert found[name]["TreatMissingData"] == "missing"
    assert metric_names(found["ProxyConnections"]) == {"DatabaseConnectionsBorrowLatency"}
    assert {"RotationFailures", "RotationFailures2"} <= set(found)
    # ... and the instance shape keeps its own.
    assert "DatabaseCapacity" not in alarms(aws) and "DatabaseFreeStorage" in alarms(aws)
    (dashboard,) = aurora.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for title in ("Database capacity (ACUs) and memory", "Database CPU (%)", "Database connections"):
        assert title in body, title
    assert "ServerlessDatabaseCapacity" in body and "ACUUtilization" in body
