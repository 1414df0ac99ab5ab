"""The composition root: builds the dependencies of one process (a Lambda container, local mode)
from its settings, once, and hands them to the domain code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

from scheduler.core.domain import ExecutionStatus, Outcome
from scheduler.core.errors import SecretError
from scheduler.runner.telemetry import Metrics, NullMetrics, share_stdout_lock
from scheduler.secrets import SecretBox, decrypt_target_secrets, make_secret_box
from scheduler.settings import Settings
from scheduler.store.db import conninfo_source, make_pool
from scheduler.store.postgres import Store
from scheduler.targets.results import TargetPolicy

if TYPE_CHECKING:  # the runner's modules load with the function that needs them
    from psycopg_pool import ConnectionPool

    from scheduler.runner.alerts import Alerts
    from scheduler.runner.executor import Executor
    from scheduler.runner.fanout import FanoutReport
    from scheduler.runner.in_process import InProcessDispatch


@dataclass
class Dependencies:
    """Lazily built collaborators of one process. ``through_proxy``: the database is behind RDS
    Proxy (no server-side prepared statements). Building is not locked: a process with threads
    (local mode) touches what it needs before starting them."""

    settings: Settings
    through_proxy: bool = False
    metrics: Metrics = field(default_factory=NullMetrics)
    pool_max_size: int = 4

    @cached_property
    def pool(self) -> ConnectionPool:
        # A secret's credentials are read again when a login is refused (a rotated password).
        return make_pool(
            conninfo_source(self.settings), min_size=1, max_size=self.pool_max_size, through_proxy=self.through_proxy
        )

    @cached_property
    def store(self) -> Store:
        """The store of this process (every port of ``scheduler.ports``)."""
        return Store(self.pool)

    @cached_property
    def secret_box(self) -> SecretBox:
        """The secret box (KMS, or local mode's key file)."""
        return make_secret_box(self.settings)

    def decrypt_target(self, target: dict) -> dict:
        """The target with its secrets in clear, for the delivery only."""
        return decrypt_target_secrets(target, self.secret_box)

    @cached_property
    def target_policy(self) -> TargetPolicy:
        return TargetPolicy(
            allow_private=self.settings.allow_private_targets,
            allow_list=self.settings.target_allow_list,
            default_broker_url=default_broker_url(self.settings),
            default_broker_owners=self.settings.default_broker_owners,
        )

    @cached_property
    def lambda_client(self) -> Any:
        import boto3

        return event_invoke_client(boto3.client("lambda", config=lambda_client_config()))

    def executor(self, remaining_seconds: Callable[[], float] | None = None) -> Executor:
        """The executor of this process's claims (an executor invocation's, or local mode's)."""
        from scheduler.runner.executor import Executor

        return Executor(self.store, self.decrypt_target, self.target_policy, self.metrics, remaining_seconds)

    def alerts(self, console_url: str | None = None) -> Alerts:
        """The alert sweep and sender of this process: alerts delivered as a job's target is,
        their secrets opened for the delivery only."""
        from scheduler.runner.alerts import Alerts
        from scheduler.targets import router

        def send(target: Any, delivery: Any) -> Any:
            try:
                opened = self.decrypt_target(dict(target))
            except SecretError:  # another key's token: the alert fails for good, as a job's delivery does
                return Outcome(ExecutionStatus.FAILED, False, error="the alert target's secrets cannot be decrypted")
            # Rendered by the alerts in one pass (a value quoted in them is not rendered again).
            return router.deliver(opened, delivery, self.target_policy, rendered=True)

        return Alerts(
            self.store,
            send,
            console_url or self.settings.console_url,
            self.settings.execution_retention_days,
            metrics=self.metrics,
        )

    def start_alert_sweep(self) -> bool:
        """A deployment's fan-out, once a tick: invoke the executor function (asynchronously)
        with ``{"alerts": true}`` when there is alerting to do, so that the sweep and the alerts'
        delivery run where the target code is. True when it was invoked."""
        import json

        if not self.settings.executor_function or not self.store.alert_work():
            return False
        self.lambda_client.invoke(
            FunctionName=self.settings.executor_function,
            InvocationType="Event",
            Payload=json.dumps({"alerts": True}).encode(),
        )
        return True

    def in_process_dispatch(self) -> InProcessDispatch:
        """Local mode's dispatch: claims delivered by this process's threads, outcomes recorded
        in batches, each batch's log lines written at once. The HTTP delivery is loaded now, not
        by the first burst's deliveries."""
        from scheduler.local.logs import lines_held
        from scheduler.runner.in_process import InProcessDispatch
        from scheduler.targets import router

        router.preload(("http",))
        return InProcessDispatch(self.executor(), record_logging=lines_held)

    def run_fanout_invocation(self, event: Any, remaining_seconds: float) -> tuple[FanoutReport, bool]:
        """One invocation of the fan-out function with this deployment's settings: the report,
        and whether it was a helper (``runner.fanout.run_lambda_invocation``)."""
        from scheduler.runner.fanout import run_lambda_invocation

        settings = self.settings
        return run_lambda_invocation(
            event,
            self.store,
            self.lambda_client,
            remaining_seconds=remaining_seconds,
            executor_function=settings.executor_function,
            fanout_function=settings.fanout_function,
            max_fanouts=settings.max_fanouts,
            precision=settings.precision,
            batch_size=settings.claim_batch_size,
            lease_seconds=settings.claim_lease_seconds,
            retention_days=settings.execution_retention_days,
            metrics=self.metrics,
            pauses=self.store,
            # The executor's reserved concurrency bounds the dispatch; the live leases are what
            # is taken. Under a backlog an invoke carries a group of claims.
            dispatch_options={
                "max_in_flight": settings.executor_concurrency,
                "in_flight": self.store.live_leases,
                "claims_per_invoke": settings.claims_per_invoke,
                # No owner's jobs hold more than their share of those leases.
                "owners_over_share": self.store.owners_over_lease_share,
                "defer": self.store.defer_claims,
            },
        )


def event_invoke_client(client: Any) -> Any:
    """The fan-out's Lambda client: ``client`` (boto3) with its asynchronous invokes signed and
    sent by ``scheduler.transport.lambda_invoke`` (a fraction of botocore's CPU per invoke), through a pool
    of a connection per invoking thread. ``client`` itself when it has no credentials (its invoke
    then fails as boto3's does) or when a proxy from the environment applies to its endpoint
    (botocore's proxy support is kept rather than redone)."""
    import os
    from urllib.request import getproxies, proxy_bypass

    from scheduler.runner.dispatch import INVOKE_THREADS
    from scheduler.transport.lambda_invoke import EventInvokeClient

    # botocore keeps the client's credentials (refreshable ones renew themselves) on its signer.
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    endpoint = urlsplit(client.meta.endpoint_url)
    if credentials is None or (endpoint.scheme in getproxies() and not proxy_bypass(endpoint.hostname or "")):
        return client
    ca_bundle = os.environ.get("AWS_CA_BUNDLE") or None  # as botocore reads it
    return EventInvokeClient(client, credentials, pool_size=INVOKE_THREADS, ca_certs=ca_bundle)


def lambda_client_config(threads: int | None = None) -> Any:
    """botocore's configuration of the fan-out's Lambda client: a connection per invoking thread
    (``dispatch.INVOKE_THREADS``; botocore's default pool holds 10), and no client-side validation
    of the parameters the dispatch builds itself (a per-invoke cost of its own)."""
    from botocore.config import Config

    from scheduler.runner.dispatch import INVOKE_THREADS

    return Config(max_pool_connections=threads or INVOKE_THREADS, parameter_validation=False)


def default_broker_url(settings: Settings, secrets_client: Any = None) -> str | None:
    """The deployment's broker: its URL, with the credentials of its secret when one is named."""
    url = settings.default_broker_url
    if not url or not settings.default_broker_secret_arn:
        return url
    if secrets_client is None:
        import boto3

        secrets_client = boto3.client("secretsmanager")
    import json

    secret = json.loads(secrets_client.get_secret_value(SecretId=settings.default_broker_secret_arn)["SecretString"])
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{quote(secret['username'], safe='')}:{quote(secret['password'], safe='')}@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def route_domain_logs_to(powertools_logger: Any) -> None:
    """Give the domain package's stdlib loggers the Powertools JSON formatter (Lambda only), so
    their lines carry the same keys (job and execution ids, request id); and the handler the lock
    of the EMF documents (``telemetry.share_stdout_lock``), so that a log line and a metric
    written by two threads at once never fuse."""
    import logging

    from aws_lambda_powertools.logging import utils

    names = {name for name in logging.root.manager.loggerDict if name.startswith("scheduler")}
    utils.copy_config_to_registered_loggers(source_logger=powertools_logger, include=names)
    for handler in powertools_logger.handlers:
        share_stdout_lock(handler)
