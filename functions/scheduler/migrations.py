"""Apply the numbered SQL migrations, once each, safely when several processes migrate at once.

A session-level advisory lock serialises concurrent runners (connect to the database directly,
never through RDS Proxy: the lock would pin the proxy connection). Each migration runs in its own
transaction together with its ``schema_migrations`` record, so a failure leaves no half-applied
migration behind.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import psycopg
from psycopg import sql

from scheduler.constants import APP_DATA_ROLE
from scheduler.errors import MigrationError  # noqa: F401 (re-exported)
from scheduler.sql import migration_files

MIGRATIONS_DIR = Path(__file__).resolve().parent / "sql" / "migrations"

logger = logging.getLogger(__name__)

# An arbitrary constant naming the lock: "sched-mg" in ASCII.
MIGRATION_LOCK_KEY = 0x7363686564_6D67 & 0x7FFFFFFFFFFFFFFF

_CREATE_RECORD = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


def checksum(sql: str) -> str:
    """The SHA-256 of a migration's text."""
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


def migrations_digest() -> str:
    """One hash over all migrations (the CDK custom resource reruns when it changes)."""
    digest = hashlib.sha256()
    for version, name, text in migration_files():
        digest.update(f"{version}:{name}:{checksum(text)}\n".encode())
    return digest.hexdigest()


def migrate(conninfo: str, *, target: int | None = None) -> list[int]:
    """Apply every migration not yet applied (up to ``target``); returns the versions applied."""
    applied_now: list[int] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            conn.execute(_CREATE_RECORD)
            done = {row[0]: row[1] for row in conn.execute("SELECT version, checksum FROM schema_migrations")}
            for version, name, sql in migration_files():
                if target is not None and version > target:
                    break
                if version in done:
                    if done[version] != checksum(sql):
                        raise MigrationError(
                            f"migration {version:04d}_{name} was changed after it was applied; "
                            "add a new migration instead"
                        )
                    continue
                logger.info("applying migration %04d_%s", version, name)
                with conn.transaction():
                    conn.execute(sql)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                        (version, name, checksum(sql)),
                    )
                applied_now.append(version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied_now


def applied_versions(conninfo: str) -> list[int]:
    """The versions recorded in ``schema_migrations`` (empty when none)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
        if not exists:
            return []
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


def files_hash() -> str:
    """A hash of the migration files, names and bytes: the one the deployment computes at synthesis
    (``infra.shared.migrations_hash``) and gives the migrate function as ``MigrationsHash``."""
    digest = hashlib.sha256()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def ensure_login(conninfo: str, username: str, password: str, *, role: str = APP_DATA_ROLE) -> str:
    """Give ``username`` a login with ``password``, as a member of ``role`` (the privileges of
    migration 0004), unless it can log in already: then its password is the rotation's business
    and is left alone. Returns "created", "enabled" or "exists" ("absent" when ``role`` was not
    created, for lack of CREATEROLE). The password goes through the client-side quoting of
    ``psycopg.sql.Literal`` (ALTER ROLE takes no bind parameters) and is never logged."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            return "absent"
        row = conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (username,)).fetchone()
        if row is not None and row[0]:
            outcome = "exists"
        else:
            verb = "ALTER" if row is not None else "CREATE"
            conn.execute(
                sql.SQL("{} ROLE {} WITH LOGIN PASSWORD {}").format(
                    sql.SQL(verb), sql.Identifier(username), sql.Literal(password)
                )
            )
            outcome = "enabled" if row is not None else "created"
        member = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (username, role)).fetchone()[0]
        if not member:
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(username)))
    return outcome
