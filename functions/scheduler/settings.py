"""One typed settings object per process, read once from the environment."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from scheduler.core import constants as c


def _owner_patterns(text: str) -> tuple[str, ...]:
    """``SCHEDULER_DEFAULT_BROKER_OWNERS``: comma-separated ARN patterns (six ``:``-separated
    parts, ``*`` any text within a part); none, or ``*`` alone: anyone."""
    patterns = tuple(x.strip() for x in text.split(",") if x.strip())
    if patterns == ("*",):
        return ()
    for pattern in patterns:
        if len(pattern.split(":", 5)) != 6:
            raise ValueError(f"{c.ENV_DEFAULT_BROKER_OWNERS}: {pattern!r} is not an ARN pattern (arn:*:*::account:*)")
    return patterns


def _bool(value: str | None, default: bool = False) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    """Configuration of one process (a Lambda container, local mode, a test)."""

    database_url: str | None = None
    database_secret_arn: str | None = None
    database_host: str | None = None
    database_name: str | None = None
    executor_function: str | None = None
    precision: str = "second"  # "second" or "minute"
    default_broker_url: str | None = None
    default_broker_secret_arn: str | None = None
    # The owners whose AMQP jobs may use the default broker (patterns, ``*`` any text; none: any owner).
    default_broker_owners: tuple[str, ...] = field(default_factory=tuple)
    kms_key_id: str | None = None
    # A KMS HMAC key the API signs each secret's digest with, so a secret sent again is compared.
    kms_mac_key_id: str | None = None
    local_key_file: str | None = None
    allow_private_targets: bool = False
    target_allow_list: tuple[str, ...] = field(default_factory=tuple)
    execution_retention_days: int = 30
    cursor_secret: str | None = None
    # Where secrets are fetched at cold start (never held in the environment).
    cursor_secret_arn: str | None = None
    database_app_secret_arn: str | None = None  # the migrate function sets up this login
    # Access keys the api function verifies signatures against itself (the LocalStack variant):
    # a credentials document (``scheduler.transport.sigv4.parse_credentials``), fetched from its ARN.
    api_credentials: str | None = None
    api_credentials_secret_arn: str | None = None
    database_ca_bundle: str | None = None
    executor_concurrency: int | None = None  # the executor's reserved concurrency (fan-out bound)
    # Whether the executor reaches AWS's APIs: False refuses AWS and SigV4 targets at write time.
    aws_targets: bool = True
    service_name: str = c.SERVICE_NAME
    metrics_namespace: str = c.METRICS_NAMESPACE
    fanout_function: str | None = None  # the fan-out's own name: it invokes itself for helpers
    max_fanouts: int = 1  # fan-outs claiming at once (a primary and its helpers)
    # The most claims one executor invoke carries (the fan-out groups claims under a backlog).
    claims_per_invoke: int = c.DEFAULT_CLAIMS_PER_INVOKE
    # Runner tuning (not read from the environment; set by local mode and tests).
    claim_batch_size: int = 100
    claim_lease_seconds: int = 120
    console_url: str | None = None  # the console's base URL, for the links in alerts

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Read the settings from environment variables (keys in ``scheduler.core.constants``)."""
        env = os.environ if environ is None else environ
        allow = tuple(x.strip() for x in env.get(c.ENV_TARGET_ALLOW_LIST, "").split(",") if x.strip())
        precision = env.get(c.ENV_PRECISION, "second").strip().lower() or "second"
        if precision not in {"second", "minute"}:
            raise ValueError(f"{c.ENV_PRECISION} must be 'second' or 'minute', not {precision!r}")
        return cls(
            database_url=env.get(c.ENV_DATABASE_URL) or env.get("DATABASE_URL"),
            database_secret_arn=env.get(c.ENV_DATABASE_SECRET_ARN),
            database_host=env.get(c.ENV_DATABASE_HOST),
            database_name=env.get(c.ENV_DATABASE_NAME),
            executor_function=env.get(c.ENV_EXECUTOR_FUNCTION),
            precision=precision,
            default_broker_url=env.get(c.ENV_DEFAULT_BROKER_URL),
            default_broker_secret_arn=env.get(c.ENV_DEFAULT_BROKER_SECRET_ARN),
            default_broker_owners=_owner_patterns(env.get(c.ENV_DEFAULT_BROKER_OWNERS, "")),
            kms_key_id=env.get(c.ENV_KMS_KEY_ID),
            kms_mac_key_id=env.get(c.ENV_KMS_MAC_KEY_ID),
            local_key_file=env.get(c.ENV_LOCAL_KEY_FILE),
            allow_private_targets=_bool(env.get(c.ENV_ALLOW_PRIVATE_TARGETS)),
            target_allow_list=allow,
            execution_retention_days=_positive(
                env.get(c.ENV_EXECUTION_RETENTION_DAYS), c.ENV_EXECUTION_RETENTION_DAYS, default=30
            ),
            cursor_secret=env.get(c.ENV_CURSOR_SECRET),
            cursor_secret_arn=env.get(c.ENV_CURSOR_SECRET_ARN),
            database_app_secret_arn=env.get(c.ENV_DATABASE_APP_SECRET_ARN),
            api_credentials_secret_arn=env.get(c.ENV_API_CREDENTIALS_SECRET_ARN) or None,
            database_ca_bundle=env.get(c.ENV_DATABASE_CA_BUNDLE),
            executor_concurrency=int(env[c.ENV_EXECUTOR_CONCURRENCY]) if env.get(c.ENV_EXECUTOR_CONCURRENCY) else None,
            aws_targets=_bool(env.get(c.ENV_AWS_TARGETS), default=True),
            service_name=env.get(c.ENV_SERVICE_NAME) or c.SERVICE_NAME,
            metrics_namespace=env.get(c.ENV_METRICS_NAMESPACE) or c.METRICS_NAMESPACE,
            fanout_function=env.get(c.ENV_FANOUT_FUNCTION) or None,
            console_url=env.get(c.ENV_CONSOLE_URL) or None,
            max_fanouts=_positive(env.get(c.ENV_MAX_FANOUTS), c.ENV_MAX_FANOUTS, default=1),
            claims_per_invoke=_positive(
                env.get(c.ENV_CLAIMS_PER_INVOKE),
                c.ENV_CLAIMS_PER_INVOKE,
                default=c.DEFAULT_CLAIMS_PER_INVOKE,
                maximum=c.MAX_CLAIMS_PER_INVOKE,
            ),
        )


