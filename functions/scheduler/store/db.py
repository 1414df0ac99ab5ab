"""Connections to Postgres: a pool per process, configured for RDS Proxy when it is in the path.

In the cloud the credentials come from a Secrets Manager secret that rotates: the pool's
connection string is a ``Credentials`` source, re-read once when a login fails (a rotated
password), so a warm container follows a rotation without a restart.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from scheduler.settings import Settings

logger = logging.getLogger(__name__)

# The RDS certificate authorities (https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem),
# for connections straight to the instance (the migrate function), when the file is shipped.
RDS_CA_BUNDLE = Path(__file__).resolve().parent.parent / "certs" / "rds-global-bundle.pem"
# SQLSTATEs of a refused login: invalid_password, invalid_authorization_specification.
_LOGIN_FAILED = {"28P01", "28000"}


class Credentials:
    """The connection string of a pool, from ``source`` (which reads the secret), cached; re-read
    by ``refresh`` after a failed login. Thread-safe: the pool connects from its workers."""

    def __init__(self, source: Callable[[], str]):
        self._source = source
        self._lock = threading.Lock()
        self._current: str | None = None

    def __call__(self) -> str:
        with self._lock:
            if self._current is None:
                self._current = self._source()
            return self._current

    def refresh(self, stale: str) -> str:
        """The connection string after ``stale`` was refused: re-read once per stale value (many
        connections failing together cause one read)."""
        with self._lock:
            if self._current is None or self._current == stale:
                self._current = self._source()
            return self._current


def is_login_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is Postgres refusing the credentials (not an unreachable server)."""
    if getattr(exc, "sqlstate", None) in _LOGIN_FAILED:
        return True
    text = str(exc).lower()
    return "password authentication failed" in text or "authentication failed for user" in text


def reauthenticating(credentials: Credentials) -> type[psycopg.Connection]:
    """A connection class for a pool on ``credentials``: a refused login is retried once, with the
    credentials read again (a rotated password); any other failure, or a second refusal, raises."""

    class Connection(psycopg.Connection):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            # The pool's own conninfo is empty: the credentials are the source of truth.
            current = credentials()
            try:
                return super().connect(current, **kwargs)
            except psycopg.OperationalError as exc:
                if not is_login_failure(exc):
                    raise
                fresh = credentials.refresh(current)
                logger.warning("database login refused; credentials read again, retrying once")
                return super().connect(fresh, **kwargs)

    return Connection


def utc_session(conn: psycopg.Connection) -> None:
    """Set a new connection's session to UTC (``TimeZone``). Every statement names UTC where a
    day matters, so nothing it answers changes, but psycopg then reads instants as datetimes in
    ``datetime.UTC`` rather than in a ``ZoneInfo`` of the server's zone (Debian's default is
    ``Etc/UTC``): every comparison and subtraction of two of them asks each zone its offset, and
    the runner's claim and completion of a job do dozens (13% of a local runner's instructions a
    job, measured). A server in another zone answers instants in UTC too."""
    conn.execute("SET TIME ZONE 'UTC'")


# How long a call waits for a connection before it fails (``StoreUnavailable``: the API's 503):
# the database is down, unreachable, or every connection is busy. Shorter than the API
# function's timeout (20 s), so a caller hears an answer.
POOL_WAIT_SECONDS = 10.0
# How long the pool keeps trying one lost connection (backing off 1, 2, 4, 8 s...) before it
# gives it up; the next call that finds none starts again from a 1 s backoff. Without it the
# backoff grew to minutes during a long outage, and the pool came back that long after Postgres.
RECONNECT_SECONDS = 30.0
# The link's own limits (libpq's, unless the URL sets them): a connection attempt that gets no
# answer, an idle link whose peer went away (keepalives), and sent data left unacknowledged
# (a network that drops everything) end in seconds rather than hang a runner for minutes. A live
# server answers the keepalives however long its statement runs.
LINK_DEFAULTS: dict[str, Any] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


