-- 0016: a change log of every job, and chained jobs (issue 34, items 2 and 3).
--
-- job_changes: one row per create, update, pause, resume, run and delete of a job, written in
-- the transaction of the change (scheduler.store.changes), with who made it ("actor": BY is a
-- reserved word), the database's now, the job's version after it, and what changed (diff, its
-- secrets masked before it is written). No foreign key: the entries outlive their job's delete,
-- for the executions' retention period (purge_job_changes, run with the partitions' upkeep).
-- Keyed by (job_id, seq), the page order of GET /v1/jobs/{id}/changes read backwards.
CREATE TABLE IF NOT EXISTS job_changes (
    job_id  uuid        NOT NULL,
    seq     bigint      GENERATED ALWAYS AS IDENTITY,
    owner   text        NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    action  text        NOT NULL CHECK (action IN ('create', 'update', 'pause', 'resume', 'run', 'delete')),
    version integer     NOT NULL,
    diff    jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (job_id, seq)
);
-- The purge finds the deletes past the retention here (few rows: deletes only).
CREATE INDEX IF NOT EXISTS job_changes_deleted_idx ON job_changes (at) WHERE action = 'delete';

-- Chains: the jobs (names or ids of the same owner) run when an execution of this one ends so.
-- A constant default: a change of the catalog, no rewrite of job_specs.
ALTER TABLE job_specs
    ADD COLUMN IF NOT EXISTS on_success  text[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS on_failure  text[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS on_complete text[] NOT NULL DEFAULT '{}';

-- The cause of a pending chained run (the finished execution's outcome: its id, job, status,
-- HTTP status, excerpt and error), set with manual_run_at by request_chained_runs and cleared
-- with it by the completion of the run it caused. NULL for every other job and run.
ALTER TABLE job_runs ADD COLUMN IF NOT EXISTS pending_cause jsonb;

-- An execution caused by another (trigger 'chain') names it, and its job (the console links to
-- it). Expand only, as 0012: nullable columns without a default change the catalog of the parent
-- and every day partition, no rewrite.
ALTER TABLE executions ADD COLUMN IF NOT EXISTS caused_by uuid,
                       ADD COLUMN IF NOT EXISTS caused_by_job_id uuid;

-- The trigger 'chain' (beside 0015's 'backfill'). NOT VALID: the rows already there are not scanned (every one of them
-- satisfies it); new rows are checked in every partition.
ALTER TABLE executions DROP CONSTRAINT IF EXISTS executions_trigger_check;
ALTER TABLE executions ADD CONSTRAINT executions_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'retry', 'backfill', 'chain')) NOT VALID;

-- The view names the chains too (new columns go at its end, after 0013, 0014 and 0015's).
CREATE OR REPLACE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion, s.schedules, s.spread,
       s.exclude_calendars, s.on_excluded, s.pause_note, s.pause_until, s.paused_by, s.paused_at,
       s.on_success, s.on_failure, s.on_complete
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;
