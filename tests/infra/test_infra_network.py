"""Network: subnets, interface endpoints, least-privilege security groups."""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")

from infra.shared import FUNCTIONS_DIR, C

# Secrets Manager (the functions' secrets, the rotation functions), KMS (job secrets), Lambda (the
# fan-out's invokes). No CloudWatch endpoint: see test_no_function_needs_a_cloudwatch_endpoint.
ENDPOINT_SERVICES = {"secretsmanager", "kms", "lambda"}


def subnet_type(synth, ref: dict) -> str:
    """The aws-cdk:subnet-type tag (Isolated, Private, Public) of a subnet reference."""
    subnet = synth.json["Resources"][ref["Ref"]]
    tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
    return tags["aws-cdk:subnet-type"]


def function_subnet_types(synth, handler: str) -> set[str]:
    _, props = synth.function(handler)
    return {subnet_type(synth, ref) for ref in props["VpcConfig"]["SubnetIds"]}


def security_group_of(synth, handler: str) -> str:
    _, props = synth.function(handler)
    (group,) = props["VpcConfig"]["SecurityGroupIds"]
    return group["Fn::GetAtt"][0]


def ingress_rules(synth, group_id: str) -> list[dict]:
    """Every ingress rule of a security group, inline or as a separate resource."""
    rules = list(synth.json["Resources"][group_id]["Properties"].get("SecurityGroupIngress", []))
    for rule in synth.resources("AWS::EC2::SecurityGroupIngress").values():
        if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}:
            rules.append(rule["Properties"])
    return rules


def port(rule: dict) -> object:
    """The rule's port; the instance's own port attribute counts as 5432 (the port it is given)."""
    value = rule["FromPort"]
    if isinstance(value, dict) and value.get("Fn::GetAtt", [None, None])[1] == "Endpoint.Port":
        return 5432
    assert rule["ToPort"] == rule["FromPort"]
    return value


def source_group(rule: dict) -> str:
    return rule["SourceSecurityGroupId"]["Fn::GetAtt"][0]


def test_subnets_isolated_for_data_and_with_egress_for_the_executor(aws):
    types = {subnet_type(aws, {"Ref": k}) for k in aws.resources("AWS::EC2::Subnet")}
    assert types == {"Isolated", "Private", "Public"}
    assert len(aws.resources("AWS::EC2::NatGateway")) == 1
    assert function_subnet_types(aws, C.EXECUTOR_HANDLER) == {"Private"}
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        assert function_subnet_types(aws, handler) == {"Isolated"}, handler
    (instance,) = aws.resources("AWS::RDS::DBInstance").values()
    subnet_group = aws.json["Resources"][instance["Properties"]["DBSubnetGroupName"]["Ref"]]
    assert {subnet_type(aws, ref) for ref in subnet_group["Properties"]["SubnetIds"]} == {"Isolated"}


def test_every_function_runs_in_the_vpc(aws):
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER, C.MIGRATE_HANDLER):
        _, props = aws.function(handler)
        assert props["VpcConfig"]["SubnetIds"], handler


def test_without_nat_gateways_the_executor_stays_in_isolated_subnets(lean):
    assert lean.resources("AWS::EC2::NatGateway") == {}
    assert lean.resources("AWS::EC2::InternetGateway") == {}
    assert function_subnet_types(lean, C.EXECUTOR_HANDLER) == {"Isolated"}


def test_interface_endpoints_let_isolated_functions_reach_aws_apis(aws):
    endpoints = aws.resources("AWS::EC2::VPCEndpoint").values()
    services = set()
    for endpoint in endpoints:
        props = endpoint["Properties"]
        assert props["VpcEndpointType"] == "Interface"
        assert props["PrivateDnsEnabled"] is True
        service = props["ServiceName"]
        services.add(service["Fn::Join"][1][-1].lstrip(".") if isinstance(service, dict) else service.split(".")[-1])
    assert services == ENDPOINT_SERVICES


def test_the_secrets_and_kms_endpoints_reach_this_account_s_resources_only(aws):
    """A function taken over cannot use the endpoints to reach another account's secrets or keys;
    the Lambda endpoint stays open (the executor invokes users' functions in their accounts)."""
    policies = {}
    for endpoint in aws.resources("AWS::EC2::VPCEndpoint").values():
        service = endpoint["Properties"]["ServiceName"]
        name = service["Fn::Join"][1][-1].lstrip(".") if isinstance(service, dict) else service.split(".")[-1]
        policies[name] = endpoint["Properties"].get("PolicyDocument")
    for name in ("secretsmanager", "kms"):
        statement, *others = policies[name]["Statement"]
        assert statement["Effect"] == "Allow" and statement["Condition"] == {
            "StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}
        }, name
        # The rotations' GetRandomPassword names no resource (no account to compare): alone, as it is.
        expected = [
            {
                "Action": "secretsmanager:GetRandomPassword",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Resource": "*",
            }
        ]
        assert others == (expected if name == "secretsmanager" else []), name
    assert policies["lambda"] is None


