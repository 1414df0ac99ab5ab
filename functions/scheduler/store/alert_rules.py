"""The store's alert rule sets: an owner's named rules for every job with a tag (migration
0020), read and written as ``AlertRuleRecord``s. ``Store`` has them as a base class; they use
its pool. The alert sweep reads them with the jobs they cover (``store.alerts``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from scheduler.core.alerts import AlertRuleRecord
from scheduler.core.domain import ChangeAction, ChangedKind
from scheduler.core.errors import AlertRuleExists, AlertRuleNotFound, VersionMismatch
from scheduler.sql import QUERIES
from scheduler.store.changes import rule_set_fields, write_resource_change
from scheduler.store.rows import retry_on_dead_connection, transaction_if

# How many times a PUT creating a set runs again when a concurrent PUT created it first.
RACED_CREATE_ATTEMPTS = 3


class AlertRuleTables:
    """Alert rule sets of an owner, on ``self.pool`` (a psycopg pool)."""

    pool: Any

    @retry_on_dead_connection
    def put_alert_rule(
        self,
        owner: str,
        name: str,
        tag: str,
        alerts: Sequence[Mapping[str, Any]],
        expected_version: int | None = None,
        *,
        by: str | None = None,
        create_only: bool = False,
    ) -> tuple[AlertRuleRecord, bool]:
        """Create or replace a rule set (version + 1): the record, and whether it was created.
        With ``expected_version`` (If-Match), only replace that version: ``VersionMismatch``
        naming the current one, or None when there is no set to replace (never created); with
        ``create_only`` (If-None-Match: *), only create it: ``AlertRuleExists`` when the owner
        has one of that name. Its change-log entry, made by ``by``, in the same transaction."""
        params = {
            "owner": owner,
            "name": name,
            "tag": tag,
            "alerts": Jsonb([dict(rule) for rule in alerts]),
            "expected_version": expected_version,
        }
        query = QUERIES[
            "create_alert_rule"
            if create_only
            else "put_alert_rule"
            if expected_version is None
            else "replace_alert_rule"
        ]
        for _ in range(RACED_CREATE_ATTEMPTS):
            with self.pool.connection() as conn, conn.transaction():
                row = conn.execute(query, params).fetchone()
                if row is not None and not row["created"] and row["prior_tag"] is None:
                    # Created by a concurrent PUT after this statement's snapshot: it updated a
                    # set it had not read. Undone, and run again (it now reads that set first).
                    raise psycopg.Rollback()
                if row is not None:
                    record, created = AlertRuleRecord.from_row(row), bool(row["created"])
                    before = None if created else rule_set_fields(row["prior_tag"], row["prior_alerts"])
                    action = ChangeAction.CREATE if created else ChangeAction.UPDATE
                    after = rule_set_fields(tag, alerts)
                    write_resource_change(
                        conn, owner, ChangedKind.ALERT_RULES, name, record.version, action, by, before, after
                    )
                    return record, created
                break
        if create_only:  # nothing written: the owner has a set of that name
            raise AlertRuleExists(name)
        try:  # nothing written: If-Match named another version, no set to replace, or no change
            found = self.get_alert_rule(owner, name)
        except AlertRuleNotFound:
            raise VersionMismatch(None, "alert rule set") from None
        if expected_version not in (None, found.version):
            raise VersionMismatch(found.version, "alert rule set")
        return found, False  # a replacement by what the set has: no new version, no entry

    @retry_on_dead_connection
    def get_alert_rule(self, owner: str, name: str) -> AlertRuleRecord:
        """One rule set of the owner (``AlertRuleNotFound``)."""
        with self.pool.connection() as conn:
            row = conn.execute(QUERIES["get_alert_rule"], {"owner": owner, "name": name}).fetchone()
        if row is None:
            raise AlertRuleNotFound(name)
        return AlertRuleRecord.from_row(row)

    @retry_on_dead_connection
    def list_alert_rules(self, owner: str, *, limit: int = 50, after_name: str | None = None) -> list[AlertRuleRecord]:
        """A page of the owner's rule sets in name order, after ``after_name``."""
        params = {"owner": owner, "limit": limit, "after_name": after_name}
        with self.pool.connection() as conn:
            return [AlertRuleRecord.from_row(row) for row in conn.execute(QUERIES["list_alert_rules"], params)]

    @retry_on_dead_connection
    def delete_alert_rule(
        self, owner: str, name: str, *, by: str | None = None, expected_version: int | None = None
    ) -> None:
        """Delete a rule set (``AlertRuleNotFound``; ``VersionMismatch``, nothing deleted, when
        ``expected_version`` is given and it is at another); the alerts it fired stay listed. Its
        change-log entry (its rules, as ``from``), made by ``by``, in the same transaction."""
        with self.pool.connection() as conn, transaction_if(conn, by is not None or expected_version is not None):
            row = conn.execute(QUERIES["delete_alert_rule"], {"owner": owner, "name": name}).fetchone()
            if row is None:
                raise AlertRuleNotFound(name)
            if expected_version is not None and row["version"] != expected_version:  # rolled back
                raise VersionMismatch(row["version"], "alert rule set")
            before = rule_set_fields(row["tag"], row["alerts"])
            write_resource_change(
                conn, owner, ChangedKind.ALERT_RULES, name, row["version"], ChangeAction.DELETE, by, before, None
            )
