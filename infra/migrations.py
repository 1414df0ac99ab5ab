"""Schema migrations as a CloudFormation custom resource: the migrate function runs on the first
deploy and on every deploy in which a file of ``functions/scheduler/sql/migrations`` changed."""

from __future__ import annotations

from aws_cdk import CfnElement, CustomResource, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.config import Config
from infra.lambdas import LambdaKit, Placement, kept, retention
from infra.nag import LAMBDA_BASIC, acknowledge
from infra.shared import C, migrations_hash

RESOURCE_TYPE = "Custom::SchedulerMigrations"


class Migrations(Construct):
    """The migrate function and the custom resource that invokes it.

    The function receives custom-resource events (``RequestType`` Create, Update or Delete;
    ``ResourceProperties.MigrationsHash``): it applies the pending migrations on Create and
    Update, does nothing on Delete, and fails the deployment when they fail. On AWS the events
    come through ``aws_cdk.custom_resources.Provider`` (whose framework function, in the VPC's
    isolated subnets, needs no route to CloudFormation's S3 response URL from the migrate
    function); with ``localstack=true`` the function is the resource's service token itself and
    answers CloudFormation directly (the framework's function is Node.js, which the host
    executor of the LocalStack tests does not run).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        kit: LambdaKit,
        placement: Placement | None,
        environment: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = kit.function(
            self,
            "Handler",
            handler=C.MIGRATE_HANDLER,
            description="Applies the scheduler's SQL migrations (CloudFormation custom resource)",
            timeout=Duration.minutes(5),
            memory_size=256,
            environment=environment,
            placement=placement,
        )
        self.hash = migrations_hash()
        if config.localstack:
            self.provider: cr.Provider | None = None
            service_token = self.function.function_arn
        else:
            provider_logs = logs.LogGroup(
                self,
                "ProviderLogs",
                retention=retention(config.log_retention_days),
                removal_policy=kept(config),
            )
            self.provider = cr.Provider(self, "Provider", on_event_handler=self.function, log_group=provider_logs)
            service_token = self.provider.service_token
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=service_token,
            resource_type=RESOURCE_TYPE,
            # A new hash is an Update event: the function runs again.
            properties={"MigrationsHash": self.hash},
        )
        if self.provider is None:
            return

        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, CfnElement)
        handler_logical_id = Stack.of(self).resolve(Stack.of(self).get_logical_id(cfn_function))
        acknowledge(
            self.provider,
            {
                LAMBDA_BASIC: "CDK's custom-resource framework function: the AWS-managed policy only lets it "
                "write its own logs.",
                f"AwsSolutions-IAM5[Resource::<{handler_logical_id}.Arn>:*]": "CDK's custom-resource framework "
                "may invoke any version of the migrate function, and only that function.",
            },
        )

    @property
    def functions(self) -> list[lambda_.Function]:
        """The migrate function."""
        return [self.function]
