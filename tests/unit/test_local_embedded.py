"""The one-line errors of local mode's embedded Postgres and data directory."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

from scheduler.local.embedded import data_dir_error, start_failure, useful_lines

SERVER_LOG = """\
2026-12-06 19:27:44.331 UTC [28063] LOG:  starting PostgreSQL 16.2
2026-12-06 19:27:44.331 UTC [28063] FATAL:  database files are incompatible with server
2026-12-06 19:27:44.331 UTC [28063] DETAIL:  The data directory was initialized by PostgreSQL version 15, which is \
not compatible with this version 16.2.
"""


def test_a_read_only_file_system_is_named():
    exc = OSError(errno.EROFS, os.strerror(errno.EROFS), "/mnt/ro/.scheduler")
    assert data_dir_error(Path("/mnt/ro/.scheduler"), exc) == (
        "cannot use --data-dir /mnt/ro/.scheduler: /mnt/ro/.scheduler: Read-only file system (give another --data-dir)"
    )


def test_the_server_s_error_and_its_detail_are_quoted_with_what_to_do():
    exc = subprocess.CalledProcessError(1, ["/x/bin/pg_ctl", "-D", "/d/pgdata", "start"])
    line = start_failure(
        Path("/d/pgdata"), exc, ["pg_ctl: could not start server\nExamine the log output.", SERVER_LOG]
    )
    assert line == (
        "cannot start the embedded Postgres under /d/pgdata: database files are incompatible with server; The data "
        "directory was initialized by PostgreSQL version 15, which is not compatible with this version 16.2. (its "
        "data needs PostgreSQL 15: give another --data-dir, or --database-url of a PostgreSQL 15 server with that data)"
    )


def test_a_start_that_does_not_finish_says_so():
    exc = subprocess.TimeoutExpired(["/x/bin/pg_ctl", "-D", "/d/pgdata", "start"], 10)
    line = start_failure(Path("/d/pgdata"), exc, [""])
    assert line.startswith("cannot start the embedded Postgres under /d/pgdata: pg_ctl did not finish within 10 s (")


def test_initdb_s_error_is_quoted_not_its_advice():
    transcript = (
        'stdout:\nThe files belonging to this database system will be owned by user "me".\n---\nstderr:\n'
        'initdb: error: directory "/d/pgdata" exists but is not empty\n'
        "initdb: hint: If you want to create a new database system, either remove or empty the directory\n"
    )
    assert useful_lines([transcript]) == ['directory "/d/pgdata" exists but is not empty']
