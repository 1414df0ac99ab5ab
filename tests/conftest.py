"""Shared fixtures: a real Postgres for every test that asks for one.

The server is ``DATABASE_URL`` when set, else an embedded Postgres (pgserver) started for the
session. Migrations are applied once to a template database; each test gets its own database
cloned from it (``CREATE DATABASE ... TEMPLATE``), dropped afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from scheduler.db import make_pool
from scheduler.migrations import migrate
from scheduler.store import Store

pytest_plugins = ["tests.integration.conftest_amqp"]


def _with_db(url: str, dbname: str) -> str:
    return make_conninfo(url, dbname=dbname)


@pytest.fixture(scope="session")
def pg_server_url():
    """Conninfo of a Postgres server whose ``postgres`` database we may create databases from."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield _with_db(url, conninfo_to_dict(url).get("dbname") or "postgres")
        return
    import pgserver

    datadir = tempfile.mkdtemp(prefix="sched-pg-")
    server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


@pytest.fixture(scope="session")
def template_db(pg_server_url):
    """A migrated database used as the template of each test's database."""
    name = f"sched_tpl_{uuid.uuid4().hex[:10]}"
    with _admin(pg_server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    migrate(_with_db(pg_server_url, name))
    yield name
    with _admin(pg_server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_db_url(pg_server_url):
    """A fresh, empty database (no migrations)."""
    name = f"sched_t_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(pg_server_url, name)
    with _admin(pg_server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(pg_server_url, template_db):
    """A migrated database of this test's own."""
    name = f"sched_t_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield _with_db(pg_server_url, name)
    with _admin(pg_server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pool(db_url):
    """A connection pool on this test's database."""
    pool = make_pool(db_url, min_size=1, max_size=10)
    yield pool
    pool.close()


@pytest.fixture
def store(pool):
    """The store on this test's database."""
    return Store(pool)
