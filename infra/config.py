"""Deployment options, read from CDK context (``cdk.json`` or ``-c key=value``).

Values given with ``-c`` arrive as strings, values in ``cdk.json`` as JSON: both are accepted.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from constructs import Node

from infra.shared import C, layer_build

BROKERS = ("amazonmq", "none")
# Amazon MQ's deployment of that broker: one node, or a cluster of three across AZs.
BROKER_DEPLOYMENTS = ("single", "cluster")
# Amazon MQ for RabbitMQ's instance types (RabbitMQ 3.13 runs on all three families), as its
# developer guide lists them; the two small ones, for evaluation, run a single node only.
RABBITMQ_INSTANCE_TYPES = (
    "mq.t3.micro",
    "mq.m5.large",
    "mq.m5.xlarge",
    "mq.m5.2xlarge",
    "mq.m5.4xlarge",
    "mq.m7g.medium",
    "mq.m7g.large",
    "mq.m7g.xlarge",
    "mq.m7g.2xlarge",
    "mq.m7g.4xlarge",
    "mq.m7g.8xlarge",
    "mq.m7g.12xlarge",
    "mq.m7g.16xlarge",
)
SINGLE_NODE_ONLY = ("mq.t3.micro", "mq.m7g.medium")
BROKER_INSTANCE_TYPES = {"single": "mq.t3.micro", "cluster": "mq.m7g.large"}
PRECISIONS = ("second", "minute")
REMOVAL_POLICIES = ("snapshot", "retain", "destroy")
ARCHITECTURES = tuple(sorted(layer_build.MACHINES))
# The Python runtimes of Lambda the functions and the layer may be built for.
PYTHON_VERSIONS = ("3.12", "3.13", "3.14")
# Beyond this many fan-outs the database, not the fan-outs, is the limit (docs/capacity.md).
MAX_FANOUT_MAX = 16
# The database's shape: one RDS instance (db_instance_type), or an Aurora Serverless v2 cluster.
DATABASES = ("instance", "aurora-serverless")
# Aurora Serverless v2 capacity, in ACUs (about 2 GiB of memory each, with CPU in proportion).
ACU_RANGE = (0.5, 256.0)

# Every context key this app reads, with its default (documented in README.md, "Deploy to AWS").
DEFAULTS: dict[str, Any] = {
    "stack_name": "Scheduler",
    "broker": "amazonmq",
    # Who may use that broker (AMQP jobs without a url): "account", the principals of the
    # deployment's own account; "*", any caller of the API; or comma-separated owner patterns
    # (``*`` any text). It is one broker login for all of them: one trust domain.
    "broker_owners": "account",
    # "single": one RabbitMQ node; "cluster": three nodes across AZs behind one endpoint.
    "broker_deployment": "single",
    "broker_instance_type": "",  # mq.t3.micro for one node, mq.m7g.large for a cluster
    "precision": "second",
    "nat_gateways": 1,
    "endpoint_azs": 2,
    "alarm_email": "",
    "localstack": False,
    # LocalStack's gateway as the functions reach it: they run beside it (as host processes, or
    # in containers of its network with the endpoint it gives them).
    "localstack_endpoint": "http://127.0.0.1:4566",
    "architecture": "",  # arm64 on AWS; the host's architecture with localstack=true
    "python_version": layer_build.DEFAULT_PYTHON_VERSION,  # the Lambda runtime's Python
    "db_instance_type": "t4g.micro",
    "db_multi_az": False,
    "db_backup_days": 7,
    "deletion_protection": True,
    "removal_policy": "snapshot",
    "log_retention_days": 30,
    "execution_retention_days": 30,
    "api_rate_limit": 50,
    "api_burst_limit": 100,
    # The API's TLS security policy (what versions and ciphers its endpoint accepts): TLS_1_2 (TLS
    # 1.2 and 1.3; a regional API without one accepts TLS 1.0 too), TLS_1_0, or one of API Gateway's
    # enhanced policies (SecurityPolicy_..., with the endpoint access mode STRICT).
    "api_security_policy": "TLS_1_2",
    "target_allow_list": "",
    # Reserved concurrency of the executor: at most this many deliveries at once (the fan-out
    # dispatches no more), so a burst cannot take the account's concurrency or the proxy's connections.
    "executor_concurrency": 50,
    "target_role_arns": "",  # roles the executor may assume for AWS targets (ARNs or /paths/); "" = any
    # The tag a role must carry, with the value "true", for the executor to assume it ("none": no
    # tag asked). Without it, any role that trusts the executor's account as a whole (its root)
    # could be named by any tenant: the ExternalId guards only the roles that ask for one.
    "target_role_tag": "scheduler-target",
    # The most fan-outs claiming at once: the tick's fan-out and the helpers it starts when the
    # due backlog is more than one dispatches in a few seconds (1: no helpers).
    "fanout_max": 4,
    # The most claims one executor invoke carries under a backlog (1 to 50; 1: one job per
    # invocation). While few jobs are due at once each still has its own invocation.
    "claims_per_invoke": C.DEFAULT_CLAIMS_PER_INVOKE,
    # The database (docs/capacity.md compares them): "instance" (RDS, db_instance_type) or
    # "aurora-serverless" (Aurora PostgreSQL Serverless v2, db_min_acu to db_max_acu), behind RDS Proxy.
    "database": "instance",
    "db_min_acu": 0.5,
    "db_max_acu": 16,
    "db_reader": False,  # aurora-serverless: a reader in another AZ to fail over to (db_multi_az=true implies it)
    "db_io_optimized": False,  # aurora-serverless: Aurora I/O-Optimized storage instead of Standard
    # The X-Ray SDK in the handlers (a subsegment per invocation and per AWS/HTTP call): about 140 ms
    # more per cold start. Without it Lambda's active tracing still records each invocation.
    "xray_sdk": False,
    # The console's base URL (where `scheduler console` serves it for the team), for the link in
    # alerts ({{console_url}}); "" = alerts carry none.
    "console_url": "",
}


@dataclass(frozen=True)
class Config:
    """The options of one deployment."""

    stack_name: str
    broker: str
    precision: str
    nat_gateways: int
    endpoint_azs: int
    alarm_email: str
    localstack: bool
    localstack_endpoint: str
    architecture: str
    python_version: str
    db_instance_type: str
    db_multi_az: bool
    db_backup_days: int
    deletion_protection: bool
    removal_policy: str
    log_retention_days: int
    execution_retention_days: int
    api_rate_limit: int
    api_burst_limit: int
    target_allow_list: str
    executor_concurrency: int = DEFAULTS["executor_concurrency"]
    target_role_arns: tuple[str, ...] = ()
    target_role_tag: str = DEFAULTS["target_role_tag"]
    broker_owners: tuple[str, ...] = ("account",)
    broker_deployment: str = DEFAULTS["broker_deployment"]
    broker_instance_type: str = BROKER_INSTANCE_TYPES["single"]
    fanout_max: int = DEFAULTS["fanout_max"]
    claims_per_invoke: int = DEFAULTS["claims_per_invoke"]
    database: str = DEFAULTS["database"]
    db_min_acu: float = DEFAULTS["db_min_acu"]
    db_max_acu: float = DEFAULTS["db_max_acu"]
    db_reader: bool = DEFAULTS["db_reader"]
    db_io_optimized: bool = DEFAULTS["db_io_optimized"]
    xray_sdk: bool = DEFAULTS["xray_sdk"]
    console_url: str = DEFAULTS["console_url"]
    api_security_policy: str = DEFAULTS["api_security_policy"]

    def broker_owner_patterns(self, account: str) -> str:
        """``SCHEDULER_DEFAULT_BROKER_OWNERS``: the patterns, "account" made the principals of
        ``account`` (a token at synth time); "" for anyone."""
        return ",".join(f"arn:*:*::{account}:*" if p == "account" else p for p in self.broker_owners)

    @property
    def aurora(self) -> bool:
        """Whether the database is an Aurora Serverless v2 cluster (else one RDS instance)."""
        return self.database == "aurora-serverless"

    @property
    def service_name(self) -> str:
        """Powertools' service name (the ``service`` dimension of every metric), scoped to the stack."""
        return f"{C.SERVICE_NAME}-{self.stack_name}"

    @property
    def metrics_namespace(self) -> str:
        """The CloudWatch namespace of the scheduler's own metrics, scoped to the stack."""
        return f"{C.METRICS_NAMESPACE}/{self.stack_name}"

    @property
    def aws_targets(self) -> bool:
        """Whether the executor can reach AWS's APIs for AWS targets (STS, then Lambda, SQS, SNS or
        EventBridge): through a NAT gateway, or LocalStack's endpoint. With ``nat_gateways=0`` it
        cannot (the VPC has interface endpoints for none of them), and the API refuses those targets."""
        return self.localstack or self.nat_gateways > 0

    @property
    def with_broker(self) -> bool:
        """Whether this deployment runs its own Amazon MQ broker."""
        return self.broker == "amazonmq" and not self.localstack

    @classmethod
    def from_context(cls, node: Node) -> Config:
        """Read and check every option from the construct tree's context."""

        def get(key: str) -> Any:
            value = node.try_get_context(key)
            return DEFAULTS[key] if value is None else value

        localstack = _bool(get("localstack"), "localstack")
        broker_deployment = _choice(get("broker_deployment"), BROKER_DEPLOYMENTS, "broker_deployment")
        broker = _choice(get("broker"), BROKERS, "broker")
        _sized_broker(get, broker, localstack)
        architecture = str(get("architecture")).strip() or (_host_architecture() if localstack else "arm64")
        config = cls(
            stack_name=str(get("stack_name")),
            broker=broker,
            precision=_choice(get("precision"), PRECISIONS, "precision"),
            nat_gateways=_int(get("nat_gateways"), "nat_gateways", minimum=0, maximum=2),
            endpoint_azs=_int(get("endpoint_azs"), "endpoint_azs", minimum=1, maximum=2),
            alarm_email=str(get("alarm_email")).strip(),
            localstack=localstack,
            localstack_endpoint=str(get("localstack_endpoint")),
            architecture=_choice(architecture, ARCHITECTURES, "architecture"),
            python_version=_choice(get("python_version"), PYTHON_VERSIONS, "python_version"),
            db_instance_type=str(get("db_instance_type")),
            db_multi_az=_bool(get("db_multi_az"), "db_multi_az"),
            db_backup_days=_int(get("db_backup_days"), "db_backup_days", minimum=1, maximum=35),
            deletion_protection=_bool(get("deletion_protection"), "deletion_protection"),
            removal_policy=_choice(get("removal_policy"), REMOVAL_POLICIES, "removal_policy"),
            log_retention_days=_int(get("log_retention_days"), "log_retention_days", minimum=1),
            execution_retention_days=_int(get("execution_retention_days"), "execution_retention_days", minimum=1),
            api_rate_limit=_int(get("api_rate_limit"), "api_rate_limit", minimum=1),
            api_burst_limit=_int(get("api_burst_limit"), "api_burst_limit", minimum=1),
            target_allow_list=str(get("target_allow_list")).strip(),
            executor_concurrency=_int(get("executor_concurrency"), "executor_concurrency", minimum=1, maximum=1000),
            target_role_arns=_role_arns(get("target_role_arns")),
            target_role_tag=_role_tag(get("target_role_tag")),
            broker_owners=_owner_patterns(get("broker_owners")),
            broker_deployment=broker_deployment,
            broker_instance_type=_broker_instance_type(get("broker_instance_type"), broker_deployment),
            fanout_max=_int(get("fanout_max"), "fanout_max", minimum=1, maximum=MAX_FANOUT_MAX),
            claims_per_invoke=_int(
                get("claims_per_invoke"), "claims_per_invoke", minimum=1, maximum=C.MAX_CLAIMS_PER_INVOKE
            ),
            database=_choice(get("database"), DATABASES, "database"),
            db_min_acu=_acu(get("db_min_acu"), "db_min_acu"),
            db_max_acu=_acu(get("db_max_acu"), "db_max_acu"),
            db_reader=_bool(get("db_reader"), "db_reader"),
            db_io_optimized=_bool(get("db_io_optimized"), "db_io_optimized"),
            xray_sdk=_bool(get("xray_sdk"), "xray_sdk"),
            console_url=_console_url(get("console_url")),
            api_security_policy=_security_policy(get("api_security_policy")),
        )
        if config.db_min_acu > config.db_max_acu:
            raise ValueError(
                f"context 'db_min_acu' ({config.db_min_acu:g}) must not exceed 'db_max_acu' ({config.db_max_acu:g})"
            )
        return config


