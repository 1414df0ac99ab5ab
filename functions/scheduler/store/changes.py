"""The store's change logs and the chains (migrations 0016, 0021, 0023): an entry written in the
transaction of the change it records, a job's, a calendar's or a rule set's log read back a page at
a time (after its delete too, for the retention period; purged with the executions' retention:
``maintain_partitions``);
a write's chain check run in its transaction with the owner's chains held, and the chained runs
a completion asks for in its own transaction. ``Store`` has the log as a base class."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from scheduler.core.changes import spec_diff
from scheduler.core.domain import CHAIN_FIELDS, ChainRun, Change, ChangeAction, ChangedKind, ChangeEntry, Job
from scheduler.core.errors import NotFound
from scheduler.ports import ChainCheck
from scheduler.sql import QUERIES
from scheduler.store.rows import is_uuid, retry_on_dead_connection


def write_change(conn: psycopg.Connection[Any], owner: str, job_id: str, version: int, change: Change | None) -> None:
    """In the transaction of a change: its entry, with the version the change left."""
    if change is None:
        return
    conn.execute(
        QUERIES["insert_job_change"],
        {
            "job_id": job_id,
            "owner": owner,
            "actor": change.by,
            "action": str(change.action),
            "version": version,
            "diff": Jsonb(dict(change.diff)),
        },
    )


def write_resource_change(
    conn: psycopg.Connection[Any],
    owner: str,
    kind: ChangedKind,
    name: str,
    version: int,
    action: ChangeAction,
    by: str | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> None:
    """In the transaction of a calendar's or a rule set's change (0023): its entry, the diff of
    its fields as they were and are (``calendar_fields``, ``rule_set_fields``), secrets masked.
    Nothing for a change without a caller to name (the system's own)."""
    if by is None:
        return
    conn.execute(
        QUERIES["insert_resource_change"],
        {
            "owner": owner,
            "kind": str(kind),
            "name": name,
            "actor": by,
            "action": str(action),
            "version": version,
            "diff": Jsonb(spec_diff(before, after)),
        },
    )


def calendar_fields(timezone: str, definition: Mapping[str, Any]) -> dict[str, Any]:
    """A calendar's fields as its change log compares them."""
    return {"timezone": timezone, **definition}


def rule_set_fields(tag: str, alerts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A rule set's fields as its change log compares them: each rule by its place
    (``alerts.0.threshold``), so that a diff names the field that changed, not the whole list."""
    return {"tag": tag, "alerts": {str(i): dict(rule) for i, rule in enumerate(alerts)}}


def hold_chains(conn: psycopg.Connection[Any], owner: str, check: ChainCheck | None) -> None:
    """In the transaction of a write of a job with chains: the owner's chains held (its
    ``chain_owners`` row locked until the transaction ends), then ``check`` run on this
    connection's reads, which see every chain committed before the lock was granted. Nothing
    for a write without chains."""
    if check is None:
        return
    conn.execute(QUERIES["hold_chains"], {"owner": owner})
    check(ChainReads(conn))


class ChainReads:
    """The reads of a chain check (``ports.ChainLookup``) on one connection: in the write's
    transaction."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn

    def chain_links(self, owner: str) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The owner's jobs that chain to others: id -> (name, the names or ids they run next)."""
        rows = self.conn.execute(QUERIES["chain_links"], {"owner": owner}).fetchall()
        return {
            row["id"]: (row["name"], tuple(dict.fromkeys(ref for field in CHAIN_FIELDS for ref in row[field])))
            for row in rows
        }

    def resolve_jobs(self, owner: str, refs: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The owner's jobs named by ``refs`` (names or ids): ref -> (id, name); a ref naming no
        job of the owner is absent."""
        if not refs:
            return {}
        names, ids = split_refs(refs)
        rows = self.conn.execute(QUERIES["resolve_jobs"], {"owner": owner, "names": names, "ids": ids}).fetchall()
        found: dict[str, tuple[str, str]] = {}
        # By id first: a reference that is the id of a job names that job, whatever job has it as
        # its name (request_chained_runs reads it so too).
        for key in ("id", "name"):
            for row in rows:
                if row[key] in refs:
                    found.setdefault(row[key], (row["id"], row["name"]))
        return found


def split_refs(refs: Sequence[str]) -> tuple[list[str], list[str]]:
    """Chain references as (names, ids): a reference that is a UUID may be either."""
    names = list(refs)
    return names, [ref for ref in refs if is_uuid(ref)]


def request_chained_runs(conn: psycopg.Connection[Any], chains: Sequence[ChainRun]) -> list[str]:
    """In the transaction of the completions that ask for them: the chained runs (the ids of the
    jobs asked for; a name that no longer names a job is passed over)."""
    if not chains:
        return []
    payload = []
    for chain in chains:
        names, ids = split_refs(chain.jobs)
        payload.append({"owner": chain.owner, "names": names, "ids": ids, "cause": dict(chain.cause)})
    return [
        row["job_id"] for row in conn.execute(QUERIES["request_chained_runs"], {"chains": Jsonb(payload)}).fetchall()
    ]


class ChangeLog:
    """Change-log reads on ``self.pool``."""

    pool: Any

    def get_job(self, owner: str, job_id: str) -> Job:  # pragma: no cover - Store's
        raise NotImplementedError

    @retry_on_dead_connection
    def list_changes(
        self, owner: str, job_id: str, *, limit: int = 50, before_seq: int | None = None
    ) -> list[ChangeEntry]:
        """A page of the job's change log, newest first (``before_seq``: the keyset cursor). Kept
        after the job's delete; ``NotFound`` when the owner has no such job and no entry of one."""
        if not is_uuid(job_id):
            raise NotFound(job_id)
        params = {"job_id": job_id, "owner": owner, "before_seq": before_seq, "limit": limit}
        with self.pool.connection() as conn:
            rows = conn.execute(QUERIES["list_job_changes"], params).fetchall()
        if not rows and before_seq is None:
            self.get_job(owner, job_id)  # NotFound when there is no such job either
        return [ChangeEntry.from_row(row) for row in rows]

    @retry_on_dead_connection
    def list_resource_changes(
        self, owner: str, kind: ChangedKind, name: str, *, limit: int = 50, before_seq: int | None = None
    ) -> list[ChangeEntry]:
        """A page of a calendar's or a rule set's change log, newest first (``before_seq``: the
        keyset cursor), kept after its delete. Empty when the name never had an entry (the API
        then answers 404 if there is no such calendar or set either)."""
        params = {"owner": owner, "kind": str(kind), "name": name, "before_seq": before_seq, "limit": limit}
        with self.pool.connection() as conn:
            return [ChangeEntry.from_row(row) for row in conn.execute(QUERIES["list_resource_changes"], params)]
