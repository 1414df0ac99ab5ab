"""PostgreSQL on RDS (one instance, or an Aurora Serverless v2 cluster), its credentials, their
rotation, and the RDS Proxy the functions use."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, CfnResource, CfnRule, CfnRuleAssertion, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IConstruct

from infra.config import Config
from infra.lambdas import kept, retention
from infra.nag import LAMBDA_BASIC, acknowledge
from infra.network import Network, allow
from infra.rds_ca import regions as rds_ca_regions
from infra.shared import C

DATABASE_NAME = "scheduler"
ADMIN_USER = "scheduler"
PORT = 5432

# Both shapes: TLS only, and statements slower than a second in the PostgreSQL log. A failed
# statement's text stays out of it (log_min_error_statement: the error is logged, not the
# statement): the log is exported, and a failed ALTER ROLE ... PASSWORD of a rotation would
# otherwise put a password in CloudWatch Logs.
PARAMETERS = {"rds.force_ssl": "1", "log_min_duration_statement": "1000", "log_min_error_statement": "panic"}
# Both shapes export the PostgreSQL log (errors, slow statements) to CloudWatch Logs.
LOG_EXPORTS = ["postgresql"]
# CDK's singleton function that sets the exported log's retention (at the stack's root).
LOG_RETENTION_FUNCTION_ID = "LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a"
CA_CERTIFICATE = rds.CaCertificate.RDS_CA_RSA2048_G1
# A pinned minor (Aurora takes no major-only version); instances upgrade minors automatically.
# 17 as on the instance shape: RDS Proxy supports a new major some time after Aurora does.
AURORA_VERSION = rds.AuroraPostgresEngineVersion.VER_17_5

REMOVAL = {"snapshot": RemovalPolicy.SNAPSHOT, "retain": RemovalPolicy.RETAIN, "destroy": RemovalPolicy.DESTROY}


class Database(Construct):
    """Encrypted PostgreSQL in the isolated subnets, reached through RDS Proxy.

    ``database=instance`` (the default): one RDS instance (``instance``); ``aurora-serverless``:
    an Aurora PostgreSQL Serverless v2 cluster (``cluster``: a writer, and a reader to fail over to
    with ``db_reader`` or ``db_multi_az``) scaling between ``db_min_acu`` and ``db_max_acu``.
    Either way the functions connect to ``proxy_endpoint`` as the application user of
    ``app_secret`` (TLS required); the migrate function connects to ``direct_endpoint`` (the
    instance, or the cluster's writer endpoint) directly as the master user of ``secret``, since
    advisory locks would pin proxy connections. Both passwords rotate every 30 days (``rotations``),
    and once right after the deployment that creates (or changes) their schedules, as soon as the
    resources given to :meth:`rotate_after` (the migrations) are done. The PostgreSQL log goes to
    CloudWatch Logs (``log_retention_days``); Performance Insights runs at its free retention,
    encrypted with the database's key.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: Config, network: Network) -> None:
        super().__init__(scope, construct_id)
        removal = REMOVAL[config.removal_policy]
        self.key = kms.Key(
            self,
            "Key",
            description="Scheduler database: storage, snapshots and credentials",
            enable_key_rotation=True,
            removal_policy=kept(config),
        )
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=network.vpc, description="PostgreSQL instance", allow_all_outbound=False
        )
        self.proxy_security_group = ec2.SecurityGroup(
            self, "ProxySecurityGroup", vpc=network.vpc, description="RDS Proxy", allow_all_outbound=False
        )
        allow(self.proxy_security_group, self.security_group, ec2.Port.tcp(PORT), "proxy to PostgreSQL")

        self.log_retention_role = self._log_retention_role()
        self.instance: rds.DatabaseInstance | None = None
        self.cluster: rds.DatabaseCluster | None = None
        target: rds.DatabaseInstance | rds.DatabaseCluster
        if config.aurora:
            target = self.cluster = self._aurora_cluster(config, network, removal)
            assert self.cluster.secret is not None
            self.secret = self.cluster.secret
            # What the migrations wait for: the writer instance, not just the cluster (they connect to it).
            self.ready: list[IConstruct] = [self.cluster.node.find_child("Writer")]
            self.direct_endpoint = self.cluster.cluster_endpoint.hostname
        else:
            target = self.instance = self._instance(config, network, removal)
            assert self.instance.secret is not None
            self.secret = self.instance.secret
            cfn_instance = self.instance.node.default_child
            assert cfn_instance is not None
            self.ready = [cfn_instance]  # the DB instance alone, not its proxy
            self.direct_endpoint = self.instance.db_instance_endpoint_address
        self._allow_log_retention(target)

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
            target.add_rotation_single_user(
                automatically_after=Duration.days(30),
                # Once when the schedule is created (or changed), so the first deployment exercises
                # the rotation path at once rather than 30 days later; rotate_after() holds the
                # schedules back until the migrations are done (the first deployment's migrations
                # must not race a password change: the migrate function creates the app login
                # from its secret).
                rotate_immediately_on_update=True,
                vpc_subnets=network.isolated,
                endpoint=network.endpoints["SecretsManager"],
                security_group=rotation_security_group,
            )
        ]

        # The functions' own login (least privilege: data access, no DDL; the migrations give its
        # privileges to a role of this database alone, scheduler_data_<database> since 0011, and
        # the migrate function creates the login from this secret and makes it a member). The master user serves the
        # migrations only. Multi-user rotation alternates between the user and a clone that gets
        # the same role memberships, so the privileges sit on a role the login is a member of.
        self.app_secret = rds.DatabaseSecret(
            self,
            "AppCredentials",
            username=C.APP_DATABASE_USER,
            encryption_key=self.key,
            master_secret=self.secret,
        ).attach(target)
        self.rotations.append(
            target.add_rotation_multi_user(
                "AppRotation",
                secret=self.app_secret,
                automatically_after=Duration.days(30),
                rotate_immediately_on_update=True,
                vpc_subnets=network.isolated,
                endpoint=network.endpoints["SecretsManager"],
                security_group=rotation_security_group,
            )
        )

        self.proxy = target.add_proxy(
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

        # Both secrets are deleted with the stack only under removal_policy=destroy (CDK's default
        # deletes them): a final snapshot or a retained database still needs its passwords.
        for secret in (self.secret, self.app_secret):
            resource = _secret_resource(secret)
            assert isinstance(resource, CfnResource)
            resource.apply_removal_policy(kept(config))

        self.database_name = DATABASE_NAME
        self.proxy_endpoint = self.proxy.endpoint
        self._require_a_ca_bundle_for_the_region()

    @property
    def rotation_schedules(self) -> list[secretsmanager.RotationSchedule]:
        """The rotation schedules of both secrets (CDK puts each under the secret it rotates)."""
        return [c for c in self.node.find_all() if isinstance(c, secretsmanager.RotationSchedule)]

    @property
    def secret_resources(self) -> list[IConstruct]:
        """The master secret and its attachment to the database (which adds the host), without
        their rotation schedule: what the migrations need before they run."""
        attachment = self.secret.node.default_child
        assert attachment is not None
        return [_secret_resource(self.secret), attachment]

    def rotate_after(self, *dependencies: IConstruct) -> None:
        """Create (or change) the rotation schedules only once ``dependencies`` are done: each
        schedule rotates its secret right away (``RotateImmediatelyOnUpdate``), so on the first
        deployment the migrations must have created the application login first."""
        for schedule in self.rotation_schedules:
            schedule.node.add_dependency(*dependencies)

    def _require_a_ca_bundle_for_the_region(self) -> None:
        """The migrate function verifies the database's certificate against the RDS roots the
        code ships (``infra.rds_ca``): a region whose root is not among them fails the deployment
        at once, with the reason, instead of its migrations twenty minutes in."""
        covered = rds_ca_regions(CA_CERTIFICATE.to_string())
        CfnRule(
            self,
            "CaBundleCoversRegion",
            assertions=[
                CfnRuleAssertion(
                    assert_=Fn.condition_contains(covered, Aws.REGION),
                    assert_description=f"functions/scheduler/certs/rds-global-bundle.pem has no "
                    f"{CA_CERTIFICATE.to_string()} root for this region: rebuild it from AWS's global bundle "
                    "(python -m infra.rds_ca global-bundle.pem; README, 'Database users, credentials and TLS').",
                )
            ],
        )

    def _log_retention_role(self) -> iam.Role:
        """The role of CDK's log-retention function, which sets the retention of the PostgreSQL log
        group: RDS creates that group itself, named after the database (known only once it
        exists), so it cannot be a log group of this stack. CDK would grant the function
        ``logs:PutRetentionPolicy`` on every log group (``*``); it gets this role instead,
        immutable to CDK, whose policy names two log groups (:meth:`_allow_log_retention`)."""
        role = iam.Role(
            self,
            "LogRetentionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="CDK's log-retention function: the retention of the database's exported log",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaBasicExecutionRole")
            ],
        )
        acknowledge(
            role,
            {
                LAMBDA_BASIC: "AWS-managed policy that only lets CDK's log-retention function write its own "
                "CloudWatch logs (and create the exported log group if RDS has not yet).",
            },
        )
        return role

    def _allow_log_retention(self, target: rds.DatabaseInstance | rds.DatabaseCluster) -> None:
        """Let the log-retention function set the retention of ``target``'s PostgreSQL log and of
        its own log (it gives itself one day when first run), nothing else; and have the
        retention's custom resource wait for that policy (CDK makes its function wait for a
        role's policies only when it created the role itself)."""
        stack = Stack.of(self)
        if isinstance(target, rds.DatabaseCluster):
            kind, identifier = "cluster", target.cluster_identifier
        else:
            kind, identifier = "instance", target.instance_identifier
        function = stack.node.find_child(LOG_RETENTION_FUNCTION_ID).node.default_child
        assert isinstance(function, CfnResource)
        # (log group name, its form in a cdk-nag finding: tokens written as <LogicalId>)
        cfn_target = target.node.default_child
        assert isinstance(cfn_target, CfnResource)
        database_id = stack.resolve(cfn_target.logical_id)
        function_id = stack.resolve(function.logical_id)
        groups = [
            (f"/aws/rds/{kind}/{identifier}/{log}", f"/aws/rds/{kind}/<{database_id}>/{log}") for log in LOG_EXPORTS
        ]
        groups.append((f"/aws/lambda/{function.ref}", f"/aws/lambda/<{function_id}>"))
        self.allow_log_retention(groups)
        for log in LOG_EXPORTS:
            target.node.find_child(f"LogRetention{log}").node.add_dependency(self.log_retention_role)

    def allow_log_retention(self, groups: list[tuple[str, str]]) -> None:
        """Let CDK's log-retention function (``log_retention_role``) set the retention of these
        log groups, each given as (name, its form in a cdk-nag finding), and no other."""
        stack = Stack.of(self)
        self.log_retention_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy"],
                resources=[
                    stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=name + streams,
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                    for name, _ in groups
                    for streams in ("", ":*")
                ],
            )
        )
        acknowledge(
            self.log_retention_role,
            {
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:"
                f"{nag_name}:*]": "One named log group (the database's exported log, the broker's general log, "
                "or the log-retention function's own): CloudWatch Logs names a log group's resources with a "
                "trailing ':*'."
                for _, nag_name in groups
            },
        )

    def _instance(self, config: Config, network: Network, removal: RemovalPolicy) -> rds.DatabaseInstance:
        """One RDS PostgreSQL instance of ``db_instance_type`` (``db_multi_az``: a standby)."""
        # The major only: RDS picks the current minor and upgrades it. 17 rather than 18 because
        # RDS Proxy supports a new major some time after RDS does.
        engine = rds.DatabaseInstanceEngine.postgres(version=rds.PostgresEngineVersion.VER_17)
        parameters = rds.ParameterGroup(
            self,
            "Parameters",
            engine=engine,
            description="Scheduler PostgreSQL parameters",
            parameters=PARAMETERS,
        )
        instance = rds.DatabaseInstance(
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
            # Free at the default retention (7 days); encrypted with the database's key, as on Aurora.
            enable_performance_insights=True,
            performance_insight_encryption_key=self.key,
            performance_insight_retention=rds.PerformanceInsightRetention.DEFAULT,
            cloudwatch_logs_exports=LOG_EXPORTS,
            cloudwatch_logs_retention=retention(config.log_retention_days),
            cloudwatch_logs_retention_role=self.log_retention_role.without_policy_updates(),
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
            ca_certificate=CA_CERTIFICATE,
        )
        acknowledge(
            instance,
            {
                "AwsSolutions-RDS11": "PostgreSQL listens on its default port; the instance sits in isolated "
                "subnets and its security group admits only the proxy, the migrate and the rotation functions. "
                "RDS Proxy for PostgreSQL listens on 5432 in any case.",
            },
        )
        if not config.db_multi_az:
            acknowledge(
                instance,
                {
                    "AwsSolutions-RDS3": "Single-AZ by default to keep the idle cost low; the scheduler "
                    "tolerates a failover pause (leases expire and are reclaimed). Set -c db_multi_az=true "
                    "for production.",
                },
            )
        if not config.deletion_protection:
            acknowledge(
                instance,
                {
                    "AwsSolutions-RDS10": "Deletion protection switched off by -c deletion_protection=false "
                    "(throw-away stacks)."
                },
            )
        return instance

    def _aurora_cluster(self, config: Config, network: Network, removal: RemovalPolicy) -> rds.DatabaseCluster:
        """An Aurora PostgreSQL Serverless v2 cluster: the writer in the first AZ, and with
        ``db_reader`` (or ``db_multi_az``) a reader in the second that scales with it, so a failover
        lands on the same capacity. The scheduler reads and writes through the writer only."""
        engine = rds.DatabaseClusterEngine.aurora_postgres(version=AURORA_VERSION)
        parameters = rds.ParameterGroup(
            self,
            "ClusterParameters",
            engine=engine,
            description="Scheduler Aurora PostgreSQL cluster parameters",
            parameters=PARAMETERS,
        )
        zones = network.vpc.availability_zones

        def serverless(name: str, zone: str, *, scale_with_writer: bool | None = None) -> rds.IClusterInstance:
            return rds.ClusterInstance.serverless_v2(
                name,
                availability_zone=zone,
                auto_minor_version_upgrade=True,
                ca_certificate=CA_CERTIFICATE,
                publicly_accessible=False,
                # Free at the default retention (7 days); encrypted with the database's key.
                enable_performance_insights=True,
                performance_insight_encryption_key=self.key,
                performance_insight_retention=rds.PerformanceInsightRetention.DEFAULT,
                scale_with_writer=scale_with_writer,
            )

        with_reader = config.db_reader or config.db_multi_az
        cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=engine,
            writer=serverless("Writer", zones[0]),
            readers=[serverless("Reader", zones[1], scale_with_writer=True)] if with_reader else [],
            serverless_v2_min_capacity=config.db_min_acu,
            serverless_v2_max_capacity=config.db_max_acu,
            vpc=network.vpc,
            vpc_subnets=network.isolated,
            security_groups=[self.security_group],
            port=PORT,
            default_database_name=DATABASE_NAME,
            credentials=rds.Credentials.from_generated_secret(ADMIN_USER, encryption_key=self.key),
            parameter_group=parameters,
            storage_encrypted=True,
            storage_encryption_key=self.key,
            storage_type=rds.DBClusterStorageType.AURORA_IOPT1
            if config.db_io_optimized
            else rds.DBClusterStorageType.AURORA,
            backup=rds.BackupProps(retention=Duration.days(config.db_backup_days)),
            cloudwatch_logs_exports=LOG_EXPORTS,
            cloudwatch_logs_retention=retention(config.log_retention_days),
            cloudwatch_logs_retention_role=self.log_retention_role.without_policy_updates(),
            copy_tags_to_snapshot=True,
            iam_authentication=False,
            deletion_protection=config.deletion_protection,
            removal_policy=removal,
        )
        findings = {
            "AwsSolutions-RDS11": "PostgreSQL listens on its default port; the cluster sits in isolated "
            "subnets and its security group admits only the proxy, the migrate and the rotation functions. "
            "RDS Proxy for PostgreSQL listens on 5432 in any case.",
            "AwsSolutions-RDS6": "Password authentication through RDS Proxy with rotated Secrets Manager "
            "credentials (master and application user), instead of IAM database authentication.",
        }
        if not config.deletion_protection:
            findings["AwsSolutions-RDS10"] = (
                "Deletion protection switched off by -c deletion_protection=false (throw-away stacks)."
            )
        acknowledge(cluster, findings)
        return cluster

    def allow_from(self, group: ec2.ISecurityGroup, *, through_proxy: bool = True) -> None:
        """Open PostgreSQL from ``group``: to the proxy, or to the instance itself."""
        target = self.proxy_security_group if through_proxy else self.security_group
        allow(group, target, ec2.Port.tcp(PORT), "PostgreSQL")


def _secret_resource(attached: secretsmanager.ISecret) -> IConstruct:
    """The ``AWS::SecretsManager::Secret`` of a secret attached to the database (``attach()``
    answers the attachment, a child of the DatabaseSecret it belongs to)."""
    owner = attached.node.scope
    secret = owner.node.default_child if owner is not None else None
    assert secret is not None
    return secret