class MostRecentFirstPool(ConnectionPool):
    """A pool that hands out the connection returned last (psycopg_pool's hands out the one
    returned first, so every call goes round all the connections it ever opened).

    Each connection prepares a statement only at its fifth use there, and Postgres plans it afresh
    at each of its first five executions, so a pool taken in turn keeps a busy process's
    statements unprepared: a runner's few threads (claims, records) went round 8 to 24
    connections, and planning took a fifth of Postgres' CPU a delivery. Taken most recent first,
    the same few connections serve the hot statements, and those left idle are the ones the pool
    closes when it shrinks (its oldest)."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        if len(self._pool) > 1:
            self._pool.rotate(1)  # the last returned to the front, where the base class takes it
        return super()._get_ready_connection(timeout)


def make_pool(
    conninfo: str | Credentials | Callable[[], str],
    *,
    min_size: int = 1,
    max_size: int = 4,
    through_proxy: bool = False,
    open_wait: bool = True,
    wait_seconds: float = POOL_WAIT_SECONDS,
) -> ConnectionPool:
    """A connection pool returning dict rows, in autocommit: a single statement costs one round
    trip, and the store opens a transaction (``conn.transaction()``) where it needs several.

    ``conninfo`` is a string, or a source of one (``Credentials``, or a callable that reads the
    secret): a source is read again, and the login retried once, when Postgres refuses a login.

    Through RDS Proxy, server-side prepared statements would pin the proxied connection to one
    client, so psycopg's automatic preparation is turned off there. Elsewhere each connection's
    session is set to UTC (``utc_session``); through the proxy a SET would pin it too, and RDS
    runs in UTC unless told otherwise.

    A call waits at most ``wait_seconds`` for a connection; the link's limits (``LINK_DEFAULTS``)
    apply unless the URL sets its own.
    """
    kwargs: dict[str, Any] = {"row_factory": dict_row, "autocommit": True}
    if isinstance(conninfo, str):  # what the URL sets itself is kept
        kwargs.update({k: v for k, v in LINK_DEFAULTS.items() if k not in conninfo_to_dict(conninfo)})
    else:
        kwargs.update(LINK_DEFAULTS)
    extra: dict[str, Any] = {"timeout": wait_seconds, "reconnect_timeout": RECONNECT_SECONDS}
    if through_proxy:
        kwargs["prepare_threshold"] = None
    else:
        extra["configure"] = utc_session
    if callable(conninfo):
        credentials = conninfo if isinstance(conninfo, Credentials) else Credentials(conninfo)
        extra["connection_class"] = reauthenticating(credentials)
        conninfo = ""
    pool = MostRecentFirstPool(
        conninfo, min_size=min_size, max_size=max_size, kwargs=kwargs, open=False, name="scheduler", **extra
    )
    pool.open(wait=open_wait, timeout=30)
    return pool


def conninfo_source(
    settings: Settings, *, direct: bool = False, secrets_client: Any = None, secret_arn: str | None = None
) -> str | Credentials:
    """What a pool connects with: the URL of ``SCHEDULER_DATABASE_URL`` (or ``DATABASE_URL``) as
    it is, else ``Credentials`` that read the secret (again after a refused login)."""
    if settings.database_url:
        return settings.database_url
    return Credentials(
        lambda: conninfo_from_settings(settings, direct=direct, secrets_client=secrets_client, secret_arn=secret_arn)
    )


def conninfo_from_settings(
    settings: Settings, *, direct: bool = False, secrets_client: Any = None, secret_arn: str | None = None
) -> str:
    """The connection string of this process, read now.

    ``SCHEDULER_DATABASE_URL`` (or ``DATABASE_URL``) wins; in the cloud the credentials come from
    the Secrets Manager secret (``secret_arn``, else the settings') and the host is the RDS Proxy
    endpoint, or the instance itself when ``direct`` (the migrate function: advisory locks must
    not go through the proxy). TLS verifies the server's certificate and name (``verify-full``).
    """
    if settings.database_url:
        return settings.database_url
    arn = secret_arn or settings.database_secret_arn
    if not arn:
        raise RuntimeError("no database configured: set SCHEDULER_DATABASE_URL or SCHEDULER_DATABASE_SECRET_ARN")
    secret = read_secret(arn, secrets_client)
    host = secret["host"] if direct or not settings.database_host else settings.database_host
    from psycopg.conninfo import make_conninfo

    return make_conninfo(
        host=host,
        port=secret.get("port", 5432),
        user=secret["username"],
        password=secret["password"],
        dbname=settings.database_name or secret.get("dbname", "postgres"),
        connect_timeout=10,
        **tls_options(settings, direct=direct),
    )


def read_secret(arn: str, secrets_client: Any = None) -> dict[str, Any]:
    """A JSON secret of Secrets Manager, read now (no cache: a rotation must be seen)."""
    if secrets_client is None:
        import boto3

        secrets_client = boto3.client("secretsmanager")
    return json.loads(secrets_client.get_secret_value(SecretId=arn)["SecretString"])


def tls_options(settings: Settings, *, direct: bool) -> dict[str, str]:
    """``sslmode`` and ``sslrootcert`` of a cloud connection.

    RDS Proxy presents an ACM certificate, which chains to the Amazon Trust Services roots that
    certifi ships: ``verify-full`` against certifi's bundle. The instance itself presents an RDS
    CA certificate: ``verify-full`` against the RDS bundle when it is shipped (or named by
    ``SCHEDULER_DATABASE_CA_BUNDLE``), else ``require`` (encrypted, server not authenticated).
    """
    if settings.database_ca_bundle:
        return {"sslmode": "verify-full", "sslrootcert": settings.database_ca_bundle}
    if direct:
        if RDS_CA_BUNDLE.is_file():
            return {"sslmode": "verify-full", "sslrootcert": str(RDS_CA_BUNDLE)}
        return {"sslmode": "require"}
    import certifi  # shipped with requests

    return {"sslmode": "verify-full", "sslrootcert": certifi.where()}
