"""Apply the numbered SQL migrations, once each, safely when several processes migrate at once.

A session-level advisory lock serialises concurrent runners (connect to the database directly,
never through RDS Proxy: the lock would pin the proxy connection). Each migration runs in its own
transaction together with its ``schema_migrations`` record, so a failure leaves no half-applied
migration behind.

A migration that alters a table the running scheduler uses waits for that table's lock, and while
it waits every later request for the table queues behind it (the running code's claims among them:
a rolling upgrade would stop the deliveries for as long as a report's open transaction holds the
table). So each migration asks for its locks for at most ``MIGRATION_LOCK_TIMEOUT_MS`` and, refused,
rolls back and tries again after a pause, for up to ``MIGRATION_LOCK_PATIENCE_SECONDS``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from scheduler.core.constants import APP_DATA_ROLE
from scheduler.core.errors import MigrationError
from scheduler.sql import migration_files

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "sql" / "migrations"

logger = logging.getLogger(__name__)

# How long a migration's statement waits for a lock before it gives way (the live traffic queued
# behind it waits no longer), and how long a migration keeps trying before it fails.
MIGRATION_LOCK_TIMEOUT_MS = 100
MIGRATION_LOCK_PATIENCE_SECONDS = 240.0

# An arbitrary constant naming the lock: "sched-mg" in ASCII.
MIGRATION_LOCK_KEY = 0x7363686564_6D67 & 0x7FFFFFFFFFFFFFFF

# The application login's password as PostgreSQL's own scram-sha-256 encryption stores it.
SCRAM_ITERATIONS = 4096
SCRAM_SALT_BYTES = 16

_CREATE_RECORD = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


# Migration 0011 comments each database's application role with this (a format() pattern of the
# database's name): pg_shdescription is a shared catalog, read from any database on the server,
# and after the database itself is gone.
ROLE_MARKER = "scheduler: the application role of database %I"


def database_roles(conn: psycopg.Connection, dbname: str) -> list[str]:
    """The application roles migration 0011 made for a database named ``dbname`` (one, or none
    when it could not create one; more if that name was taken and given again), by their marker,
    on any database of the server."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT r.rolname FROM pg_roles r JOIN pg_shdescription d"
            " ON d.objoid = r.oid AND d.classoid = 'pg_authid'::regclass"
            " WHERE d.description = format(%s, %s::text) ORDER BY r.rolname",
            (ROLE_MARKER, dbname),
        )
    ]


def checksum(sql: str) -> str:
    """The SHA-256 of a migration's text."""
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


def migrations_digest() -> str:
    """One hash over all migrations (the CDK custom resource reruns when it changes)."""
    digest = hashlib.sha256()
    for version, name, text in migration_files():
        digest.update(f"{version}:{name}:{checksum(text)}\n".encode())
    return digest.hexdigest()


def migrate(conninfo: str, *, target: int | None = None, app_logins: Sequence[str] = ()) -> list[int]:
    """Apply every migration not yet applied (up to ``target``); returns the versions applied.

    ``app_logins``: the logins that serve this database (the migrate function's own). Migration
    0011 gives them the database's role in the transaction that takes the server-wide role's
    privileges away, so that they are never refused meanwhile (the session's
    ``scheduler.app_logins``, a JSON array)."""
    applied_now: list[int] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.add_notice_handler(_log_notice)
        conn.execute("SELECT set_config('scheduler.app_logins', %s, false)", (json.dumps(list(app_logins)),))
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            conn.execute(_CREATE_RECORD)
            done = {row[0]: row[1] for row in conn.execute("SELECT version, checksum FROM schema_migrations")}
            files = migration_files()
            for version, name, sql in files:
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
                _apply(conn, version, name, sql)
                applied_now.append(version)
            _warn_if_ahead(done, {version for version, _, _ in files})
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied_now


