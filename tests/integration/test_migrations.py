"""Migrations: applied one by one they give the schema the code expects, idempotently and safely
when several processes migrate at once."""

from __future__ import annotations

import re
import threading

import psycopg
import pytest

from scheduler.migrations import MigrationError, applied_versions, migrate, migrations_digest
from scheduler.sql import QUERIES, migration_files


def schema_snapshot(url: str) -> dict:
    """Columns, indexes and constraints of the public schema, comparable across databases."""
    with psycopg.connect(url) as conn:
        columns = conn.execute("""
            SELECT table_name, column_name, data_type, is_nullable, column_default, generation_expression
            FROM information_schema.columns WHERE table_schema = 'public'
            ORDER BY table_name, column_name""").fetchall()
        indexes = conn.execute("""
            SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
            ORDER BY indexname""").fetchall()
        constraints = conn.execute("""
            SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
            WHERE connamespace = 'public'::regnamespace ORDER BY conname""").fetchall()
    return {"columns": columns, "indexes": indexes, "constraints": constraints}


def test_one_by_one_equals_all_at_once(empty_db_url, db_url):
    for version, _, _ in migration_files():
        assert migrate(empty_db_url, target=version) == [version]
    assert schema_snapshot(empty_db_url) == schema_snapshot(db_url)
    assert applied_versions(empty_db_url) == [v for v, _, _ in migration_files()]


def test_migrate_is_idempotent(db_url):
    assert migrate(db_url) == []


def test_concurrent_migrations_apply_each_once(empty_db_url):
    results, errors = [], []

    def run():
        try:
            results.append(migrate(empty_db_url))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    applied = sorted(v for r in results for v in r)
    assert applied == [v for v, _, _ in migration_files()]


def test_changed_migration_is_refused(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        migrate(db_url)


def test_every_named_query_fits_the_schema(db_url):
    """PREPARE each query against the migrated schema: a column the code expects but no migration
    creates fails here."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        for name, sql in QUERIES.items():
            names: list[str] = []

            def placeholder(match: re.Match) -> str:
                if match.group(1) not in names:
                    names.append(match.group(1))
                return f"${names.index(match.group(1)) + 1}"

            text = re.sub(r"%\((\w+)\)s", placeholder, sql)
            conn.execute(f"PREPARE q_{name} AS {text}")
            conn.execute(f"DEALLOCATE q_{name}")


def test_digest_is_stable():
    assert migrations_digest() == migrations_digest()
    assert re.fullmatch(r"[0-9a-f]{64}", migrations_digest())
