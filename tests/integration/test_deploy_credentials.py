"""Credentials in production: a rotated password is followed by a running pool, the application
login has data access and no DDL, TLS verifies the server, secrets are fetched at cold start.

The rotation test needs password authentication, which the shared test server does not do
(trust): it starts a private Postgres (pgserver's binaries) whose pg_hba.conf asks one role for
its password.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from scheduler import service
from scheduler.core import constants as c
from scheduler.settings import Settings, with_fetched_secrets
from scheduler.store.db import (
    Credentials,
    conninfo_from_settings,
    is_login_failure,
    make_pool,
    reauthenticating,
    tls_options,
)
from scheduler.store.migrations import ensure_login, migrate, scram_verifier
from scheduler.store.postgres import Store
from tests.support import http_spec, temporary_database

ROTATED = "rotated"


@pytest.fixture(scope="module")
def password_server():
    """A private Postgres where the role ``rotated`` must give its password (SCRAM), on its socket."""
    pgserver = pytest.importorskip("pgserver")
    datadir = Path(tempfile.mkdtemp(prefix="sched-pw-"))
    server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        admin = server.get_uri()
        hba = datadir / "pg_hba.conf"
        hba.write_text(f"local all {ROTATED} scram-sha-256\nlocal all all trust\nhost all all 127.0.0.1/32 trust\n")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
        yield admin
    finally:
        server.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


def _set_password(admin: str, password: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(
                psycopg.sql.Identifier(ROTATED), psycopg.sql.Literal(password)
            )
        )


def test_a_rotated_password_is_read_again_and_the_next_call_succeeds(password_server):
    admin = password_server
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROTATED}")
        conn.execute(f"CREATE ROLE {ROTATED} LOGIN")
    _set_password(admin, "first-password")
    # The secret, as Secrets Manager would answer it; the source counts its reads.
    secret = {"password": "first-password"}
    reads = []

    def source() -> str:
        reads.append(secret["password"])
        return make_conninfo(admin, user=ROTATED, password=secret["password"])

    pool = make_pool(source, min_size=1, max_size=2)
    try:
        with pool.connection() as conn:
            assert conn.execute("SELECT current_user AS u").fetchone()["u"] == ROTATED
        assert reads == ["first-password"]

        # The rotation: a new password in the database and in the secret, then the proxy (or a
        # restart) drops the old sessions; the pool must open new ones.
        _set_password(admin, "second-password")
        secret["password"] = "second-password"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (ROTATED,))
        pool.check()  # drops the dead connection and opens a new one: refused once, then read again

        with pool.connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        assert reads == ["first-password", "second-password"]
    finally:
        pool.close()


def test_a_refused_login_is_retried_once_only(password_server):
    """When the secret still holds a wrong password, the connection fails (after one re-read)."""
    admin = password_server
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROTATED}")
        conn.execute(f"CREATE ROLE {ROTATED} LOGIN PASSWORD 'right'")
    reads = []

    def source() -> str:
        reads.append(1)
        return make_conninfo(admin, user=ROTATED, password="wrong")

    credentials = Credentials(source)
    connection_class = reauthenticating(credentials)
    with pytest.raises(psycopg.OperationalError) as refused:
        connection_class.connect()
    assert is_login_failure(refused.value)
    assert len(reads) == 2  # read at first, and once again after the refusal; no more


def test_the_application_login_reads_and_writes_rows_but_changes_no_schema(db_url):
    username = f"app_{uuid.uuid4().hex[:8]}"
    try:
        assert ensure_login(db_url, username, "pw-not-checked-on-trust") == "created"
        assert ensure_login(db_url, username, "another") == "exists"  # rotation's business now
        app_url = make_conninfo(db_url, user=username, password="")
        pool = make_pool(app_url, min_size=1, max_size=2)
        try:
            store = Store(pool)
            job = service.create_job(store, "arn:aws:iam::1:user/a", http_spec("as-app"))
            assert store.get_job("arn:aws:iam::1:user/a", str(job.id)).name == "as-app"
            assert store.live_leases() == 0
            store.claim_due(10, 60)
        finally:
            pool.close()
        with psycopg.connect(app_url, autocommit=True) as conn:
            for ddl in (
                "CREATE TABLE intruder (id int)",
                "DROP TABLE job_specs",
                "DROP VIEW jobs",
                "ALTER TABLE job_runs ADD COLUMN x int",
                "TRUNCATE executions",
                "SELECT * FROM schema_migrations",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(ddl)
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(username)))


def test_migrations_run_by_an_owner_without_createrole(pg_server_url):
    """A local setup where the migrating user may not create roles: the migrations still apply."""
    owner = f"mig_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {owner} LOGIN CREATEDB NOCREATEROLE")
    try:
        with temporary_database(pg_server_url) as url:
            name = conninfo_to_dict(url)["dbname"]
            with psycopg.connect(pg_server_url, autocommit=True) as conn:
                # Since PostgreSQL 15 the public schema belongs to the database's owner.
                conn.execute(f'ALTER DATABASE "{name}" OWNER TO {owner}')
            applied = migrate(make_conninfo(url, user=owner))
            assert 4 in applied
            assert migrate(make_conninfo(url, user=owner)) == []  # idempotent
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {owner}")


def test_tls_verifies_the_server_certificate_and_name(tmp_path):
    settings = Settings(database_secret_arn="arn", database_host="proxy.example")
    proxy = tls_options(settings, direct=False)
    assert proxy["sslmode"] == "verify-full"
    # RDS Proxy presents an ACM certificate: the Amazon Trust Services roots sign it.
    assert "Amazon Root CA 1" in Path(proxy["sslrootcert"]).read_text()
    bundle = tmp_path / "rds.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    named = tls_options(Settings(database_ca_bundle=str(bundle)), direct=True)
    assert named == {"sslmode": "verify-full", "sslrootcert": str(bundle)}


def test_conninfo_from_the_secret_verifies_the_proxy(monkeypatch):
    class Secrets:
        def get_secret_value(self, SecretId):
            return {"SecretString": '{"username": "scheduler_app", "password": "p w", "host": "db.internal"}'}

    settings = Settings(database_secret_arn="arn:secret", database_host="proxy.internal", database_name="scheduler")
    parts = conninfo_to_dict(conninfo_from_settings(settings, secrets_client=Secrets()))
    assert parts["host"] == "proxy.internal" and parts["user"] == "scheduler_app" and parts["password"] == "p w"
    assert parts["sslmode"] == "verify-full"


def test_the_cursor_key_is_fetched_through_powertools_once(monkeypatch):
    moto = pytest.importorskip("moto")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with moto.mock_aws():
        import boto3

        client = boto3.client("secretsmanager")
        arn = client.create_secret(Name=f"cursor-{uuid.uuid4().hex[:6]}", SecretString="k" * 48)["ARN"]
        settings = Settings.from_env({c.ENV_CURSOR_SECRET_ARN: arn})
        assert settings.cursor_secret is None  # nothing secret in the environment
        fetched = with_fetched_secrets(settings)
        assert fetched.cursor_secret == "k" * 48
        client.put_secret_value(SecretId=arn, SecretString="changed")
        # Cached by Powertools: a warm container does not ask again.
        assert with_fetched_secrets(settings).cursor_secret == "k" * 48


def test_the_api_s_access_keys_are_fetched_with_the_cursor_key():
    fetched = {"arn:cursor": "k" * 48, "arn:keys": '{"test": {"secret_access_key": "test"}}'}
    settings = Settings.from_env({c.ENV_CURSOR_SECRET_ARN: "arn:cursor", c.ENV_API_CREDENTIALS_SECRET_ARN: "arn:keys"})
    assert settings.api_credentials is None  # nothing secret in the environment
    done = with_fetched_secrets(settings, get_secret=fetched.__getitem__)
    assert (done.cursor_secret, done.api_credentials) == (fetched["arn:cursor"], fetched["arn:keys"])
    # Neither ARN set: nothing fetched, nothing asked.
    assert with_fetched_secrets(Settings(), get_secret=None) == Settings()


def test_stack_scoped_names_come_from_the_environment():
    settings = Settings.from_env(
        {
            c.ENV_SERVICE_NAME: "scheduler-Other",
            c.ENV_METRICS_NAMESPACE: "Scheduler/Other",
            c.ENV_EXECUTOR_CONCURRENCY: "7",
        }
    )
    assert (settings.service_name, settings.metrics_namespace, settings.executor_concurrency) == (
        "scheduler-Other",
        "Scheduler/Other",
        7,
    )
    assert Settings.from_env({}).service_name == c.SERVICE_NAME
    assert os.environ.get(c.ENV_CURSOR_SECRET) is None


@pytest.fixture
def scratch_database(pg_server_url) -> Iterator[str]:
    """A database of this test's own (``fix_infra_<hex>``), and a role to make logins members of."""
    name = f"fix_infra_{uuid.uuid4().hex[:12]}"
    role = f"{name}_role"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
        conn.execute(psycopg.sql.SQL("CREATE ROLE {}").format(psycopg.sql.Identifier(role)))
    try:
        yield make_conninfo(pg_server_url, dbname=name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
            )
            for login in (f"{name}_app", role):
                conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(login)))