def _warn_if_ahead(done: dict[int, str], known: set[int]) -> None:
    """A warning when the database holds migrations this code does not have (``known``): a newer
    version of the scheduler migrated it, and this one may not read what that one writes."""
    ahead = sorted(set(done) - known)
    if not ahead:
        return
    logger.warning(
        "the database holds migrations this version of the scheduler does not know (%s): a newer version "
        "migrated it; run that version (this one may fail on what it finds)",
        ", ".join(f"{version:04d}" for version in ahead),
    )


def _apply(conn: psycopg.Connection, version: int, name: str, sql: str) -> None:
    """One migration and its record in one transaction, its locks asked for briefly: refused
    (another session holds a table it alters), it is rolled back and tried again after a pause
    (doubling, at most 5 s) until ``MIGRATION_LOCK_PATIENCE_SECONDS`` have passed."""
    deadline = time.monotonic() + MIGRATION_LOCK_PATIENCE_SECONDS
    pause, told = 0.05, 0.0
    while True:
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT_MS}ms'")
                conn.execute(sql)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (version, name, checksum(sql)),
                )
            return
        except psycopg.errors.LockNotAvailable as exc:
            now = time.monotonic()
            if now >= deadline:
                raise MigrationError(
                    f"migration {version:04d}_{name} could not take its locks in "
                    f"{MIGRATION_LOCK_PATIENCE_SECONDS:g} s: another session holds a table it changes "
                    "(a long transaction: see pg_stat_activity), so it was not applied; try again"
                ) from exc
            if now >= told:  # at the first refusal, then every 10 s
                logger.info("migration %04d_%s waits for a lock another session holds; trying again", version, name)
                told = now + 10
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, 5.0)


def _log_notice(diagnostic: psycopg.errors.Diagnostic) -> None:
    """A migration's WARNING (what an operator must do) in the log. Its NOTICEs (what it
    skipped, ``IF NOT EXISTS`` and the like) are not: the command line prints what is logged."""
    if diagnostic.severity_nonlocalized == "WARNING":
        logger.warning("migration %s: %s", diagnostic.severity_nonlocalized, diagnostic.message_primary)


def _scalar(conn: psycopg.Connection, query: Any, params: Any = None) -> Any:
    """The one value of a query that answers one row."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, "the query answers one row"
    return row[0]


def applied_versions(conninfo: str) -> list[int]:
    """The versions recorded in ``schema_migrations`` (empty when none)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        exists = _scalar(conn, "SELECT to_regclass('schema_migrations') IS NOT NULL")
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