def _host_architecture() -> str:
    return "arm64" if platform.machine().lower() in {"arm64", "aarch64"} else "x86_64"


def _console_url(value: Any) -> str:
    """The console's base URL: "" (none), or an http(s) URL."""
    text = str(value or "").strip()
    if text and not text.startswith(("https://", "http://")):
        raise ValueError(f"context 'console_url' must be an http(s) URL, not {text!r}")
    return text


# API Gateway's legacy policies, and the names of its enhanced ones (which it checks itself).
LEGACY_SECURITY_POLICIES = ("TLS_1_0", "TLS_1_2")
_ENHANCED_SECURITY_POLICY = re.compile(r"SecurityPolicy_[A-Za-z0-9_]+")


def _security_policy(value: Any) -> str:
    """``api_security_policy``: TLS_1_0, TLS_1_2 or an enhanced policy's name (SecurityPolicy_...)."""
    text = str(value or "").strip()
    if text.upper() in LEGACY_SECURITY_POLICIES:
        return text.upper()
    if not _ENHANCED_SECURITY_POLICY.fullmatch(text):
        raise ValueError(
            f"context 'api_security_policy' must be TLS_1_2, TLS_1_0 or an enhanced policy of API Gateway "
            f"(SecurityPolicy_TLS13_1_2_PFS_PQ_2025_09, say), not {value!r}"
        )
    return text


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"context {key!r} must be true or false, not {value!r}")


