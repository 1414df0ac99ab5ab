-- 0015: a pause with a note and an end, a manual run with overrides, and the occurrences that did
-- not run on record (issue 33, items 5 to 7).
--
-- Expand only, as 0012: every column added is nullable and has no default, a change of the
-- catalog (no table rewrite, on the parent of executions and every day partition alike).
--
-- job_specs: who paused a job, when, why (pause_note) and until when (pause_until: the runner
-- resumes it then, under its missed-run policy). The API writes them with the pause; the partial
-- index holds the paused jobs with an end only, so the runner's look for pauses that ended
-- (expired_pauses) reads those few, whatever the size of the table.
ALTER TABLE job_specs
    ADD COLUMN IF NOT EXISTS pause_note  text,
    ADD COLUMN IF NOT EXISTS pause_until timestamptz,
    ADD COLUMN IF NOT EXISTS paused_by   text,
    ADD COLUMN IF NOT EXISTS paused_at   timestamptz;
CREATE INDEX IF NOT EXISTS job_specs_pause_until_idx ON job_specs (pause_until) WHERE pause_until IS NOT NULL;

-- job_runs: the overrides of the manual run requested ({"deliver": ..., "shown": ...}: what the
-- delivery uses, its credential-like header values as secret-box tokens, and the same with those
-- values masked, which the execution records). Not indexed: a claim or a start that leaves it
-- alone stays a heap-only update.
ALTER TABLE job_runs ADD COLUMN IF NOT EXISTS manual_overrides jsonb;

-- executions: the overrides a manual run was delivered with (masked), and the skipped rows: an
-- occurrence, or a run of them (skipped_count), that did not run, and why (skip_reason).
ALTER TABLE executions
    ADD COLUMN IF NOT EXISTS overrides     jsonb,
    ADD COLUMN IF NOT EXISTS skip_reason   text,
    ADD COLUMN IF NOT EXISTS skipped_count integer;

-- The status and trigger checks widened ('skipped'; 'backfill' for the backfill of item 4). The
-- new checks are NOT VALID: every row written before satisfies the narrower check, so nothing is
-- read (a valid check on the partitioned table would scan every day kept, under its lock).
-- Rows written from now on are checked.
ALTER TABLE executions DROP CONSTRAINT IF EXISTS executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'lost', 'skipped')) NOT VALID;
ALTER TABLE executions DROP CONSTRAINT IF EXISTS executions_trigger_check;
ALTER TABLE executions ADD CONSTRAINT executions_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'retry', 'backfill')) NOT VALID;
ALTER TABLE executions ADD CONSTRAINT executions_skip_reason_check
    CHECK (skip_reason IN ('paused', 'overlap', 'window', 'calendar', 'missed')) NOT VALID;

-- The view jobs (0010, 0013, 0014) with the pause's columns at its end (CREATE OR REPLACE VIEW may only add
-- columns there; its privileges are kept).
CREATE OR REPLACE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion, s.schedules, s.spread,
       s.exclude_calendars, s.on_excluded, s.pause_note, s.pause_until, s.paused_by, s.paused_at
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;

-- backfills (issue 33, item 4): the occurrences of a past range a job is to run, delivered one at a
-- time through the job's manual-run request (so through its lease: never beside a live run), at
-- most one every interval_seconds. position counts those handed over; finished_at is set with the
-- last. Deleted with the job.
CREATE TABLE IF NOT EXISTS backfills (
    id               uuid          PRIMARY KEY,
    job_id           uuid          NOT NULL REFERENCES job_specs (id) ON DELETE CASCADE,
    owner            text          NOT NULL,
    occurrences      timestamptz[] NOT NULL,
    position         integer       NOT NULL DEFAULT 0,
    interval_seconds double precision NOT NULL DEFAULT 1,
    next_at          timestamptz   NOT NULL DEFAULT now(),
    created_at       timestamptz   NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
-- The runner's look for the backfills with a delivery to hand over reads the unfinished ones only.
CREATE INDEX IF NOT EXISTS backfills_next_idx ON backfills (next_at) WHERE finished_at IS NULL;
CREATE INDEX IF NOT EXISTS backfills_job_idx ON backfills (job_id);
