"""What the four functions share: runtime, architecture, the one code asset, the dependency layer,
Powertools settings, and a log group with retention per function."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import jsii
from aws_cdk import BundlingOptions, DockerImage, Duration, ILocalBundling, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import Config
from infra.nag import acknowledge, acknowledge_lambda_role
from infra.shared import C, layer_build


@dataclass(frozen=True)
class Placement:
    """Where a function runs in the VPC."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup


@jsii.implements(ILocalBundling)
class _CodeWithDependencies:
    """Local bundling for LocalStack, whose free edition does not apply layers: the code asset
    gets the layer's packages copied beside the handlers (both with their bytecode)."""

    def __init__(self, layer_site: Path, code: Path) -> None:
        self._layer_site = layer_site
        self._code = code

    def try_bundle(self, output_dir: str, *_options: object, **_keywords: object) -> bool:
        out = Path(output_dir)
        shutil.copytree(self._layer_site, out, dirs_exist_ok=True)
        shutil.copytree(self._code, out, dirs_exist_ok=True)
        return True


class LambdaKit(Construct):
    """Builds the scheduler's functions with the same runtime, code, layer and defaults."""

    def __init__(self, scope: Construct, construct_id: str, *, config: Config) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.runtime: lambda_.Runtime = getattr(lambda_.Runtime, "PYTHON_" + config.python_version.replace(".", "_"))
        self.architecture = (
            lambda_.Architecture.ARM_64 if config.architecture == "arm64" else lambda_.Architecture.X86_64
        )
        # Both assets carry bytecode compiled for the runtime's Python (layers/build.py): /var/task and
        # /opt are read-only, so without it every cold start would compile what it imports.
        layer_dir = layer_build.build_layer(config.python_version, config.architecture)
        code_dir = layer_build.build_code(config.python_version)
        if config.localstack:
            self.layers: list[lambda_.ILayerVersion] = []
            self.code = lambda_.Code.from_asset(
                str(code_dir),
                bundling=BundlingOptions(
                    image=DockerImage.from_registry("scratch"),  # never pulled: local bundling always succeeds
                    local=_CodeWithDependencies(layer_dir / "python", code_dir),
                    # Part of the asset hash, so a new layer makes a new bundle.
                    environment={
                        "LAYER_FINGERPRINT": layer_build.fingerprint(config.python_version, config.architecture)
                    },
                ),
            )
        else:
            self.layers = [
                lambda_.LayerVersion(
                    self,
                    "Dependencies",
                    code=lambda_.Code.from_asset(str(layer_dir)),
                    compatible_runtimes=[self.runtime],
                    compatible_architectures=[self.architecture],
                    description=f"Scheduler dependencies (Python {config.python_version}, {config.architecture})",
                    removal_policy=RemovalPolicy.DESTROY,
                )
            ]
            self.code = lambda_.Code.from_asset(str(code_dir))

        self.environment = {
            # Scoped to the stack, so two stacks in one account neither mix metrics nor trip each
            # other's alarms (scheduler.settings reads both back).
            C.ENV_SERVICE_NAME: config.service_name,
            C.ENV_METRICS_NAMESPACE: config.metrics_namespace,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "POWERTOOLS_LOGGER_LOG_EVENT": "false",
            # Responses can carry job data; errors are enough in traces.
            "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
        }
        if config.xray_sdk:
            self.environment[C.ENV_XRAY_SDK] = "true"
        if config.localstack:
            self.environment["AWS_ENDPOINT_URL"] = config.localstack_endpoint

    def function(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        description: str,
        timeout: Duration,
        memory_size: int,
        environment: dict[str, str],
        placement: Placement | None,
        reserved_concurrency: int | None = None,
        function_name: str | None = None,
    ) -> lambda_.Function:
        """A function of the scheduler in ``scope``, with its own log group and execution role."""
        log_group = logs.LogGroup(
            scope,
            f"{construct_id}Logs",
            retention=retention(self._config.log_retention_days),
            removal_policy=kept(self._config),
        )
        function = lambda_.Function(
            scope,
            construct_id,
            runtime=self.runtime,
            architecture=self.architecture,
            code=self.code,
            handler=handler,
            layers=self.layers,
            description=description,
            timeout=timeout,
            memory_size=memory_size,
            environment={**self.environment, **environment},
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=reserved_concurrency,
            function_name=function_name,
            vpc=placement.vpc if placement else None,
            vpc_subnets=placement.subnets if placement else None,
            security_groups=[placement.security_group] if placement else None,
        )
        acknowledge_lambda_role(function, in_vpc=placement is not None)
        if self._config.python_version != layer_build.LATEST_RUNTIME:
            acknowledge(function, {"AwsSolutions-L1": self._why_not_the_latest_runtime()})
        return function

    def _why_not_the_latest_runtime(self) -> str:
        version = self._config.python_version
        if version == layer_build.DEFAULT_PYTHON_VERSION:
            return (
                f"Python {version}, the newest runtime whose interpreter the build has: the code and the layer "
                "ship bytecode compiled for it (layers/build.py), which halves the cold start's imports."
            )
        return (
            f"Python {version} chosen by -c python_version (the LocalStack variant runs the functions with the "
            "host's interpreter, which must load the layer's compiled wheels)."
        )


# CloudWatch Logs accepts these retention periods only (days).
_RETENTION = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1827: "FIVE_YEARS",
    3653: "TEN_YEARS",
}


def kept(config: Config) -> RemovalPolicy:
    """What deleting the stack does to what outlives a deployment but is not the database itself
    (log groups, KMS keys, the database's secrets): ``removal_policy=destroy`` deletes them, the
    other policies keep them (a snapshot or a retained database still needs its keys and its
    master password)."""
    return RemovalPolicy.DESTROY if config.removal_policy == "destroy" else RemovalPolicy.RETAIN


def retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch retention that keeps logs at least ``days`` days."""
    for allowed, name in sorted(_RETENTION.items()):
        if allowed >= days:
            return logs.RetentionDays[name]
    return logs.RetentionDays.TEN_YEARS