def _int(value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"context {key!r} must be an integer, not {value!r}") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(f"context {key!r} must be between {minimum} and {maximum}, not {number}")
    return number


def _broker_instance_type(value: Any, deployment: str) -> str:
    """Amazon MQ's instance type of the broker (one of ``RABBITMQ_INSTANCE_TYPES``), by default
    the deployment's; a cluster refuses the small ones, which Amazon MQ runs as one node only.
    Checked here, since a type Amazon MQ does not have synthesizes and fails only at deploy time."""
    text = str(value or "").strip().lower() or BROKER_INSTANCE_TYPES[deployment]
    if text not in RABBITMQ_INSTANCE_TYPES:
        raise ValueError(
            f"context 'broker_instance_type' must be an Amazon MQ for RabbitMQ instance type "
            f"({', '.join(RABBITMQ_INSTANCE_TYPES)}), not {value!r}"
        )
    if deployment == "cluster" and text in SINGLE_NODE_ONLY:
        raise ValueError(
            f"context 'broker_instance_type' {text!r} cannot run a cluster (broker_deployment=cluster): "
            "use mq.m5.large, mq.m7g.large or a larger type"
        )
    return text


def _sized_broker(get: Callable[[str], Any], broker: str, localstack: bool) -> None:
    """``broker_deployment`` and ``broker_instance_type`` shape the stack's Amazon MQ broker: given
    where the stack has none (``broker=none``, or on LocalStack, which runs no Amazon MQ), they are
    refused rather than ignored."""
    if broker == "amazonmq" and not localstack:
        return
    why = "broker=none" if broker != "amazonmq" else "localstack=true (no Amazon MQ there)"
    if str(get("broker_instance_type") or "").strip():
        raise ValueError(f"context 'broker_instance_type' sizes the stack's broker, and with {why} it has none")
    if str(get("broker_deployment")).strip().lower() != DEFAULTS["broker_deployment"]:
        raise ValueError(f"context 'broker_deployment' shapes the stack's broker, and with {why} it has none")