def ensure_login(conninfo: str, username: str, password: str, *, role: str | None = None) -> str:
    """Give ``username`` a login with ``password``, as a member of ``role``: by default the
    database's own application role (``scheduler_data_role()``, migration 0011), unless it can
    log in already: then its password is the rotation's business and is left alone. Returns
    "created", "enabled" or "exists" ("absent" when the database has no such role: it was
    migrated by a user without CREATEROLE, or not yet to 0011). The password itself never
    reaches the server: the statement carries its SCRAM-SHA-256 verifier (:func:`scram_verifier`,
    computed here), which PostgreSQL stores as it is, so a statement the server logs (the
    deployment logs those slower than a second) holds no password. The password must be ASCII.

    A login that serves another database, through that database's role, is refused
    (``MigrationError``): one login for two databases would join what the roles keep apart.
    Secrets Manager's multi-user rotation alternates between ``username`` and a clone that is a
    member of it (``<name>_clone``, made by ``GRANT <name> TO <name>_clone``): when the secret
    names the clone, the login it is a member of gets the role too. Both leave the server-wide
    ``scheduler_data`` of before 0011, which holds this database's privileges no longer and
    would only still reach the databases not yet migrated."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if role is None:
            has_role = _scalar(conn, "SELECT to_regprocedure('scheduler_data_role()') IS NOT NULL")
            role = _scalar(conn, "SELECT scheduler_data_role()") if has_role else None
        if role is None or conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            return "absent"
        logins = [username, *_rotation_base(conn, username)]
        for login in logins:
            serves = _serves_elsewhere(conn, login, role)
            if serves:
                raise MigrationError(
                    f"login {login} serves another database (through {', '.join(serves)}): "
                    "give each scheduler database a login of its own"
                )
        row = conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (username,)).fetchone()
        if row is not None and row[0]:
            outcome = "exists"
        else:
            verb = "ALTER" if row is not None else "CREATE"
            conn.execute(
                sql.SQL("{} ROLE {} WITH LOGIN PASSWORD {}").format(
                    sql.SQL(verb), sql.Identifier(username), sql.Literal(scram_verifier(password))
                )
            )
            outcome = "enabled" if row is not None else "created"
        for login in logins:
            member = _scalar(conn, "SELECT pg_has_role(%s, %s, 'MEMBER')", (login, role))
            if not member:
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(login)))
            if role != APP_DATA_ROLE and _scalar(conn, _DIRECT_MEMBER, (APP_DATA_ROLE, login)):
                conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(APP_DATA_ROLE), sql.Identifier(login)))
    return outcome


def scram_verifier(password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier of ``password`` as PostgreSQL stores it (``pg_authid.rolpassword``):
    ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``, base64 (RFC 5802, RFC 7677), with
    a random 16-byte salt unless one is given. ``PASSWORD '<verifier>'`` stores it unchanged, and a
    client logging in with the password is checked against it. Only ASCII passwords: for those,
    the SASLprep that the server and libpq apply first changes nothing (Secrets Manager generates
    ASCII)."""
    if not password.isascii():
        raise MigrationError("the login's password must be ASCII (it is sent as a SCRAM-SHA-256 verifier)")
    salt = os.urandom(SCRAM_SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored_key = hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = [base64.b64encode(part).decode() for part in (salt, stored_key, server_key)]
    return f"SCRAM-SHA-256${iterations}:{b64[0]}${b64[1]}:{b64[2]}"


# Whether the second role was granted the first itself (not through another role).
_DIRECT_MEMBER = """
SELECT EXISTS (SELECT FROM pg_auth_members
               WHERE roleid = to_regrole(quote_ident(%s)) AND member = to_regrole(quote_ident(%s)))"""


def _rotation_base(conn: psycopg.Connection, username: str) -> list[str]:
    """``[name]`` when ``username`` is ``<name>_clone`` and a member of ``name`` (the clone of
    Secrets Manager's multi-user rotation), else ``[]``."""
    base = username.removesuffix("_clone")
    if base == username:
        return []
    found = _scalar(conn, _DIRECT_MEMBER, (base, username))
    return [base] if found else []


def _serves_elsewhere(conn: psycopg.Connection, login: str, role: str) -> list[str]:
    """The application roles of other databases (their marker, migration 0011) that ``login`` is
    a member of and that hold privileges in a database other than this one. A superuser is a
    member of every role and is not asked."""
    found = conn.execute("SELECT oid, rolsuper FROM pg_roles WHERE rolname = %s", (login,)).fetchone()
    if found is None or found[1]:
        return []
    return [
        row[0]
        for row in conn.execute(
            """
            SELECT r.rolname FROM pg_roles r
            JOIN pg_shdescription d ON d.objoid = r.oid AND d.classoid = 'pg_authid'::regclass
            WHERE d.description LIKE %(marked)s
              AND r.rolname <> %(role)s
              AND pg_has_role(%(login)s, r.oid, 'MEMBER')
              AND EXISTS (SELECT FROM pg_shdepend s
                          WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = r.oid
                            AND s.dbid <> (SELECT oid FROM pg_database WHERE datname = current_database()))
            ORDER BY r.rolname""",
            {"marked": ROLE_MARKER.removesuffix("%I") + "%", "role": role, "login": found[0]},
        )
    ]
