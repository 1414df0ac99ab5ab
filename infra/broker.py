"""Amazon MQ for RabbitMQ: the deployment's default AMQP broker for jobs that name none."""

from __future__ import annotations

import json

from aws_cdk import Fn, Names
from aws_cdk import aws_amazonmq as mq
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.nag import acknowledge
from infra.network import Network, allow

AMQPS_PORT = 5671
USERNAME = "scheduler"
# RabbitMQ 4.2 runs on mq.m7g only; 3.13 is the newest release on the small mq.t3 instances.
ENGINE_VERSION = "3.13"
INSTANCE_TYPE = "mq.t3.micro"


class Broker(Construct):
    """A single-instance RabbitMQ broker in an isolated subnet, reachable only from the executor.

    ``url`` is the AMQPS endpoint without credentials; the user and password are in ``secret``
    (JSON ``{"username", "password"}``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, network: Network) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=network.vpc, description="Amazon MQ for RabbitMQ", allow_all_outbound=False
        )
        self.secret = secretsmanager.Secret(
            self,
            "Credentials",
            description="Amazon MQ for RabbitMQ: the scheduler's user",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=json.dumps({"username": USERNAME}),
                generate_string_key="password",
                # RabbitMQ on Amazon MQ refuses commas, colons and equals signs in passwords.
                exclude_punctuation=True,
                password_length=32,
            ),
        )
        self.broker = mq.CfnBroker(
            self,
            "Broker",
            broker_name=Names.unique_resource_name(self, max_length=50, separator="-"),
            engine_type="RABBITMQ",
            engine_version=ENGINE_VERSION,
            host_instance_type=INSTANCE_TYPE,
            deployment_mode="SINGLE_INSTANCE",
            publicly_accessible=False,
            auto_minor_version_upgrade=True,
            subnet_ids=[network.vpc.select_subnets(subnet_group_name="Isolated").subnet_ids[0]],
            security_groups=[self.security_group.security_group_id],
            users=[
                mq.CfnBroker.UserProperty(
                    username=USERNAME,
                    password=self.secret.secret_value_from_json("password").unsafe_unwrap(),
                )
            ],
        )
        self.url = Fn.select(0, self.broker.attr_amqp_endpoints)

        acknowledge(
            self.secret,
            {
                "AwsSolutions-SMG4": "Amazon MQ has no rotation function for broker users: the password is "
                "set on the broker by this stack; rotate it by changing the secret and redeploying.",
            },
        )

    def allow_from(self, group: ec2.ISecurityGroup) -> None:
        """Open AMQPS from ``group``."""
        allow(group, self.security_group, ec2.Port.tcp(AMQPS_PORT), "AMQPS")
