"""Issue 31, item 6: the application's role is per database. Before migration 0011 it was one
role for the whole server (``scheduler_data``, roles being cluster-wide), so the login of one
scheduler database read and wrote the jobs of every other on the same server (local setups, CI,
a shared RDS). Each database now has a role of its own (``scheduler_data_role()`` names it) whose
privileges are on that database's objects only, and its logins are members of that role alone."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from scheduler.core.errors import MigrationError
from scheduler.store.migrations import ensure_login, migrate
from tests.support import http_spec, privileges_snapshot, temporary_database

OWNER = "arn:aws:iam::111111111111:user/roles"

# What a login may not do in a database it does not serve: read or write any of its tables, take
# its sequence, run its maintenance.
STATEMENTS = (
    "SELECT * FROM jobs",
    "SELECT * FROM job_specs",
    "SELECT * FROM job_runs",
    "SELECT * FROM executions",
    "INSERT INTO job_specs (id, owner, name, target, retry) VALUES (gen_random_uuid(), 'x', 'x', '{}', '{}')",
    "UPDATE job_runs SET attempt = attempt",
    "DELETE FROM job_specs",
    "DELETE FROM executions",
    "SELECT nextval('executions_seq_seq')",
    "SELECT * FROM scheduler_maintain_partitions(30)",
)


def scalar(url: str, query: str, params: tuple = ()) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchone()[0]


def drop_roles(url: str, *names: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def as_login(url: str, login: str) -> str:
    return make_conninfo(url, user=login, password="")


def held_by(url: str, login: str) -> list[str]:
    """The objects of the database at ``url`` on which ``login`` holds any privilege (the
    catalog's word, through every role it is a member of)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            r[0]
            for r in conn.execute(
                """
            SELECT c.oid::regclass::text FROM pg_class c
            WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
              AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(%(login)s, c.oid, 'USAGE, SELECT, UPDATE')
                       ELSE has_table_privilege(%(login)s, c.oid,
                                                'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
                  END
            UNION ALL
            SELECT 'scheduler_maintain_partitions' WHERE has_function_privilege(
                %(login)s, 'scheduler_maintain_partitions(integer, integer, integer)', 'EXECUTE')
            ORDER BY 1""",
                {"login": login},
            ).fetchall()
        ]


def is_member(url: str, login: str, role: str) -> bool:
    return scalar(url, "SELECT pg_has_role(%s, %s, 'MEMBER')", (login, role))


def is_direct_member(url: str, login: str, role: str) -> bool:
    return scalar(
        url,
        "SELECT EXISTS (SELECT FROM pg_auth_members WHERE roleid = to_regrole(%s) AND member = to_regrole(%s))",
        (role, login),
    )


def create_job(url: str, login: str, name: str) -> None:
    """A job written as 0010's code wrote one (its columns only: the code of today writes columns
    that later migrations add), through the login's own session."""
    with psycopg.connect(as_login(url, login), autocommit=True) as conn, conn.transaction():
        spec = http_spec(name)
        row = conn.execute(
            "INSERT INTO job_specs (id, owner, name, schedule, timezone, target, retry, missed_runs, state)"
            " VALUES (gen_random_uuid(), %s, %s, %s, 'UTC', %s, '{}', 'run_once', 'active') RETURNING id",
            (OWNER, name, spec["schedule"], Jsonb(spec["target"])),
        ).fetchone()
        conn.execute("INSERT INTO job_runs (job_id, next_run_at, scheduled_at) VALUES (%s, now(), now())", (row[0],))


def reads_and_writes(conn: psycopg.Connection) -> int:
    """The jobs the connection sees, after writing their run state (raises when refused)."""
    conn.execute("UPDATE job_runs SET attempt = attempt")
    return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]


@dataclass
class Deployment:
    url: str  # as the migrating user
    login: str  # the application's login

    @property
    def app_url(self) -> str:
        return as_login(self.url, self.login)