def test_the_login_is_created_with_a_scram_verifier_not_its_password(scratch_database):
    # The statement that creates the login carries the verifier: the server stores it as it is (a
    # password would be hashed there with a salt of its own), and never sees the password.
    url = scratch_database
    name = conninfo_to_dict(url)["dbname"]
    login = f"{name}_app"
    assert ensure_login(url, login, "the-app-password", role=f"{name}_role") == "created"
    with psycopg.connect(url, autocommit=True) as conn:
        (stored,) = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (login,)).fetchone()
    assert stored.startswith("SCRAM-SHA-256$4096:")
    salt = base64.b64decode(stored.split("$")[1].split(":")[1])
    assert scram_verifier("the-app-password", salt=salt) == stored
    assert "the-app-password" not in stored


def test_the_login_made_from_a_verifier_logs_in_with_its_password(password_server):
    """End to end, on the private server that asks ``rotated`` for its password (SCRAM)."""
    admin = password_server
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {ROTATED}")
        conn.execute("DROP ROLE IF EXISTS scram_app_role")
        conn.execute("CREATE ROLE scram_app_role")
    assert ensure_login(admin, ROTATED, "verifier-made", role="scram_app_role") == "created"
    with psycopg.connect(make_conninfo(admin, user=ROTATED, password="verifier-made")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (ROTATED,)
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(make_conninfo(admin, user=ROTATED, password="wrong"))
    assert is_login_failure(refused.value)
