"""The VPC: isolated subnets for the data tier, egress subnets for the executor, and interface
endpoints so the functions in isolated subnets reach AWS APIs without a NAT gateway."""

from __future__ import annotations

from aws_cdk import Annotations, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import Config
from infra.lambdas import kept, retention

HTTPS = ec2.Port.tcp(443)

# The AWS APIs the functions in isolated subnets call: the database and broker secrets (and the
# rotation functions, Secrets Manager itself), envelope encryption of job secrets, and the
# fan-out's asynchronous invoke of the executor. No CloudWatch endpoint: the functions publish
# their metrics as EMF lines in their logs, and Lambda ships a function's logs itself, outside the
# function's network (no `logs` endpoint either); nothing calls PutMetricData (`monitoring`).
ENDPOINT_SERVICES = {
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "Lambda": ec2.InterfaceVpcEndpointAwsService.LAMBDA_,
}


def allow(source: ec2.ISecurityGroup, target: ec2.ISecurityGroup, port: ec2.Port, description: str) -> None:
    """Open ``port`` from ``source`` to ``target``: ingress on the target, and egress on the source
    unless it already allows all outbound traffic."""
    target.add_ingress_rule(source, port, description)
    if not source.allow_all_outbound:
        source.add_egress_rule(target, port, description)


class Network(Construct):
    """VPC, subnets, interface endpoints and the security group of each component.

    Every security group starts closed; the other constructs open exactly the ports they need
    between two groups (:func:`allow`), never to a CIDR range.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: Config) -> None:
        super().__init__(scope, construct_id)
        self.has_egress = config.nat_gateways > 0
        subnets = [ec2.SubnetConfiguration(name="Isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24)]
        if self.has_egress:
            subnets += [
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=26),
                ec2.SubnetConfiguration(name="Egress", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22),
            ]
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            max_azs=2,
            nat_gateways=config.nat_gateways,
            subnet_configuration=subnets,
            restrict_default_security_group=True,
        )
        # Kept as long as the functions' logs, and deleted with the stack only when they are.
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=retention(config.log_retention_days),
            removal_policy=kept(config),
        )
        # Rejected traffic only: what a security-group mistake or a probe looks like, at low volume.
        self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )

        self.isolated = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        # The executor calls arbitrary HTTP and AMQP targets: it needs a route out. Without NAT
        # gateways it can reach only targets inside the VPC (and AWS APIs through the endpoints).
        self.egress = (
            ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS) if self.has_egress else self.isolated
        )
        if not self.has_egress:
            Annotations.of(self).add_info(
                "nat_gateways=0: the executor runs in isolated subnets and reaches only targets inside the VPC."
            )

        self.endpoint_security_group = self._group("Endpoints", "Interface VPC endpoints (HTTPS from the functions)")
        # One endpoint network interface per AZ costs about $7 a month each: endpoint_azs=1 halves
        # that, at the price of AWS API calls crossing AZs (and failing with that one AZ).
        endpoint_subnets = ec2.SubnetSelection(subnets=self.vpc.isolated_subnets[: config.endpoint_azs])
        self.endpoints = {
            name: self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=endpoint_subnets,
                private_dns_enabled=True,
                open=False,
                security_groups=[self.endpoint_security_group],
            )
            for name, service in ENDPOINT_SERVICES.items()
        }
        # Secrets Manager and KMS through these endpoints reach this account's resources only: a
        # function taken over cannot use them to read or write another account's secrets or keys
        # (nothing of the stack needs another's). Lambda's stays open: the executor invokes the
        # users' functions, in their accounts, as their roles.
        for name in ("SecretsManager", "Kms"):
            self.endpoints[name].add_to_policy(
                iam.PolicyStatement(
                    principals=[iam.AnyPrincipal()],
                    actions=["*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:ResourceAccount": Stack.of(self).account}},
                )
            )
        # The rotation functions ask for a new password (GetRandomPassword), which names no
        # resource, so has no account to compare: allowed as it is (it reaches no one's data).
        self.endpoints["SecretsManager"].add_to_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()], actions=["secretsmanager:GetRandomPassword"], resources=["*"]
            )
        )

        self.api_security_group = self._group("Api", "api function")
        self.fanout_security_group = self._group("Fanout", "fan-out function")
        self.executor_security_group = self._group("Executor", "executor function: reaches arbitrary targets")
        # Its targets are HTTP and AMQP, over TCP, on any host and port a job names (the executor's
        # SSRF guard refuses the private, loopback and metadata addresses), and the AWS APIs over
        # HTTPS. Nothing it does needs UDP or ICMP, which stay closed: a taken-over function cannot
        # use them to carry data out. Name resolution is the VPC's resolver, which no security
        # group filters.
        self.executor_security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.all_tcp(), "targets: HTTP and AMQP over TCP, any host and port"
        )
        self.migrate_security_group = self._group("Migrate", "migrate function")
        for group in (
            self.api_security_group,
            self.fanout_security_group,
            self.executor_security_group,
            self.migrate_security_group,
        ):
            self.allow_endpoints(group)

    def allow_endpoints(self, group: ec2.ISecurityGroup) -> None:
        """Let ``group`` call the AWS APIs through the interface endpoints (HTTPS)."""
        allow(group, self.endpoint_security_group, HTTPS, "AWS APIs through the interface endpoints")

    def _group(self, construct_id: str, description: str) -> ec2.SecurityGroup:
        """A security group that lets nothing out until a rule says so."""
        return ec2.SecurityGroup(
            self, f"{construct_id}SecurityGroup", vpc=self.vpc, description=description, allow_all_outbound=False
        )