@pytest.fixture
def two_deployments(pg_server_url) -> Iterator[tuple[Deployment, Deployment]]:
    """Two scheduler databases on one server, each migrated, each with its application login made
    as the migrate function makes it (``ensure_login``)."""
    logins = [f"app_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with temporary_database(pg_server_url, label="ra") as a, temporary_database(pg_server_url, label="rb") as b:
        try:
            deployments = []
            for url, login in zip((a, b), logins, strict=True):
                migrate(url)
                assert ensure_login(url, login, "pw-not-checked-on-trust") == "created"
                deployments.append(Deployment(url, login))
            yield tuple(deployments)
        finally:
            drop_roles(pg_server_url, *logins)


def test_6_the_login_of_one_database_has_no_privilege_on_anothers_jobs(two_deployments):
    a, b = two_deployments
    create_job(a.url, a.login, "in-a")
    create_job(b.url, b.login, "in-b")
    for mine, other in ((a, b), (b, a)):
        with psycopg.connect(as_login(other.url, mine.login), autocommit=True) as conn:
            for statement in STATEMENTS:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
        assert held_by(other.url, mine.login) == []
        # Its own database: as before.
        with psycopg.connect(mine.app_url, autocommit=True) as conn:
            assert reads_and_writes(conn) == 1
        assert "job_specs" in held_by(mine.url, mine.login)


def test_6_each_database_has_a_role_of_its_own_that_holds_nothing_elsewhere(two_deployments):
    roles = [scalar(d.url, "SELECT scheduler_data_role()") for d in two_deployments]
    assert None not in roles and roles[0] != roles[1]
    for deployment, role, others in zip(two_deployments, roles, (roles[1], roles[0]), strict=True):
        dbname = conninfo_to_dict(deployment.url)["dbname"]
        assert role == f"scheduler_data_{dbname}"
        # pg_shdepend (a shared catalog) records every privilege and object of a role, in every
        # database: this role's are in its own database, and the grant to connect to it.
        where = scalar(
            deployment.url,
            """
            SELECT array_agg(DISTINCT CASE WHEN s.dbid <> 0 THEN d.datname
                                           ELSE 'CONNECT ' || (SELECT datname FROM pg_database WHERE oid = s.objid)
                                      END)
            FROM pg_shdepend s LEFT JOIN pg_database d ON d.oid = s.dbid
            WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = to_regrole(%s)""",
            (role,),
        )
        assert sorted(where) == sorted([dbname, f"CONNECT {dbname}"])
        assert is_member(deployment.url, deployment.login, role)
        assert not is_member(deployment.url, deployment.login, others)
        assert not is_member(deployment.url, deployment.login, "scheduler_data")
        # The role shared by every database before 0011 holds nothing here any more.
        assert held_by(deployment.url, "scheduler_data") == []


def test_6_a_login_that_serves_another_database_is_refused(two_deployments, pg_server_url):
    """One login for two databases would be a member of both roles: ``ensure_login`` refuses it
    rather than join them (the stack's login has one name, scheduler_app: one server, one
    database)."""
    a, b = two_deployments
    with pytest.raises(MigrationError, match="serves another database"):
        ensure_login(b.url, a.login, "pw")
    assert held_by(b.url, a.login) == []
    # Named to the migration of a third database, it is not given that one's role either.
    with temporary_database(pg_server_url, label="rc") as c:
        migrate(c, app_logins=[a.login])
        assert held_by(c, a.login) == []


@pytest.mark.parametrize("named", ["login", "clone"])
def test_6_an_upgraded_deployment_keeps_its_login_working_and_equals_a_fresh_one(pg_server_url, named):
    """A deployment of 0010: its login (and the clone that the multi-user rotation alternates
    with) a member of scheduler_data. The migrate function names the secret's login, either of
    the two, to the migration (``migrate(app_logins=...)``), which gives the database's role in
    the transaction that takes scheduler_data's privileges away: a session open across the
    upgrade and new ones of either login go on reading and writing. The privileges are then a
    fresh database's."""
    login = f"app_{uuid.uuid4().hex[:8]}"
    clone = f"{login}_clone"
    with temporary_database(pg_server_url, label="old") as old, temporary_database(pg_server_url, label="new") as new:
        held = None
        try:
            migrate(old, target=10)
            assert ensure_login(old, login, "pw", role="scheduler_data") == "created"  # as 0010's code did
            with psycopg.connect(old, autocommit=True) as conn:
                # As Secrets Manager's multi-user rotation makes its clone.
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(clone)))
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(login), sql.Identifier(clone)))
            create_job(old, login, "before")
            held = psycopg.connect(as_login(old, login), autocommit=True)  # a function's session
            assert reads_and_writes(held) == 1

            migrate(old, app_logins=[login if named == "login" else clone])

            assert reads_and_writes(held) == 1
            for user in (login, clone):
                with psycopg.connect(as_login(old, user), autocommit=True) as conn:
                    assert reads_and_writes(conn) == 1
            role = scalar(old, "SELECT scheduler_data_role()")
            assert is_direct_member(old, login, role)
            assert not is_direct_member(old, login, "scheduler_data")
            assert ensure_login(old, login if named == "login" else clone, "pw") == "exists"

            migrate(new)
            assert privileges_snapshot(old) == privileges_snapshot(new)
        finally:
            if held is not None:
                held.close()
            drop_roles(pg_server_url, clone, login)


