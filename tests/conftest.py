"""Shared fixtures: a real Postgres for every test that asks for one.

The server is ``DATABASE_URL`` when set, else an embedded Postgres (pgserver) started for the
session. Migrations are applied once to a template database; each test gets its own database
cloned from it (``CREATE DATABASE ... TEMPLATE``), dropped afterwards. The template is migrated
again when the UTC day has changed since: migrating makes the day partitions from today on, and
production's fan-out keeps them so every minute, so a clone of yesterday's template would not be
the schema a fresh database has today. A clone has its
template's grants, so it shares the template's application role (migration 0011): a test of the
isolation between databases migrates databases of its own (tests/security/test_database_roles.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator

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


class DailyTemplate:
    """The migrated template database of the current UTC day (a new one when the day turns)."""

    def __init__(self, server_url: str, stack: contextlib.ExitStack) -> None:
        self.server_url = server_url
        self.stack = stack
        self.day: dt.date | None = None
        self.name = ""

    def current(self) -> str:
        """The name of a template migrated today, migrating one first if need be."""
        today = dt.datetime.now(dt.UTC).date()
        if today != self.day:
            url = self.stack.enter_context(temporary_database(self.server_url, label="tpl"))
            migrate(url)
            self.day, self.name = today, conninfo_to_dict(url)["dbname"]
        return self.name


@pytest.fixture(scope="session")
def template_db(pg_server_url) -> Iterator[DailyTemplate]:
    """Migrated databases used as the template of each test's database, one per UTC day."""
    with contextlib.ExitStack() as stack:
        yield DailyTemplate(pg_server_url, stack)


@pytest.fixture
def empty_db_url(pg_server_url):
    """A fresh, empty database (no migrations)."""
    with temporary_database(pg_server_url) as url:
        yield url


@pytest.fixture
def db_url(pg_server_url, template_db):
    """A migrated database of this test's own."""
    with temporary_database(pg_server_url, template=template_db.current()) as url:
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
