"""PostgreSQL on RDS, its credentials, their rotation, and the RDS Proxy the functions use."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from constructs import Construct

from infra.config import Config
from infra.nag import acknowledge
from infra.network import Network, allow
from infra.shared import C

DATABASE_NAME = "scheduler"
ADMIN_USER = "scheduler"
PORT = 5432

REMOVAL = {"snapshot": RemovalPolicy.SNAPSHOT, "retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}


class Database(Construct):
    """An encrypted PostgreSQL instance in the isolated subnets, reached through RDS Proxy.

    The functions connect to ``proxy_endpoint`` as the application user of ``app_secret`` (TLS
    required); the migrate function connects to ``instance_endpoint`` directly as the master user
    of ``secret``, since advisory locks would pin proxy connections. Both passwords rotate every
    30 days (``rotations``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: Config, network: Network) -> None:
        super().__init__(scope, construct_id)
        removal = REMOVAL[config.removal_policy]
        self.key = kms.Key(
            self,
            "Key",
            description="Scheduler database: storage, snapshots and credentials",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY if removal == RemovalPolicy.DESTROY else RemovalPolicy.RETAIN,
        )
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=network.vpc, description="PostgreSQL instance", allow_all_outbound=False
        )
        self.proxy_security_group = ec2.SecurityGroup(
            self, "ProxySecurityGroup", vpc=network.vpc, description="RDS Proxy", allow_all_outbound=False
        )
        allow(self.proxy_security_group, self.security_group, ec2.Port.tcp(PORT), "proxy to PostgreSQL")

        # The major only: RDS picks the current minor and upgrades it. 17 rather than 18 because
        # RDS Proxy supports a new major some time after RDS does.
        engine = rds.DatabaseInstanceEngine.postgres(version=rds.PostgresEngineVersion.VER_17)
        parameters = rds.ParameterGroup(
            self,
            "Parameters",
            engine=engine,
            description="Scheduler PostgreSQL parameters",
            parameters={"rds.force_ssl": "1", "log_min_duration_statement": "1000"},
        )
        self.instance = rds.DatabaseInstance(
            self,
            "Instance",
            engine=engine,
            instance_type=ec2.InstanceType(config.db_instance_type),
            vpc=network.vpc,
            vpc_subnets=network.isolated,
            security_groups=[self.security_group],
            port=PORT,
            database_name=DATABASE_NAME,
            credentials=rds.Credentials.from_generated_secret(ADMIN_USER, encryption_key=self.key),
            parameter_group=parameters,
            storage_encrypted=True,
            storage_encryption_key=self.key,
            storage_type=rds.StorageType.GP3,
            allocated_storage=20,
            max_allocated_storage=100,
            multi_az=config.db_multi_az,
            publicly_accessible=False,
            auto_minor_version_upgrade=True,
            backup_retention=Duration.days(config.db_backup_days),
            copy_tags_to_snapshot=True,
            deletion_protection=config.deletion_protection,
            removal_policy=removal,
            ca_certificate=rds.CaCertificate.RDS_CA_RSA2048_G1,
        )
        assert self.instance.secret is not None
        self.secret = self.instance.secret

        rotation_security_group = ec2.SecurityGroup(
            self,
            "RotationSecurityGroup",
            vpc=network.vpc,
            description="Secrets Manager rotation function of the database credentials",
            allow_all_outbound=False,
        )
        # The rotation functions talk to the database and to Secrets Manager through its interface
        # endpoint, whose security group must admit them: without that rule every rotation fails
        # at its first step (createSecret), silently but for the rotation alarm.
        network.allow_endpoints(rotation_security_group)
        self.rotation_security_group = rotation_security_group
        self.rotations = [
            self.instance.add_rotation_single_user(
                automatically_after=Duration.days(30),
                # Not at creation: the first deployment's migrations must not race a password change.
                rotate_immediately_on_update=False,
                vpc_subnets=network.isolated,
                endpoint=network.endpoints["SecretsManager"],
                security_group=rotation_security_group,
            )
        ]

        # The functions' own login (least privilege: data access, no DDL; migration 0004 creates its
        # privileges, the migrate function its login from this secret). The master user serves the
        # migrations only. Multi-user rotation alternates between the user and a clone that gets
        # the same role memberships, so the privileges sit on a role the login is a member of.
        self.app_secret = rds.DatabaseSecret(
            self,
            "AppCredentials",
            username=C.APP_DATABASE_USER,
            encryption_key=self.key,
            master_secret=self.secret,
        ).attach(self.instance)
        self.rotations.append(
            self.instance.add_rotation_multi_user(
                "AppRotation",
                secret=self.app_secret,
                automatically_after=Duration.days(30),
                rotate_immediately_on_update=False,
                vpc_subnets=network.isolated,
                endpoint=network.endpoints["SecretsManager"],
                security_group=rotation_security_group,
            )
        )

        self.proxy = self.instance.add_proxy(
            "Proxy",
            secrets=[self.secret, self.app_secret],
            vpc=network.vpc,
            vpc_subnets=network.isolated,
            security_groups=[self.proxy_security_group],
            require_tls=True,
            iam_auth=False,
            client_password_auth_type=rds.ClientPasswordAuthType.POSTGRES_SCRAM_SHA_256,
            debug_logging=False,
            borrow_timeout=Duration.seconds(30),
            idle_client_timeout=Duration.minutes(15),
            max_connections_percent=90,
        )

        self.database_name = DATABASE_NAME
        self.proxy_endpoint = self.proxy.endpoint
        self.instance_endpoint = self.instance.db_instance_endpoint_address

        acknowledge(
            self.instance,
            {
                "AwsSolutions-RDS11": "PostgreSQL listens on its default port; the instance sits in isolated "
                "subnets and its security group admits only the proxy, the migrate and the rotation functions. "
                "RDS Proxy for PostgreSQL listens on 5432 in any case.",
            },
        )
        if not config.db_multi_az:
            acknowledge(
                self.instance,
                {
                    "AwsSolutions-RDS3": "Single-AZ by default to keep the idle cost low; the scheduler "
                    "tolerates a failover pause (leases expire and are reclaimed). Set -c db_multi_az=true "
                    "for production.",
                },
            )
        if not config.deletion_protection:
            acknowledge(
                self.instance,
                {
                    "AwsSolutions-RDS10": "Deletion protection switched off by -c deletion_protection=false "
                    "(throw-away stacks)."
                },
            )

    def allow_from(self, group: ec2.ISecurityGroup, *, through_proxy: bool = True) -> None:
        """Open PostgreSQL from ``group``: to the proxy, or to the instance itself."""
        target = self.proxy_security_group if through_proxy else self.security_group
        allow(group, target, ec2.Port.tcp(PORT), "PostgreSQL")
