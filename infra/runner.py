"""The runner: the once-a-minute tick, the fan-out that claims due jobs, the executor that
delivers them, and the dead-letter queue of the executor's asynchronous invocations."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import Config
from infra.lambdas import LambdaKit, Placement
from infra.nag import acknowledge
from infra.shared import C

# The fan-out runs once a minute; at second precision it keeps claiming a little past its minute
# (consecutive runs overlap, claims skip locked rows), so it needs more than 60 s.
FANOUT_TIMEOUT = Duration.seconds(90)


def fanout_concurrency(fanout_max: int) -> int:
    """The fan-out's reserved concurrency: two overlapping minutes, each with its primary and
    helpers (``fanout_max`` fan-outs), and one spare. One fan-out a minute gives 3."""
    return 2 * fanout_max + 1


def fanout_function_name(stack_name: str) -> str:
    """The fan-out's fixed, stack-scoped name (``<stack>-fanout``): its environment and its
    permission to invoke itself name it without a reference to the function (a circular one).
    A stack name too long for Lambda's 64 characters is cut and keeps a hash of the whole."""
    name = f"{stack_name}-{C.FANOUT_FUNCTION_SUFFIX}"
    if len(name) <= 64:
        return name
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:8]
    return f"{stack_name[: 64 - len(C.FANOUT_FUNCTION_SUFFIX) - 10]}-{digest}-{C.FANOUT_FUNCTION_SUFFIX}"


# A target may take up to 900 s (scheduler.schema.models.MAX_TIMEOUT_SECONDS); the executor caps each
# delivery by its remaining time, so its timeout is Lambda's maximum. It is billed per use.
EXECUTOR_TIMEOUT = Duration.minutes(15)
# A little more than the claim lease (Settings.claim_lease_seconds, 120 s): an older invocation
# finds its lease taken over and would do nothing, so it goes to the dead-letter queue instead.
EXECUTOR_MAX_EVENT_AGE = Duration.minutes(3)


@dataclass(frozen=True)
class RunnerPlacement:
    """Where the two runner functions sit (``None`` outside a VPC, for LocalStack)."""

    fanout: Placement | None
    executor: Placement | None


class Runner(Construct):
    """Tick rule -> fan-out -> (async invoke, one per job) -> executor; failures -> DLQ."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: Config,
        kit: LambdaKit,
        placement: RunnerPlacement,
        database_environment: dict[str, str],
        executor_environment: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "ExecutorDeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letter_queue,
            {
                "AwsSolutions-SQS3": "This queue is itself the dead-letter queue (on-failure destination) of the "
                "executor's asynchronous invocations."
            },
        )

        # Retries are durable (a failed attempt sets the next attempt time in the row), so the
        # platform does not retry: a failed or expired invocation goes to the dead-letter queue.
        self.executor = kit.function(
            self,
            "Executor",
            handler=C.EXECUTOR_HANDLER,
            description="Delivers one claimed job to its target (HTTP, AMQP, AWS) and records the execution",
            timeout=EXECUTOR_TIMEOUT,
            memory_size=512,
            environment={
                **database_environment,
                **executor_environment,
                # The executor runs the alert sweep, which purges alerts after the executions' retention.
                C.ENV_EXECUTION_RETENTION_DAYS: str(config.execution_retention_days),
                **({C.ENV_CONSOLE_URL: config.console_url} if config.console_url else {}),
            },
            placement=placement.executor,
            # A bound on deliveries at once (and so on database connections); the fan-out reads it
            # and dispatches no more than that, so no invoke waits in the throttled queue until it expires.
            reserved_concurrency=config.executor_concurrency,
        )
        self.executor.configure_async_invoke(
            retry_attempts=0,
            max_event_age=EXECUTOR_MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.dead_letter_queue),
        )

        if config.aws_targets:
            self._allow_target_roles(config)

        fanout_name = fanout_function_name(config.stack_name)
        self.fanout = kit.function(
            self,
            "Fanout",
            handler=C.FANOUT_HANDLER,
            description="Claims due jobs once a minute and invokes the executor for each",
            timeout=FANOUT_TIMEOUT,
            memory_size=512,
            reserved_concurrency=fanout_concurrency(config.fanout_max),
            environment={
                **database_environment,
                C.ENV_PRECISION: config.precision,
                C.ENV_EXECUTOR_FUNCTION: self.executor.function_name,
                C.ENV_EXECUTOR_CONCURRENCY: str(config.executor_concurrency),
                C.ENV_EXECUTION_RETENTION_DAYS: str(config.execution_retention_days),
                C.ENV_FANOUT_FUNCTION: fanout_name,
                C.ENV_MAX_FANOUTS: str(config.fanout_max),
                C.ENV_CLAIMS_PER_INVOKE: str(config.claims_per_invoke),
            },
            placement=placement.fanout,
            function_name=fanout_name,
        )
        # A missed tick is covered by the next one: no platform retries, no stale runs.
        self.fanout.configure_async_invoke(retry_attempts=0, max_event_age=Duration.seconds(60))
        # Exactly the executor, unqualified: no wildcard over its versions and aliases.
        self.fanout.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.executor.function_arn])
        )
        if config.fanout_max > 1:
            # Itself (helpers), by its fixed name's ARN, unqualified: no reference to its own Arn.
            own_arn = Stack.of(self).format_arn(
                service="lambda",
                resource="function",
                resource_name=fanout_name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            self.fanout.add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[own_arn]))

        self.tick = events.Rule(
            self,
            "Tick",
            description="Runs the scheduler's fan-out every minute",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[targets.LambdaFunction(self.fanout, retry_attempts=2, max_event_age=Duration.seconds(60))],
        )

    def _allow_target_roles(self, config: Config) -> None:
        """AWS targets: the executor calls them only as a job's role, assumed with the job's owner
        as ExternalId (the role's trust policy names the tenants it serves), and has no other
        right on those services. Which roles it may assume: context target_role_arns, else any;
        by default only those tagged ``scheduler-target=true`` (context target_role_tag), so that
        a role trusting the executor's whole account, with no ExternalId asked, is out of reach.
        Not granted where the executor cannot reach AWS (``nat_gateways=0``)."""
        partition = Stack.of(self).partition
        roles = [
            f"arn:{partition}:iam::*:role{item}*" if item.startswith("/") else item for item in config.target_role_arns
        ] or [f"arn:{partition}:iam::*:role/*"]
        tagged = {"StringEquals": {f"aws:ResourceTag/{config.target_role_tag}": "true"}}
        self.executor.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sts:AssumeRole"], resources=roles, conditions=tagged if config.target_role_tag else None
            )
        )
        reason = (
            "The roles of AWS targets are the users' own, in their accounts: each trusts the executor only "
            "with the ExternalId of the tenants it names"
            + (
                f", and the executor may assume only those tagged {config.target_role_tag}=true."
                if config.target_role_tag
                else "."
            )
        )
        acknowledge(
            self.executor,
            {
                f"AwsSolutions-IAM5[Resource::{role.replace(partition, '<AWS::Partition>')}]": reason
                for role in roles
                if "*" in role
            },
        )

    @property
    def functions(self) -> list[lambda_.Function]:
        """The runner's functions."""
        return [self.fanout, self.executor]
