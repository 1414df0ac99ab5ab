"""Context options: defaults, ``-c key=value`` strings, and refusals."""

from __future__ import annotations

import platform

import pytest

pytest.importorskip("aws_cdk")

from aws_cdk import App

from infra.config import DEFAULTS, Config


def config(**context: object) -> Config:
    return Config.from_context(App(context=context).node)


def test_defaults_are_the_documented_ones(cdk_context):
    default = config()
    assert (default.broker, default.precision, default.nat_gateways) == ("amazonmq", "second", 1)
    assert default.architecture == "arm64" and default.localstack is False
    assert default.deletion_protection is True and default.removal_policy == "snapshot"
    assert default.with_broker
    for key, value in cdk_context.items():
        if key in DEFAULTS:
            assert value == DEFAULTS[key], f"cdk.json sets {key}={value!r}, the code's default is {DEFAULTS[key]!r}"


def test_command_line_strings_are_parsed():
    parsed = config(broker="None", precision="minute", nat_gateways="0", deletion_protection="false",
                    db_multi_az="yes", alarm_email=" ops@example.com ")  # fmt: skip
    assert parsed.broker == "none" and not parsed.with_broker
    assert parsed.precision == "minute"
    assert parsed.nat_gateways == 0
    assert parsed.deletion_protection is False and parsed.db_multi_az is True
    assert parsed.alarm_email == "ops@example.com"


def test_the_broker_is_one_node_or_a_cluster_on_an_instance_type_that_runs_it():
    assert (config().broker_deployment, config().broker_instance_type) == ("single", "mq.t3.micro")
    cluster = config(broker_deployment="Cluster")
    assert (cluster.broker_deployment, cluster.broker_instance_type) == ("cluster", "mq.m7g.large")
    assert (
        config(broker_deployment="cluster", broker_instance_type="mq.m5.xlarge").broker_instance_type == "mq.m5.xlarge"
    )
    assert config(broker_instance_type=" MQ.M7G.Medium ").broker_instance_type == "mq.m7g.medium"
    with pytest.raises(ValueError, match="'broker_instance_type' 'mq.t3.micro' cannot run a cluster"):
        config(broker_deployment="cluster", broker_instance_type="mq.t3.micro")
    with pytest.raises(ValueError, match="'broker_instance_type' must be an Amazon MQ for RabbitMQ instance type"):
        config(broker_instance_type="m5.large")
    with pytest.raises(ValueError, match="'broker_deployment' must be one of single, cluster"):
        config(broker_deployment="active-standby")
    # Types Amazon MQ does not have would synthesize and fail at CreateBroker: refused here.
    for unknown in ("mq.t3.large", "mq.t3.nano", "mq.m5.medium", "mq.m7g.tiny", "mq.m7g.2xl"):
        with pytest.raises(ValueError, match="must be an Amazon MQ for RabbitMQ instance type"):
            config(broker_instance_type=unknown)
    with pytest.raises(ValueError, match="'mq.m7g.medium' cannot run a cluster"):
        config(broker_deployment="cluster", broker_instance_type="mq.m7g.medium")
    assert config(broker_deployment="cluster", broker_instance_type="mq.m7g.16xlarge").broker_instance_type


def test_the_broker_options_are_refused_where_the_stack_has_no_broker():
    for where in ({"broker": "none"}, {"localstack": "true"}):
        with pytest.raises(ValueError, match="'broker_instance_type' sizes the stack's broker"):
            config(broker_instance_type="mq.m5.large", **where)
        with pytest.raises(ValueError, match="'broker_deployment' shapes the stack's broker"):
            config(broker_deployment="cluster", **where)
        assert config(broker_deployment="single", **where).broker_deployment == "single"


def test_the_runtime_s_python_is_an_option():
    assert config().python_version == "3.13"
    assert config(python_version="3.12").python_version == "3.12"
    with pytest.raises(ValueError, match="python_version"):
        config(python_version="3.9")


def test_localstack_s_default_endpoint_needs_no_dns():
    assert config(localstack="true").localstack_endpoint == "http://127.0.0.1:4566"


def test_localstack_defaults_to_the_host_architecture_and_has_no_broker():
    local = config(localstack="true")
    expected = "arm64" if platform.machine().lower() in {"arm64", "aarch64"} else "x86_64"
    assert local.architecture == expected
    assert not local.with_broker
    assert config(localstack="true", architecture="arm64").architecture == "arm64"


@pytest.mark.parametrize(
    "context",
    [
        {"broker": "kafka"},
        {"precision": "hour"},
        {"nat_gateways": "3"},
        {"nat_gateways": "one"},
        {"removal_policy": "keep"},
        {"localstack": "maybe"},
        {"architecture": "ppc64le"},
        {"endpoint_azs": "0"},
        {"console_url": "console.example.com"},
        {"api_security_policy": "TLS_1_3"},
        {"api_security_policy": "SecurityPolicy_"},
    ],
)
def test_bad_values_are_refused(context):
    with pytest.raises(ValueError, match=next(iter(context))):
        config(**context)


def test_fanout_max_defaults_to_four_and_is_bounded():
    assert config().fanout_max == 4 and config(fanout_max="1").fanout_max == 1
    for bad in ("0", "17", "many"):
        with pytest.raises(ValueError, match="fanout_max"):
            config(fanout_max=bad)


def test_claims_per_invoke_defaults_to_25_and_is_bounded():
    assert config().claims_per_invoke == 25 and config(claims_per_invoke="50").claims_per_invoke == 50
    for bad in ("0", "51", "some"):
        with pytest.raises(ValueError, match="claims_per_invoke"):
            config(claims_per_invoke=bad)


def test_the_api_takes_tls_1_2_and_up_unless_told_otherwise():
    assert config().api_security_policy == "TLS_1_2"
    assert config(api_security_policy="tls_1_0").api_security_policy == "TLS_1_0"
    enhanced = "SecurityPolicy_TLS13_1_2_PFS_PQ_2025_09"
    assert config(api_security_policy=f" {enhanced} ").api_security_policy == enhanced
