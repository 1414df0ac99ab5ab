-- 0023: a change log of calendars and alert rule sets, as 0016's of jobs. A calendar or a rule
-- set changes the schedules or the alerts of every job that names or carries it, so who changed
-- it, when and how is kept too: one row per create, update and delete, written in the transaction
-- of the change (scheduler.store.changes), with the caller ("actor"), the database's now, the
-- version after it and the diff of its fields (an alert target's secrets masked before it is
-- written). Keyed by the name, not by a row: a name's entries outlive its delete (and a name made
-- again reads on after them), for the executions' retention period (purge_resource_changes, run
-- with the partitions' upkeep). Keyed by (owner, kind, name, seq), the page order of
-- GET /v1/calendars/{name}/changes and GET /v1/alert-rules/{name}/changes read backwards.
CREATE TABLE IF NOT EXISTS resource_changes (
    owner   text COLLATE "C" NOT NULL,
    kind    text        NOT NULL CHECK (kind IN ('calendar', 'alert_rules')),
    name    text COLLATE "C" NOT NULL,
    seq     bigint      GENERATED ALWAYS AS IDENTITY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    action  text        NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    version integer     NOT NULL,
    diff    jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (owner, kind, name, seq)
);
-- The purge finds the deletes past the retention here (few rows: deletes only).
CREATE INDEX IF NOT EXISTS resource_changes_deleted_idx ON resource_changes (at) WHERE action = 'delete';
