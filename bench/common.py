"""Benchmark plumbing: a Postgres server (DATABASE_URL or embedded) and fresh migrated databases."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "functions"), str(ROOT)]

from scheduler.migrations import migrate  # noqa: E402


@contextlib.contextmanager
def postgres_server():
    """Conninfo of a server: DATABASE_URL when set, else an embedded pgserver for this run."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    import pgserver

    datadir = tempfile.mkdtemp(prefix="sched-bench-")
    server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server_url: str, label: str = "bench"):
    """A new migrated database, dropped at the end."""
    name = f"sched_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(server_url, dbname=name)
    try:
        migrate(url)
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