def _positive(value: str | None, key: str, *, default: int, maximum: int | None = None) -> int:
    if value is None or not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"{key} must be a whole number, not {value!r}") from None
    if number < 1:
        raise ValueError(f"{key} must be at least 1, not {number}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{key} must be at most {maximum}, not {number}")
    return number


def with_fetched_secrets(settings: Settings, get_secret: Callable[[str], str] | None = None) -> Settings:
    """The settings with the secrets named by ARN fetched (the cursor key, the API's access keys
    where the function verifies signatures itself): once per process, at cold start, through
    Powertools' parameters utility (cached), so no secret sits in a function's environment,
    where ``GetFunctionConfiguration`` would show it."""
    cursor_arn = settings.cursor_secret_arn if not settings.cursor_secret else None
    keys_arn = settings.api_credentials_secret_arn if not settings.api_credentials else None
    if not cursor_arn and not keys_arn:
        return settings
    fetch = get_secret or _powertools_secret
    return replace(
        settings,
        cursor_secret=fetch(cursor_arn) if cursor_arn else settings.cursor_secret,
        api_credentials=fetch(keys_arn) if keys_arn else settings.api_credentials,
    )


def _powertools_secret(arn: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    return str(parameters.get_secret(arn, max_age=SECRET_CACHE_SECONDS))


# Powertools' cache of a fetched secret (a warm container does not ask Secrets Manager again).
SECRET_CACHE_SECONDS = 3600


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this process, read once."""
    return Settings.from_env()
