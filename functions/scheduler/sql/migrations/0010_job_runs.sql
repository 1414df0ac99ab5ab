-- 0010: a job's run state in a narrow table of its own (job_runs); jobs becomes a view.
--
-- Every run wrote the job's whole row: the claim and the start in place (0002), the completion
-- as a new version, since it moves due_at, inserted into every index the row is in, the owner
-- and name's unique index among them. The run state (the occurrence in hand, the lease, the
-- counts, the last outcome, the version that fences a completion) now sits in job_runs, keyed by
-- the job, indexed only by its key and by due_at; what the API accepted (job_specs, the former
-- table renamed, with its indexes and constraints) is written by the API alone. A completion
-- writes a row of about 120 bytes into two indexes, not a row with the target and the retry
-- policy into three.
--
-- job_runs keeps 70% of each page free (fillfactor 30): a claim fills in the lease's five columns,
-- so its row version is about half as large again as the row inserted, and at 50 a fifth of
-- the claims found no room on their page and inserted into both indexes (none at 30, 20,000 jobs
-- drained). At 30 a million jobs' run state takes about 390 MB.
--
-- Measured side by side on the batched local path (claims and records overlapping, 20,000
-- jobs, 8 rounds): 1 process 12,563 -> 14,461 jobs/s, Postgres' CPU per job 80.0 -> 67.8 us;
-- 2 processes 12,544 -> 13,350 jobs/s, 85.8 -> 78.5 us.
--
-- job_runs.state is the job's state; job_specs keeps a copy for the job list's partial index
-- (owner, state, name), which a trigger writes when the state changes (a completion that ends
-- a job, a pause, a resume): an active job's run leaves job_specs alone. The view jobs is the
-- job as the API shows it, the specification joined with its run state, column for column the
-- table it replaces: every read goes on unchanged, and every write names its table.
--
-- The columns dropped from job_specs keep their space in the rows written before (Postgres
-- drops a column from the catalog only); it is reclaimed as the API rewrites them, or by a
-- VACUUM FULL job_specs. Over a million jobs this migration took 18.5 s here, during which
-- nothing is claimed or recorded (leases expire and jobs are claimed again; nothing is lost).

ALTER TABLE jobs RENAME TO job_specs;

CREATE TABLE job_runs (
    job_id               uuid        PRIMARY KEY REFERENCES job_specs (id) ON DELETE CASCADE,
    state                text        NOT NULL DEFAULT 'active'
                                     CHECK (state IN ('active', 'paused', 'completed')),
    version              integer     NOT NULL DEFAULT 1,
    scheduled_at         timestamptz,
    attempt              integer     NOT NULL DEFAULT 0,
    next_run_at          timestamptz,
    manual_run_at        timestamptz,
    due_at               timestamptz GENERATED ALWAYS AS (
                             LEAST(manual_run_at, CASE WHEN state = 'active' THEN next_run_at END)
                         ) STORED,
    locked_until         timestamptz,
    lock_token           uuid,
    lease_kind           text        CHECK (lease_kind IN ('schedule', 'manual')),
    running_execution_id uuid,
    last_run_at          timestamptz,
    run_count            bigint      NOT NULL DEFAULT 0,
    failure_count        bigint      NOT NULL DEFAULT 0,
    last_status          text,
    last_error           text
) WITH (fillfactor = 30);  -- claims and starts update in place, with room for the lease (above)

INSERT INTO job_runs (job_id, state, version, scheduled_at, attempt, next_run_at, manual_run_at,
                      locked_until, lock_token, lease_kind, running_execution_id, last_run_at,
                      run_count, failure_count, last_status, last_error)
SELECT id, state, version, scheduled_at, attempt, next_run_at, manual_run_at,
       locked_until, lock_token, lease_kind, running_execution_id, last_run_at,
       run_count, failure_count, last_status, last_error
FROM job_specs;

CREATE INDEX job_runs_due_idx ON job_runs (due_at) WHERE due_at IS NOT NULL;

ALTER TABLE job_specs
    DROP COLUMN due_at,  -- with jobs_due_idx
    DROP COLUMN version,
    DROP COLUMN scheduled_at,
    DROP COLUMN attempt,
    DROP COLUMN next_run_at,
    DROP COLUMN manual_run_at,
    DROP COLUMN locked_until,
    DROP COLUMN lock_token,
    DROP COLUMN lease_kind,
    DROP COLUMN running_execution_id,
    DROP COLUMN last_run_at,
    DROP COLUMN run_count,
    DROP COLUMN failure_count,
    DROP COLUMN last_status,
    DROP COLUMN last_error;
-- Its rows are no longer updated by every run: no room kept for new versions in new pages.
ALTER TABLE job_specs RESET (fillfactor);

CREATE FUNCTION job_runs_state_to_spec() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_specs SET state = NEW.state WHERE id = NEW.job_id AND state IS DISTINCT FROM NEW.state;
    RETURN NULL;
END
$$;

-- The WHEN clause is evaluated without calling the function: a run that leaves the state as it
-- was (a recurring job's) costs a comparison.
CREATE TRIGGER job_runs_state_to_spec AFTER UPDATE OF state ON job_runs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION job_runs_state_to_spec();

CREATE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;

-- An execution inserted without its owner takes it from its job's specification.
CREATE OR REPLACE FUNCTION executions_owner_from_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.owner := (SELECT owner FROM job_specs WHERE id = NEW.job_id);
    RETURN NEW;
END
$$;
