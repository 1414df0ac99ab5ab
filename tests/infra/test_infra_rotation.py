"""Credential rotation (issue 31, item 10): both passwords rotate once right after the first
deployment, after its migrations, and the rotation functions can reach everything a rotation
touches: Secrets Manager through its interface endpoint, the database, the secrets' key.

Checked on every database shape: the instance (``aws``), with one endpoint AZ and no NAT
gateway (``lean``), and the Aurora cluster (``aurora``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")

from tests.infra.test_infra_network import subnet_type

HTTPS = 443
POSTGRES = 5432
SHAPES = ("aws", "lean", "aurora")


def only_id(resources: dict) -> str:
    (logical_id,) = resources
    return logical_id


def database_of(synth) -> tuple[str, dict]:
    """The cluster, else the instance: what the secrets are attached to."""
    found = synth.resources("AWS::RDS::DBCluster") or synth.resources("AWS::RDS::DBInstance")
    ((logical_id, resource),) = found.items()
    return logical_id, resource


def group_id(synth, prefix: str) -> str:
    (found,) = [k for k in synth.resources("AWS::EC2::SecurityGroup") if k.startswith(prefix)]
    return found


def rule_port(value: object) -> object:
    """A rule's port; the database's own port attribute counts as 5432 (the port it is given)."""
    if isinstance(value, dict) and value.get("Fn::GetAtt", [None, None])[1] == "Endpoint.Port":
        return POSTGRES
    return value


def opens(synth, source: str, target: str, port: int) -> bool:
    """Whether ``source`` may send ``port`` to ``target`` (an egress rule; the rotation group has
    no open egress) and ``target`` takes it from ``source`` (an ingress rule)."""
    source_ref, target_ref = ({"Fn::GetAtt": [g, "GroupId"]} for g in (source, target))

    def matches(rule: dict, peer_key: str, peer: dict) -> bool:
        props = rule["Properties"]
        return (
            props.get(peer_key) == peer
            and rule_port(props["FromPort"]) == port
            and rule_port(props["ToPort"]) == port
            and props["IpProtocol"] == "tcp"
        )

    ingress = any(
        r["Properties"]["GroupId"] == target_ref and matches(r, "SourceSecurityGroupId", source_ref)
        for r in synth.resources("AWS::EC2::SecurityGroupIngress").values()
    )
    egress = any(
        r["Properties"]["GroupId"] == source_ref and matches(r, "DestinationSecurityGroupId", target_ref)
        for r in synth.resources("AWS::EC2::SecurityGroupEgress").values()
    )
    return ingress and egress


@pytest.mark.parametrize("shape", SHAPES)
def test_both_passwords_rotate_once_right_after_the_migrations(shape, synthesize):
    """RotateImmediatelyOnUpdate: the first deployment rotates both passwords at once (the rotation
    path is exercised on day one, not on day 30); the schedules wait for the migrations, which
    create the application login from its secret, so no password changes under them."""
    synth = synthesize(shape)
    migrations = only_id(synth.resources("Custom::SchedulerMigrations"))
    schedules = synth.resources("AWS::SecretsManager::RotationSchedule")
    attachments = synth.resources("AWS::SecretsManager::SecretTargetAttachment")
    assert {s["Properties"]["SecretId"]["Ref"] for s in schedules.values()} == set(attachments)  # both secrets
    for schedule_id, schedule in schedules.items():
        assert schedule["Properties"]["RotateImmediatelyOnUpdate"] is True, schedule_id
        assert schedule["Properties"]["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
        assert migrations in schedule["DependsOn"], schedule_id
    # ... and the migrations wait for the master secret and its host, not for a rotation.
    depends = set(synth.json["Resources"][migrations]["DependsOn"])
    assert not depends & set(schedules)
    master = [k for k in attachments if not k.startswith("DatabaseAppCredentials")]
    assert len(master) == 1 and set(master) <= depends


@pytest.mark.parametrize("shape", SHAPES)
def test_the_rotation_functions_reach_secrets_manager_the_database_and_the_key(shape, synthesize):
    synth = synthesize(shape)
    _, database = database_of(synth)
    groups = database["Properties"].get("VpcSecurityGroupIds") or database["Properties"]["VPCSecurityGroups"]
    (database_group,) = [ref["Fn::GetAtt"][0] for ref in groups]
    rotation = group_id(synth, "DatabaseRotationSecurityGroup")
    endpoints = group_id(synth, "NetworkEndpointsSecurityGroup")
    (endpoint_id,) = [
        k
        for k, v in synth.resources("AWS::EC2::VPCEndpoint").items()
        if "secretsmanager" in str(v["Properties"]["ServiceName"])
    ]
    endpoint = synth.json["Resources"][endpoint_id]["Properties"]
    assert endpoint["VpcEndpointType"] == "Interface" and endpoint["PrivateDnsEnabled"] is True
    assert endpoint["SecurityGroupIds"] == [{"Fn::GetAtt": [endpoints, "GroupId"]}]
    isolated = sorted(k for k in synth.resources("AWS::EC2::Subnet") if subnet_type(synth, {"Ref": k}) == "Isolated")
    (database_key,) = [k for k in synth.resources("AWS::KMS::Key") if k.startswith("DatabaseKey")]
    key = {"Fn::GetAtt": [database_key, "Arn"]}

    apps = synth.resources("AWS::Serverless::Application")
    assert len(apps) == 2  # single-user (master), multi-user (application user)
    for app_id, app in apps.items():
        parameters = app["Properties"]["Parameters"]
        # In the isolated subnets (every AZ), in the rotation group ...
        subnets = parameters["vpcSubnetIds"]["Fn::Join"][1][::2]
        assert sorted(ref["Ref"] for ref in subnets) == isolated, app_id
        assert parameters["vpcSecurityGroupIds"] == {"Fn::GetAtt": [rotation, "GroupId"]}, app_id
        # ... calling Secrets Manager through the endpoint (its own DNS name) ...
        assert {"Ref": endpoint_id} in parameters["endpoint"]["Fn::Join"][1], app_id
        # ... and able to decrypt the secrets, which the database's key encrypts.
        assert parameters["kmsKeyArn"] == key, app_id
        if "masterSecretArn" in parameters:
            assert parameters["masterSecretKmsKeyArn"] == key, app_id
    # The endpoint takes HTTPS from the rotation group, the database PostgreSQL, both ways.
    assert opens(synth, rotation, endpoints, HTTPS)
    assert opens(synth, rotation, database_group, POSTGRES)
    # Nothing else: no open egress from the rotation group.
    assert "SecurityGroupEgress" not in synth.json["Resources"][rotation]["Properties"]
    destinations = {
        r["Properties"]["DestinationSecurityGroupId"]["Fn::GetAtt"][0]
        for r in synth.resources("AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [rotation, "GroupId"]}
    }
    assert destinations == {endpoints, database_group}


def test_the_reachability_check_fails_without_the_database_rule(aws):
    """The check is live: the template without the database's rule for the rotation group fails it."""
    import json

    from tests.infra.conftest import Synthesized

    rotation = group_id(aws, "DatabaseRotationSecurityGroup")
    (instance,) = aws.resources("AWS::RDS::DBInstance").values()
    (database_group,) = [ref["Fn::GetAtt"][0] for ref in instance["Properties"]["VPCSecurityGroups"]]
    broken = json.loads(json.dumps(aws.json))
    broken["Resources"] = {
        k: v
        for k, v in broken["Resources"].items()
        if not (
            v["Type"] == "AWS::EC2::SecurityGroupIngress"
            and v["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [rotation, "GroupId"]}
            and v["Properties"]["GroupId"] == {"Fn::GetAtt": [database_group, "GroupId"]}
        )
    }

    class Broken(Synthesized):
        @property
        def json(self):
            return broken

    assert not opens(Broken(stack=None, template=None), rotation, database_group, POSTGRES)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_rotation_functions_are_serverless_application_repository_apps(shape, synthesize):
    """What the README says is deployed: AWS's two PostgreSQL rotation applications from the
    Serverless Application Repository, through the SAM transform (CAPABILITY_AUTO_EXPAND), and no
    rotation function or log group of this stack's own."""
    synth = synthesize(shape)
    assert "AWS::Serverless-2016-10-31" in synth.json["Transform"]
    apps = synth.resources("AWS::Serverless::Application")
    mappings = synth.json["Mappings"]
    names = set()
    for app in apps.values():
        mapping, _, key = app["Properties"]["Location"]["ApplicationId"]["Fn::FindInMap"]
        names.add(mappings[mapping]["aws"][key].rsplit("/", 1)[1])
    assert names == {
        "SecretsManagerRDSPostgreSQLRotationSingleUser",
        "SecretsManagerRDSPostgreSQLRotationMultiUser",
    }
    functions = synth.resources("AWS::Lambda::Function")
    assert not [name for name in functions if "Rotation" in name]
