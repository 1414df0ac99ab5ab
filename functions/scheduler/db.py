"""Connections to Postgres: a pool per process, configured for RDS Proxy when it is in the path."""

from __future__ import annotations

import json
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from scheduler.settings import Settings


def make_pool(conninfo: str, *, min_size: int = 1, max_size: int = 4, through_proxy: bool = False,
              open_wait: bool = True) -> ConnectionPool:
    """A connection pool returning dict rows, in autocommit: a single statement costs one round
    trip, and the store opens a transaction (``conn.transaction()``) where it needs several.

    Through RDS Proxy, server-side prepared statements would pin the proxied connection to one
    client, so psycopg's automatic preparation is turned off there.
    """
    kwargs: dict[str, Any] = {"row_factory": dict_row, "autocommit": True}
    if through_proxy:
        kwargs["prepare_threshold"] = None
    pool = ConnectionPool(conninfo, min_size=min_size, max_size=max_size, kwargs=kwargs, open=False,
                          name="scheduler")
    pool.open(wait=open_wait, timeout=30)
    return pool


def conninfo_from_settings(settings: Settings, *, direct: bool = False, secrets_client: Any = None) -> str:
    """The connection string of this process.

    ``SCHEDULER_DATABASE_URL`` (or ``DATABASE_URL``) wins; in the cloud the credentials come from
    the Secrets Manager secret and the host is the RDS Proxy endpoint, or the instance itself when
    ``direct`` (the migrate function: advisory locks must not go through the proxy).
    """
    if settings.database_url:
        return settings.database_url
    if not settings.database_secret_arn:
        raise RuntimeError("no database configured: set SCHEDULER_DATABASE_URL or SCHEDULER_DATABASE_SECRET_ARN")
    if secrets_client is None:
        import boto3
        secrets_client = boto3.client("secretsmanager")
    secret = json.loads(secrets_client.get_secret_value(SecretId=settings.database_secret_arn)["SecretString"])
    host = secret["host"] if direct or not settings.database_host else settings.database_host
    from psycopg.conninfo import make_conninfo
    return make_conninfo(host=host, port=secret.get("port", 5432), user=secret["username"],
                         password=secret["password"], dbname=settings.database_name or secret.get("dbname", "postgres"),
                         sslmode="require", connect_timeout=10)