def _choice(value: Any, choices: tuple[str, ...], key: str) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise ValueError(f"context {key!r} must be one of {', '.join(choices)}, not {value!r}")
    return text


def _role_arns(value: Any) -> tuple[str, ...]:
    """Role ARNs (``*`` allowed) or IAM paths (``/scheduler/``), comma-separated or a JSON list."""
    items = value if isinstance(value, list) else str(value).split(",")
    found = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        if (
            item.startswith("/")
            and item.endswith("/")
            or (item.startswith("arn:") and ":iam::" in item and ":role/" in item)
        ):
            found.append(item)
        else:
            raise ValueError(f"context 'target_role_arns': {item!r} is neither a role ARN nor a path like /scheduler/")
    return tuple(found)


def _owner_patterns(value: Any) -> tuple[str, ...]:
    """``broker_owners``: () for "*" (anyone), else "account" and owner patterns (ARNs of six
    ``:``-separated parts, ``*`` any text within a part), comma-separated."""
    items = [str(i).strip() for i in (value if isinstance(value, list) else str(value).split(",")) if str(i).strip()]
    if not items:
        raise ValueError("context 'broker_owners' must be account, * or owner patterns (ARNs, * for any text)")
    if items == ["*"]:
        return ()
    for item in items:
        if item != "account" and (not item.startswith("arn:") or len(item.split(":", 5)) != 6):
            raise ValueError(
                f"context 'broker_owners': {item!r} is not an owner pattern (arn:partition:service::account:resource, "
                "* for any text within a part), account, or * alone"
            )
    return tuple(items)


def _role_tag(value: Any) -> str:
    """An IAM tag key ("" for none: ``none`` or empty)."""
    text = str(value if value is not None else "").strip()
    if text.lower() in ("", "none"):
        return ""
    if len(text) > 128 or text.lower().startswith("aws:") or not re.fullmatch(r"[\w\s+=.:/@-]+", text):
        raise ValueError(f"context 'target_role_tag' must be an IAM tag key (or none), not {value!r}")
    return text


def _acu(value: Any, key: str) -> float:
    """Aurora capacity units: 0.5 to 256 in steps of 0.5."""
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"context {key!r} must be a number of ACUs, not {value!r}") from None
    low, high = ACU_RANGE
    if not low <= number <= high or (number * 2) != int(number * 2):
        raise ValueError(f"context {key!r} must be between {low:g} and {high:g} ACUs in steps of 0.5, not {value!r}")
    return number
