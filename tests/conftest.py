"""Shared fixtures: a real Postgres for every test that asks for one.

The server is ``DATABASE_URL`` when set, else an embedded Postgres (pgserver) started for the
session. Migrations are applied once to a template database; each test gets its own database
cloned from it (``CREATE DATABASE ... TEMPLATE``), dropped afterwards. A clone has its
template's grants, so it shares the template's application role (migration 0011): a test of the
isolation between databases migrates databases of its own (tests/security/test_database_roles.py).
"""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from scheduler.store.db import make_pool
from scheduler.store.migrations import migrate
from scheduler.store.postgres import Store
from tests.support import RecordingServer, postgres_server, temporary_database

pytest_plugins = ["tests.integration.conftest_amqp"]


@pytest.fixture(scope="session")
def pg_server_url():
    """Conninfo of a Postgres server whose maintenance database we may create databases from."""
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def template_db(pg_server_url):
    """A migrated database used as the template of each test's database."""
    with temporary_database(pg_server_url, label="tpl") as url:
        migrate(url)
        yield conninfo_to_dict(url)["dbname"]


@pytest.fixture
def empty_db_url(pg_server_url):
    """A fresh, empty database (no migrations)."""
    with temporary_database(pg_server_url) as url:
        yield url


@pytest.fixture
def db_url(pg_server_url, template_db):
    """A migrated database of this test's own."""
    with temporary_database(pg_server_url, template=template_db) as url:
        yield url


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


@pytest.fixture
def target_server():
    """A real HTTP server on loopback recording what it receives (``tests.support.RecordingServer``)."""
    server = RecordingServer()
    yield server
    server.close()
