"""The LocalStack variant: no VPC, RDS, RDS Proxy or Amazon MQ; URLs as stack parameters; the
API's callers checked by the function against the stack's access keys; migrations run by a
custom resource whose service token is the migrate function itself."""

from __future__ import annotations

import pytest

pytest.importorskip("aws_cdk")

import json

from infra.shared import C

HANDLERS = (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER, C.MIGRATE_HANDLER)
ABSENT = (
    "AWS::EC2::VPC",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::NatGateway",
    "AWS::RDS::DBInstance",
    "AWS::RDS::DBProxy",
    "AWS::AmazonMQ::Broker",
    "AWS::Lambda::LayerVersion",
    "AWS::Serverless::Application",
)


def test_no_vpc_database_proxy_or_broker(localstack):
    for type_name in ABSENT:
        assert localstack.resources(type_name) == {}, type_name


def test_database_and_broker_urls_are_secret_parameters(localstack):
    parameters = localstack.json["Parameters"]
    assert parameters["DatabaseUrl"]["NoEcho"] is True
    assert "Default" not in parameters["DatabaseUrl"]
    assert parameters["BrokerUrl"]["NoEcho"] is True
    assert parameters["BrokerUrl"]["Default"] == ""
    for handler in HANDLERS:
        env = localstack.function(handler)[1]["Environment"]["Variables"]
        assert env[C.ENV_DATABASE_URL] == {"Ref": "DatabaseUrl"}, handler
        assert C.ENV_DATABASE_SECRET_ARN not in env
    executor = localstack.function(C.EXECUTOR_HANDLER)[1]["Environment"]["Variables"]
    assert executor[C.ENV_DEFAULT_BROKER_URL] == {"Ref": "BrokerUrl"}


def test_functions_run_outside_a_vpc_and_talk_to_localstack(localstack):
    for handler in HANDLERS:
        _, props = localstack.function(handler)
        assert "VpcConfig" not in props, handler
        assert "Layers" not in props, handler  # the free edition ignores layers: deps ship in the code
        env = props["Environment"]["Variables"]
        assert env["AWS_ENDPOINT_URL"].startswith("http://")
        if handler in (C.API_HANDLER, C.EXECUTOR_HANDLER):
            assert env[C.ENV_ALLOW_PRIVATE_TARGETS] == "true"  # targets run beside LocalStack


def test_code_asset_carries_the_dependencies(localstack):
    from pathlib import Path

    from aws_cdk import Stage

    _, props = localstack.function(C.API_HANDLER)
    asset_hash = props["Code"]["S3Key"].split(".")[0]
    outdir = Path(Stage.of(localstack.stack).outdir)
    (asset,) = [p for p in outdir.glob(f"asset.{asset_hash}*") if p.is_dir()]
    assert (asset / "scheduler" / "core" / "constants.py").is_file()
    assert (asset / "psycopg").is_dir() and (asset / "pydantic_core").is_dir()
    assert not (asset / "botocore").exists()


def test_the_api_function_verifies_signatures_against_the_stack_s_access_keys(localstack):
    parameter = localstack.json["Parameters"]["ApiCredentials"]
    assert parameter["NoEcho"] is True
    # By default LocalStack's usual key, and a second tenant's.
    assert json.loads(parameter["Default"]) == {
        "test": {"secret_access_key": "test", "principal": "arn:aws:iam::000000000000:user/test"},
        "test2": {"secret_access_key": "test2", "principal": "arn:aws:iam::000000000000:user/test2"},
    }
    (secret_id,) = [
        k
        for k, v in localstack.resources("AWS::SecretsManager::Secret").items()
        if "access keys" in v["Properties"].get("Description", "")
    ]
    env = localstack.function(C.API_HANDLER)[1]["Environment"]["Variables"]
    assert env[C.ENV_API_CREDENTIALS_SECRET_ARN] == {"Ref": secret_id}  # the ARN: fetched at cold start
    for handler in (C.FANOUT_HANDLER, C.EXECUTOR_HANDLER, C.MIGRATE_HANDLER):
        assert C.ENV_API_CREDENTIALS_SECRET_ARN not in localstack.function(handler)[1]["Environment"]["Variables"]


def test_the_api_url_output_needs_no_dns(localstack):
    value = json.dumps(localstack.json["Outputs"]["ApiUrl"]["Value"])
    assert "http://127.0.0.1:4566/_aws/execute-api/" in value and "/prod/" in value


def test_migrations_run_by_the_migrate_function_itself(localstack):
    (resource,) = localstack.resources("Custom::SchedulerMigrations").values()
    migrate_id, _ = localstack.function(C.MIGRATE_HANDLER)
    assert resource["Properties"]["ServiceToken"] == {"Fn::GetAtt": [migrate_id, "Arn"]}
    # No provider framework (a Node.js function, which LocalStack's host executor does not run).
    runtimes = {v["Properties"]["Runtime"] for v in localstack.resources("AWS::Lambda::Function").values()}
    assert all(runtime.startswith("python") for runtime in runtimes)


def test_the_rest_is_the_same_stack(localstack):
    assert localstack.resources("AWS::Events::Rule")
    assert localstack.resources("AWS::SQS::Queue")
    assert localstack.resources("Custom::SchedulerMigrations")
    assert localstack.resources("AWS::ApiGateway::RestApi")
    assert localstack.resources("AWS::CloudWatch::Alarm")
