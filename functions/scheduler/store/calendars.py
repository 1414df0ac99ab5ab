"""The store's calendars: an owner's named calendars, read and written as ``CalendarRecord``s, and
the read of the calendars a batch of jobs name (their planning). ``Store`` has them as a base
class; they use its pool."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from scheduler.core.domain import CalendarRecord, ChangeAction, ChangedKind, Job
from scheduler.core.errors import CalendarInUse, CalendarNameTaken, CalendarNotFound, ScheduleError, VersionMismatch
from scheduler.sql import QUERIES
from scheduler.store.changes import calendar_fields, write_resource_change
from scheduler.store.rows import retry_on_dead_connection, transaction_if

# How many of the jobs that use a calendar a 409 names.
MAX_JOBS_NAMED = 50


@contextlib.contextmanager
def held_calendars(conn: Any, owner: str, names: Sequence[str]) -> Iterator[None]:
    """For a job that names calendars: a transaction holding them (``hold_calendars``) around its
    write, so that none is deleted meanwhile; ``ScheduleError`` on ``exclude_calendars.N`` for
    one that is gone. A job naming none writes as before, in its one statement."""
    if not names:
        yield
        return
    with conn.transaction():
        held = {row["name"] for row in conn.execute(QUERIES["hold_calendars"], {"owner": owner, "names": list(names)})}
        for i, name in enumerate(names):
            if name not in held:
                raise ScheduleError(f"no calendar named {name!r} (create it first)", field=f"exclude_calendars.{i}")
        yield


class CalendarTables:
    """Calendars of an owner, on ``self.pool`` (a psycopg pool)."""

    pool: Any

    @retry_on_dead_connection
    def insert_calendar(
        self, owner: str, name: str, timezone: str, definition: Mapping[str, Any], *, by: str | None = None
    ) -> CalendarRecord:
        """A new calendar (``CalendarNameTaken`` for a name taken), its change-log entry made by
        ``by`` in the same transaction."""
        params = {"owner": owner, "name": name, "timezone": timezone, "definition": Jsonb(dict(definition))}
        with self.pool.connection() as conn, transaction_if(conn, by is not None):
            row = conn.execute(QUERIES["insert_calendar"], params).fetchone()
            if row is None:
                raise CalendarNameTaken(name)
            record = CalendarRecord.from_row(row)
            after = calendar_fields(timezone, definition)
            write_resource_change(
                conn, owner, ChangedKind.CALENDAR, name, record.version, ChangeAction.CREATE, by, None, after
            )
        return record

    @retry_on_dead_connection
    def get_calendar(self, owner: str, name: str) -> CalendarRecord:
        """One calendar of the owner (``CalendarNotFound``)."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["get_calendar"], {"owner": owner, "name": name}).fetchone()
        if row is None:
            raise CalendarNotFound(name)
        return CalendarRecord.from_row(row)

    @retry_on_dead_connection
    def list_calendars(self, owner: str, *, limit: int = 50, after_name: str | None = None) -> list[CalendarRecord]:
        """A page of the owner's calendars in name order, after ``after_name``."""
        params = {"owner": owner, "limit": limit, "after_name": after_name}
        with self.pool.connection() as conn:
            return [CalendarRecord.from_row(row) for row in conn.execute(QUERIES["list_calendars"], params)]

    @retry_on_dead_connection
    def replace_calendar(
        self,
        owner: str,
        name: str,
        timezone: str,
        definition: Mapping[str, Any],
        expected_version: int | None = None,
        *,
        by: str | None = None,
    ) -> CalendarRecord:
        """Replace a calendar's zone and definition, version + 1 (``CalendarNotFound``); with
        ``expected_version`` (If-Match), only that version (``VersionMismatch`` naming the
        current one). Its change-log entry, made by ``by``, in the same transaction."""
        params = {
            "owner": owner,
            "name": name,
            "timezone": timezone,
            "definition": Jsonb(dict(definition)),
            "expected_version": expected_version,
        }
        with self.pool.connection() as conn, transaction_if(conn, by is not None):
            row = conn.execute(QUERIES["replace_calendar"], params).fetchone()
            if row is not None:
                record = CalendarRecord.from_row(row)
                before = calendar_fields(row["prior_timezone"], row["prior_definition"])
                after = calendar_fields(timezone, definition)
                write_resource_change(
                    conn, owner, ChangedKind.CALENDAR, name, record.version, ChangeAction.UPDATE, by, before, after
                )
                return record
        # Nothing written: absent, at another version, or already what was asked (the statement
        # writes no new version of what it has).
        current = self.get_calendar(owner, name)  # CalendarNotFound when absent
        if expected_version is not None and current.version != expected_version:
            raise VersionMismatch(current.version, "calendar")
        return current

    @retry_on_dead_connection
    def jobs_naming_calendar(self, owner: str, name: str) -> list[Job]:
        """Every job of the owner's that names the calendar, in name order, in one read (a
        replacement checks and replans them all)."""
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["jobs_naming_calendar"], {"owner": owner, "name": name}).fetchall()
        return [Job.from_row(row) for row in rows]

    @retry_on_dead_connection
    def delete_calendar(
        self, owner: str, name: str, *, by: str | None = None, expected_version: int | None = None
    ) -> None:
        """Delete a calendar no job names (``CalendarNotFound``; ``CalendarInUse`` naming the
        jobs that name it, read while the calendar is held; ``VersionMismatch`` when
        ``expected_version`` is given and it is at another), its change-log entry made by ``by``
        (what it excluded, as ``from``) in the same transaction."""
        params = {"owner": owner, "name": name}
        with self.pool.connection() as conn, conn.transaction():
            held = conn.execute(QUERIES["lock_calendar"], params).fetchone()
            if held is None:
                raise CalendarNotFound(name)
            if expected_version is not None and held["version"] != expected_version:
                raise VersionMismatch(held["version"], "calendar")
            rows = conn.execute(QUERIES["jobs_using_calendar"], {**params, "limit": MAX_JOBS_NAMED}).fetchall()
            if rows:
                raise CalendarInUse(name, [(str(row["id"]), row["name"]) for row in rows])
            conn.execute(QUERIES["delete_calendar"], params)
            before = calendar_fields(held["timezone"], held["definition"])
            write_resource_change(
                conn, owner, ChangedKind.CALENDAR, name, held["version"], ChangeAction.DELETE, by, before, None
            )

    @retry_on_dead_connection
    def calendars_of(self, wanted: Iterable[tuple[str, str]]) -> list[CalendarRecord]:
        """The calendars named by ``(owner, name)`` pairs (those that exist), in one read."""
        pairs = sorted(set(wanted))
        if not pairs:
            return []
        params = {"owners": [owner for owner, _ in pairs], "names": [name for _, name in pairs]}
        with self.pool.connection() as conn:
            return [CalendarRecord.from_row(row) for row in conn.execute(QUERIES["calendars_of"], params)]
