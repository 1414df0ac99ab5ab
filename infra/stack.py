"""The one stack: composes network, database, broker, runner, API, migrations and observability.

Two shapes, chosen by context: on AWS (the default) everything sits in a VPC and reaches
PostgreSQL through RDS Proxy; with ``localstack=true`` there is no VPC, RDS or Amazon MQ, and
the database and broker URLs are stack parameters.
"""

from __future__ import annotations

import json

from aws_cdk import CfnOutput, CfnParameter, SecretValue, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.api import STAGE, Api
from infra.broker import Broker
from infra.config import Config
from infra.database import Database
from infra.jobs import SchedulerApiExports
from infra.lambdas import LambdaKit, Placement, kept
from infra.migrations import Migrations
from infra.nag import acknowledge
from infra.network import Network
from infra.observability import Observability
from infra.rds_ca import LAMBDA_BUNDLE_PATH
from infra.runner import Runner, RunnerPlacement
from infra.shared import C

# The LocalStack variant's default callers: LocalStack's usual key, and a second tenant's.
DEFAULT_LOCALSTACK_CREDENTIALS = {
    key: {"secret_access_key": key, "principal": f"arn:aws:iam::000000000000:user/{key}"} for key in ("test", "test2")
}


class SchedulerStack(Stack):
    """The scheduler on AWS (or on LocalStack), environment-agnostic unless told otherwise."""

    def __init__(self, scope: Construct, construct_id: str, *, config: Config, **kwargs: object) -> None:
        super().__init__(
            scope,
            construct_id,
            description="Serverless distributed job scheduler (API Gateway, Lambda, RDS PostgreSQL)",
            **kwargs,  # type: ignore[arg-type]
        )
        self.config = config
        # The proxy target group takes no tags (CloudFormation rejects them).
        Tags.of(self).add("service", config.service_name, exclude_resource_types=["AWS::RDS::DBProxyTargetGroup"])
        kit = LambdaKit(self, "Lambdas", config=config)
        self.job_secrets_key = kms.Key(
            self,
            "JobSecretsKey",
            description="Scheduler: envelope encryption of job secrets (target passwords and tokens)",
            enable_key_rotation=True,
            removal_policy=kept(config),
        )
        # The API's keyed hash of each secret it seals (kms:GenerateMac), stored in the token: a
        # secret sent again is compared with the stored one by its HMAC, as the API cannot open it.
        self.job_secrets_mac_key = kms.Key(
            self,
            "JobSecretsMacKey",
            description="Scheduler: HMAC of job secrets, to tell a secret sent again from a new one",
            key_spec=kms.KeySpec.HMAC_256,
            key_usage=kms.KeyUsage.GENERATE_VERIFY_MAC,
            removal_policy=kept(config),
        )
        targets_env = {C.ENV_TARGET_ALLOW_LIST: config.target_allow_list} if config.target_allow_list else {}

        self.network: Network | None = None
        self.database: Database | None = None
        self.broker: Broker | None = None
        if config.localstack:
            database_url = CfnParameter(
                self,
                "DatabaseUrl",
                type="String",
                no_echo=True,
                description="PostgreSQL URL the functions use, reachable from LocalStack's Lambda containers",
            )
            broker_url = CfnParameter(
                self,
                "BrokerUrl",
                type="String",
                no_echo=True,
                default="",
                description="Default AMQP broker URL (with credentials) for jobs that name none; empty for none",
            )
            # LocalStack's API Gateway verifies no signature and passes no identity: the api
            # function checks SigV4 itself against these access keys (two keys, two tenants).
            api_credentials = CfnParameter(
                self,
                "ApiCredentials",
                type="String",
                no_echo=True,
                default=json.dumps(DEFAULT_LOCALSTACK_CREDENTIALS, separators=(",", ":")),
                description="Access keys of the API's callers (JSON: {access key id: {secret_access_key, "
                "principal}}); by default LocalStack's test/test and a second tenant's test2/test2",
            )
            self.api_credentials: secretsmanager.Secret | None = secretsmanager.Secret(
                self,
                "ApiCredentialsSecret",
                description="Scheduler (LocalStack variant): the access keys the API verifies signatures against",
                secret_string_value=SecretValue.cfn_parameter(api_credentials),
            )
            acknowledge(
                self.api_credentials,
                {
                    "AwsSolutions-SMG4": "LocalStack variant only: the keys are the stack parameter's, replaced by "
                    "deploying with another ApiCredentials value."
                },
            )
            database_env = {C.ENV_DATABASE_URL: database_url.value_as_string}
            migrate_env = dict(database_env)
            local_env = {C.ENV_ALLOW_PRIVATE_TARGETS: "true"}  # targets run beside LocalStack
            api_env = {
                **database_env,
                **local_env,
                C.ENV_DEFAULT_BROKER_URL: broker_url.value_as_string,
                C.ENV_API_CREDENTIALS_SECRET_ARN: self.api_credentials.secret_arn,
            }
            executor_env = {**local_env, C.ENV_DEFAULT_BROKER_URL: broker_url.value_as_string}
            owners = config.broker_owner_patterns(self.account)
            if owners:
                api_env[C.ENV_DEFAULT_BROKER_OWNERS] = executor_env[C.ENV_DEFAULT_BROKER_OWNERS] = owners
            api_placement = migrate_placement = None
            runner_placement = RunnerPlacement(fanout=None, executor=None)
        else:
            self.api_credentials = None
            network = self.network = Network(self, "Network", config=config)
            database = self.database = Database(self, "Database", config=config, network=network)
            # The functions log in as the application user (no DDL), through the proxy.
            database_env = {
                C.ENV_DATABASE_SECRET_ARN: database.app_secret.secret_arn,
                C.ENV_DATABASE_HOST: database.proxy_endpoint,
                C.ENV_DATABASE_NAME: database.database_name,
            }
            # Straight to the instance (or the cluster's writer), as the master user: migrations take
            # advisory locks, which pin proxy connections. The application secret gives the login the migrations create.
            # TLS verify-full against the RDS CAs the code asset ships (infra.rds_ca).
            migrate_env = {
                C.ENV_DATABASE_SECRET_ARN: database.secret.secret_arn,
                C.ENV_DATABASE_APP_SECRET_ARN: database.app_secret.secret_arn,
                C.ENV_DATABASE_HOST: database.direct_endpoint,
                C.ENV_DATABASE_NAME: database.database_name,
                C.ENV_DATABASE_CA_BUNDLE: LAMBDA_BUNDLE_PATH,
            }
            api_env = dict(database_env)
            if not config.aws_targets:
                # No route to AWS's public endpoints (nor interface endpoints for STS and the target
                # services): the API refuses AWS and SigV4 targets with a 400 rather than accept jobs
                # whose deliveries would time out.
                api_env[C.ENV_AWS_TARGETS] = "false"
            executor_env = {}
            if config.with_broker:
                broker = self.broker = Broker(
                    self, "Broker", config=config, network=network, log_retention_role=database.log_retention_role
                )
                database.allow_log_retention(broker.log_groups)
                api_env[C.ENV_DEFAULT_BROKER_URL] = broker.url
                executor_env = {
                    C.ENV_DEFAULT_BROKER_URL: broker.url,
                    C.ENV_DEFAULT_BROKER_SECRET_ARN: broker.secret.secret_arn,
                }
                owners = config.broker_owner_patterns(self.account)
                if owners:
                    api_env[C.ENV_DEFAULT_BROKER_OWNERS] = executor_env[C.ENV_DEFAULT_BROKER_OWNERS] = owners
            api_placement = Placement(network.vpc, network.isolated, network.api_security_group)
            migrate_placement = Placement(network.vpc, network.isolated, network.migrate_security_group)
            runner_placement = RunnerPlacement(
                fanout=Placement(network.vpc, network.isolated, network.fanout_security_group),
                executor=Placement(network.vpc, network.egress, network.executor_security_group),
            )

        key_env = {C.ENV_KMS_KEY_ID: self.job_secrets_key.key_arn}
        self.api = Api(
            self,
            "Api",
            config=config,
            kit=kit,
            placement=api_placement,
            environment={
                **api_env,
                **key_env,
                C.ENV_KMS_MAC_KEY_ID: self.job_secrets_mac_key.key_arn,
                **targets_env,
            },
        )
        self.runner = Runner(
            self,
            "Runner",
            config=config,
            kit=kit,
            placement=runner_placement,
            database_environment=database_env,
            executor_environment={**executor_env, **key_env, **targets_env},
        )
        self.migrations = Migrations(
            self, "Migrations", config=config, kit=kit, placement=migrate_placement, environment=migrate_env
        )
        if self.api_credentials is not None:
            self.api_credentials.grant_read(self.api.function)
        # No tick before the schema exists, and no new code before its migrations: on an update
        # CloudFormation would otherwise replace the functions' code before (or while) the
        # migrations run, and the new code would meet the old schema. The function resources only
        # (their roles and log groups need not wait); the migrate function is a separate one.
        self.runner.tick.node.add_dependency(self.migrations.resource)
        for function in self.migrated_functions:
            cfn_function = function.node.default_child
            assert cfn_function is not None
            cfn_function.node.add_dependency(self.migrations.resource)
        # The executor opens what the API seals: on an update it takes its new code first, so no
        # executor of the code before meets a token of a format only the new code reads.
        api_function, executor_function = self.api.function.node.default_child, self.runner.executor.node.default_child
        assert api_function is not None and executor_function is not None
        api_function.node.add_dependency(executor_function)

        # Envelope encryption of job secrets: the API only seals them (a new data key per secret)
        # and signs their HMACs, the executor only opens them. Those keys only.
        self._grant_job_secrets(self.api.function, "kms:GenerateDataKey")
        self.api.function.add_to_role_policy(
            iam.PolicyStatement(actions=["kms:GenerateMac"], resources=[self.job_secrets_mac_key.key_arn])
        )
        self._grant_job_secrets(self.runner.executor, "kms:Decrypt")
        if self.database is not None and self.network is not None:
            for function in (self.api.function, self.runner.fanout, self.runner.executor, self.migrations.function):
                self.database.app_secret.grant_read(function)
            self.database.secret.grant_read(self.migrations.function)
            for group in (
                self.network.api_security_group,
                self.network.fanout_security_group,
                self.network.executor_security_group,
            ):
                self.database.allow_from(group)
            self.database.allow_from(self.network.migrate_security_group, through_proxy=False)
            # CloudFormation would otherwise run the migrations as soon as the function exists,
            # possibly before the security-group rules and the endpoints it needs.
            self.migrations.resource.node.add_dependency(
                self.network, self.database.security_group, *self.database.secret_resources, *self.database.ready
            )
            # Both passwords rotate once right after the first deployment, once the migrations
            # have created the application login (and on a later deployment, after its migrations).
            self.database.rotate_after(self.migrations.resource)
        if self.broker is not None and self.network is not None:
            self.broker.secret.grant_read(self.runner.executor)
            self.broker.allow_from(self.network.executor_security_group)

        self.observability = Observability(
            self,
            "Observability",
            config=config,
            fanout=self.runner.fanout,
            executor=self.runner.executor,
            api_function=self.api.function,
            rest_api=self.api.rest_api,
            dead_letter_queue=self.runner.dead_letter_queue,
            database=(self.database.cluster or self.database.instance) if self.database else None,
            proxy=self.database.proxy if self.database else None,
            rotations=self.database.rotations if self.database else [],
            broker_name=self.broker.name if self.broker else None,
        )
        self._outputs()

    @property
    def migrated_functions(self) -> list[lambda_.Function]:
        """The functions that run against the migrated schema: updated only after the migrations."""
        return [self.api.function, self.runner.fanout, self.runner.executor]

    def _grant_job_secrets(self, function: lambda_.Function, action: str) -> None:
        function.add_to_role_policy(iam.PolicyStatement(actions=[action], resources=[self.job_secrets_key.key_arn]))

    def _outputs(self) -> None:
        outputs = {
            "ApiUrl": (
                self.api.local_url(self.config.localstack_endpoint) if self.config.localstack else self.api.url,
                "Base URL of the HTTP API (routes under v1/); requests must be SigV4-signed",
            ),
            "AlarmTopicArn": (self.observability.topic.topic_arn, "SNS topic of the alarms"),
            "DashboardName": (self.observability.dashboard.dashboard_name, "CloudWatch dashboard"),
            "DeadLetterQueueUrl": (self.runner.dead_letter_queue.queue_url, "Failed executor invocations"),
            "ExecutorFunctionName": (self.runner.executor.function_name, "Executor Lambda function"),
            "FanoutFunctionName": (self.runner.fanout.function_name, "Fan-out Lambda function"),
        }
        if self.database is not None:
            outputs["DatabaseProxyEndpoint"] = (self.database.proxy_endpoint, "RDS Proxy endpoint (TLS required)")
            outputs["DatabaseSecretArn"] = (self.database.secret.secret_arn, "Database master credentials (migrations)")
            outputs["DatabaseAppSecretArn"] = (self.database.app_secret.secret_arn, "Database application credentials")
        if self.broker is not None:
            outputs["BrokerAmqpEndpoint"] = (self.broker.url, "Amazon MQ AMQPS endpoint (default broker)")
            outputs["BrokerSecretArn"] = (self.broker.secret.secret_arn, "Amazon MQ credentials")
        for name, (value, description) in outputs.items():
            # The API's URL is exported for the Job constructs of other stacks (infra/jobs.py).
            export = f"{self.stack_name}-{name}" if name == "ApiUrl" else None
            CfnOutput(self, name, value=value, description=description, export_name=export)
        self.api_exports = SchedulerApiExports(self, "JobsAsCode", rest_api=self.api.rest_api, stage=STAGE)