def test_6_on_a_shared_server_each_upgrade_closes_its_database(pg_server_url):
    """Two deployments of 0010 on one server: each login reads the other's jobs (the finding).
    Upgrading one closes it to the other's login; a migration that names no login (`scheduler
    migrate` by hand) leaves its own login without access until ``ensure_login`` (or a GRANT of
    the role, README's upgrade note) gives it the database's role."""
    logins = [f"app_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with temporary_database(pg_server_url, label="sa") as a, temporary_database(pg_server_url, label="sb") as b:
        try:
            for url, login in zip((a, b), logins, strict=True):
                migrate(url, target=10)
                assert ensure_login(url, login, "pw", role="scheduler_data") == "created"
                create_job(url, login, "job")
            la, lb = (Deployment(a, logins[0]), Deployment(b, logins[1]))
            with psycopg.connect(as_login(b, la.login), autocommit=True) as conn:
                assert reads_and_writes(conn) == 1  # the finding, before 0011

            migrate(a, app_logins=[la.login])
            assert held_by(a, lb.login) == []
            assert held_by(b, la.login) == []  # the named login left scheduler_data
            with psycopg.connect(la.app_url, autocommit=True) as conn:
                assert reads_and_writes(conn) == 1

            migrate(b)  # no login named
            with psycopg.connect(lb.app_url, autocommit=True) as conn:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    reads_and_writes(conn)
            assert ensure_login(b, lb.login, "pw") == "exists"
            with psycopg.connect(lb.app_url, autocommit=True) as conn:
                assert reads_and_writes(conn) == 1
            assert not is_member(b, lb.login, "scheduler_data")
            assert held_by(a, lb.login) == [] and held_by(b, la.login) == []
        finally:
            drop_roles(pg_server_url, *logins)


def test_6_a_role_of_the_expected_name_is_taken_over_only_when_it_is_an_empty_one_of_ours(pg_server_url):
    """A role of the name the database's role would have, which someone else made (a login
    here), is not adopted: the database's role takes the next name. A role that 0011 made for a
    database of the same name, since dropped, holding nothing and without members, is reused."""
    with temporary_database(pg_server_url, label="taken") as url:
        name = conninfo_to_dict(url)["dbname"]
        squatter = f"scheduler_data_{name}"
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(squatter)))
            migrate(url)
            assert scalar(url, "SELECT scheduler_data_role()") == f"{squatter}_2"
            assert held_by(url, squatter) == []
        finally:
            drop_roles(pg_server_url, squatter)
    # The same name again, after its database was dropped without its role (by hand).
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(pg_server_url, dbname=name)
    try:
        migrate(url)
        first = scalar(url, "SELECT scheduler_data_role()")
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        migrate(url)
        assert scalar(url, "SELECT scheduler_data_role()") == first
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            for role in (f"{squatter}_2", squatter):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_6_dropping_a_test_database_drops_its_role(pg_server_url):
    """Roles outlive databases: tests.support.temporary_database drops the role of the database
    it drops, so the suite leaves no role behind on a shared server."""
    with temporary_database(pg_server_url, label="gone") as url:
        migrate(url)
        role = scalar(url, "SELECT scheduler_data_role()")
    assert scalar(pg_server_url, "SELECT to_regrole(%s)", (role,)) is None


@pytest.fixture(scope="module")
def master_server() -> Iterator[str]:
    """A private Postgres 16 (pgserver's) with a master user as RDS makes it: CREATEROLE and
    CREATEDB, not a superuser. Since 16 such a user manages only the roles it holds WITH ADMIN
    OPTION (those it created), which the shared test server (15, and its superuser) does not show."""
    pgserver = pytest.importorskip("pgserver")
    datadir = tempfile.mkdtemp(prefix="sched-master-")
    server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            assert conn.info.server_version >= 160000
            conn.execute("CREATE ROLE master LOGIN CREATEROLE CREATEDB")
            conn.execute("CREATE DATABASE scheduler OWNER master")
            conn.execute("CREATE DATABASE other OWNER master")
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


def test_6_the_upgrade_as_an_rds_master_user(master_server):
    """The stack's shape: database ``scheduler``, login ``scheduler_app`` and the rotation's
    clone, everything made by a master user that is not a superuser. The secret names the clone
    at the upgrade; both logins keep their access, the database's role is scheduler_data_scheduler,
    and the same login cannot be given a second database."""
    url = make_conninfo(master_server, dbname="scheduler", user="master")
    other = make_conninfo(master_server, dbname="other", user="master")
    migrate(url, target=10)
    assert ensure_login(url, "scheduler_app", "pw", role="scheduler_data") == "created"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE ROLE scheduler_app_clone LOGIN")
        conn.execute("GRANT scheduler_app TO scheduler_app_clone")
    with psycopg.connect(as_login(url, "scheduler_app"), autocommit=True) as held:
        assert reads_and_writes(held) == 0
        migrate(url, app_logins=["scheduler_app_clone"])
        assert reads_and_writes(held) == 0
    for login in ("scheduler_app", "scheduler_app_clone"):
        with psycopg.connect(as_login(url, login), autocommit=True) as conn:
            assert reads_and_writes(conn) == 0
    assert scalar(url, "SELECT scheduler_data_role()") == "scheduler_data_scheduler"
    assert is_direct_member(url, "scheduler_app", "scheduler_data_scheduler")
    assert not is_direct_member(url, "scheduler_app", "scheduler_data")
    assert ensure_login(url, "scheduler_app_clone", "pw") == "exists"

    migrate(other)
    assert ensure_login(other, "other_app", "pw") == "created"
    with pytest.raises(MigrationError, match="serves another database"):
        ensure_login(other, "scheduler_app", "pw")
    assert held_by(other, "scheduler_app") == [] and held_by(url, "other_app") == []
