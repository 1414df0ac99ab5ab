"""Amazon MQ for RabbitMQ: the deployment's default AMQP broker for jobs that name none."""

from __future__ import annotations

import json

from aws_cdk import Fn, Names, Stack
from aws_cdk import aws_amazonmq as mq
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.config import Config
from infra.lambdas import retention
from infra.nag import acknowledge
from infra.network import Network, allow

AMQPS_PORT = 5671
USERNAME = "scheduler"
# RabbitMQ 4.2 runs on mq.m7g only; 3.13 is the newest release on the small mq.t3 instances
# (and runs on mq.m5 and mq.m7g too).
ENGINE_VERSION = "3.13"
# broker_deployment: one node (by default a small instance, for evaluation and light use: README,
# "Amazon MQ"), or Amazon MQ's cluster of three nodes across AZs behind one endpoint (a larger
# instance type: config.BROKER_INSTANCE_TYPES).
DEPLOYMENT_MODES = {"single": "SINGLE_INSTANCE", "cluster": "CLUSTER_MULTI_AZ"}
# Minor versions (and Amazon MQ's patches) are applied in this weekly window.
MAINTENANCE_WINDOW = mq.CfnBroker.MaintenanceWindowProperty(day_of_week="SUNDAY", time_of_day="03:00", time_zone="UTC")


class Broker(Construct):
    """A RabbitMQ broker, reachable only from the executor: one node in an isolated subnet, or
    (``broker_deployment=cluster``) three nodes across AZs, their endpoint in the isolated subnet
    of each of the VPC's AZs.

    ``url`` is the AMQPS endpoint without credentials; the user and password are in ``secret``
    (JSON ``{"username", "password"}``). Its general log goes to CloudWatch Logs, in a group Amazon
    MQ creates and names after the broker's id (``log_groups``), whose retention CDK's
    log-retention function sets to ``log_retention_days`` under ``log_retention_role`` (which must
    be allowed that group: ``Database.allow_log_retention``). ``name`` is the ``Broker``
    dimension of its metrics.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        network: Network,
        log_retention_role: iam.IRole,
    ) -> None:
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
        # A cluster's name is not a single node's: Amazon MQ cannot change a broker's deployment
        # mode in place, and CloudFormation replaces a named resource only under a new name, so a
        # switch of broker_deployment creates the new broker beside the old, then deletes it.
        # (A single node keeps the name it always had: its deployments are not replaced.)
        single = config.broker_deployment == "single"
        name = Names.unique_resource_name(self, max_length=50 if single else 42, separator="-")
        self.name = name if single else f"{name}-cluster"
        # One isolated subnet in each AZ (a cluster's endpoint in each; subnets of one AZ would be refused).
        subnets = network.vpc.select_subnets(subnet_group_name="Isolated", one_per_az=True).subnet_ids
        self.broker = mq.CfnBroker(
            self,
            "Broker",
            broker_name=self.name,
            engine_type="RABBITMQ",
            engine_version=ENGINE_VERSION,
            host_instance_type=config.broker_instance_type,
            deployment_mode=DEPLOYMENT_MODES[config.broker_deployment],
            publicly_accessible=False,
            # Required with a major.minor engine version; applied in the maintenance window.
            auto_minor_version_upgrade=True,
            maintenance_window_start_time=MAINTENANCE_WINDOW,
            # RabbitMQ has a general log only (no audit log).
            logs=mq.CfnBroker.LogListProperty(general=True),
            subnet_ids=subnets if config.broker_deployment == "cluster" else subnets[:1],
            security_groups=[self.security_group.security_group_id],
            users=[
                mq.CfnBroker.UserProperty(
                    username=USERNAME,
                    password=self.secret.secret_value_from_json("password").unsafe_unwrap(),
                )
            ],
        )
        self.url = Fn.select(0, self.broker.attr_amqp_endpoints)

        # (log group name, its form in a cdk-nag finding: the broker's id written as <LogicalId>)
        broker_id = Stack.of(self).resolve(self.broker.logical_id)
        self.log_groups = [
            (f"/aws/amazonmq/broker/{self.broker.ref}/general", f"/aws/amazonmq/broker/<{broker_id}>/general")
        ]
        self.log_retention = logs.LogRetention(
            self,
            "GeneralLogRetention",
            log_group_name=self.log_groups[0][0],
            retention=retention(config.log_retention_days),
            role=log_retention_role,
        )
        # Its custom resource waits for the role's policy (CDK does so only for a role it made).
        self.log_retention.node.add_dependency(log_retention_role)

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