def test_no_function_needs_a_cloudwatch_endpoint(aws, lean):
    """The functions publish metrics as EMF lines in their logs, and Lambda ships a function's logs
    itself (not through the function's network): no `monitoring` or `logs` endpoint, about $7.30
    a month per AZ saved. Were a function to call CloudWatch's API, it would need the endpoint back."""
    for synth in (aws, lean):
        services = {str(e["Properties"]["ServiceName"]) for e in synth.resources("AWS::EC2::VPCEndpoint").values()}
        assert not [s for s in services if ".monitoring" in s or ".logs" in s], services
        for policy in synth.resources("AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                action = statement["Action"]
                assert not any(a.startswith("cloudwatch:") for a in ([action] if isinstance(action, str) else action))
    code = "\n".join(p.read_text() for p in FUNCTIONS_DIR.rglob("*.py"))
    for call in ('"cloudwatch"', "'cloudwatch'", "put_metric_data", '"logs"', "put_log_events"):
        assert call not in code, f"a function calls CloudWatch ({call}): it needs an interface endpoint"


def test_endpoints_span_two_azs_unless_told_otherwise(aws, lean):
    for synth, count in ((aws, 2), (lean, 1)):
        for endpoint in synth.resources("AWS::EC2::VPCEndpoint").values():
            assert len(endpoint["Properties"]["SubnetIds"]) == count
            assert {subnet_type(synth, ref) for ref in endpoint["Properties"]["SubnetIds"]} == {"Isolated"}


def test_no_security_group_admits_a_cidr_range(aws):
    for group_id, group in aws.resources("AWS::EC2::SecurityGroup").items():
        for rule in ingress_rules(aws, group_id):
            assert "CidrIp" not in rule and "CidrIpv6" not in rule, (group_id, rule)
        assert "SecurityGroupIngress" not in group["Properties"] or all(
            "SourceSecurityGroupId" in r for r in group["Properties"]["SecurityGroupIngress"]
        )


def test_database_admits_only_the_proxy_the_migrate_and_the_rotation_functions(aws):
    (instance,) = aws.resources("AWS::RDS::DBInstance").values()
    (db_group,) = [ref["Fn::GetAtt"][0] for ref in instance["Properties"]["VPCSecurityGroups"]]
    rules = ingress_rules(aws, db_group)
    assert {port(r) for r in rules} == {5432}
    (proxy,) = aws.resources("AWS::RDS::DBProxy").values()
    (proxy_group,) = [ref["Fn::GetAtt"][0] for ref in proxy["Properties"]["VpcSecurityGroupIds"]]
    sources = {source_group(r) for r in rules}
    assert proxy_group in sources
    assert security_group_of(aws, C.MIGRATE_HANDLER) in sources
    assert len(sources) == 3  # proxy, migrate, rotation
    proxy_sources = {source_group(r) for r in ingress_rules(aws, proxy_group)}
    assert proxy_sources == {security_group_of(aws, h) for h in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER)}


def test_broker_admits_only_the_executor_over_amqps(aws):
    (broker,) = aws.resources("AWS::AmazonMQ::Broker").values()
    (group,) = [ref["Fn::GetAtt"][0] for ref in broker["Properties"]["SecurityGroups"]]
    rules = ingress_rules(aws, group)
    assert [(port(r), source_group(r)) for r in rules] == [(5671, security_group_of(aws, C.EXECUTOR_HANDLER))]


def test_only_the_executor_has_open_egress_and_only_over_tcp(aws):
    """The executor reaches any host and port a job names, over TCP (HTTP, AMQP); no UDP or
    ICMP leaves it, and no other function reaches beyond the stack's own groups."""
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.MIGRATE_HANDLER):
        group = aws.json["Resources"][security_group_of(aws, handler)]["Properties"]
        for rule in group.get("SecurityGroupEgress", []):
            assert rule.get("CidrIp") != "0.0.0.0/0", handler
    executor_group = aws.json["Resources"][security_group_of(aws, C.EXECUTOR_HANDLER)]["Properties"]
    open_rules = [rule for rule in executor_group["SecurityGroupEgress"] if rule.get("CidrIp") == "0.0.0.0/0"]
    assert [(r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in open_rules] == [("tcp", 0, 65535)]
    assert all(r.get("CidrIpv6") is None and r["IpProtocol"] != "-1" for r in executor_group["SecurityGroupEgress"])


def test_rejected_traffic_is_logged(aws):
    (flow_log,) = aws.resources("AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["TrafficType"] == "REJECT"
