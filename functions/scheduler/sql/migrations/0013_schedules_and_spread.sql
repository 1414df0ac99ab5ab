-- 0013: a job may list several expressions (schedules: their union, instead of schedule) and
-- spread its occurrences over a window after them (spread: {"window_seconds", "mode"}).
--
-- Expand only: two nullable columns without a default are a change of the catalog (no rewrite
-- of job_specs). A job without them reads NULL, as before. The view jobs gains them at its end
-- (CREATE OR REPLACE VIEW may only add columns after the ones it has).
ALTER TABLE job_specs ADD COLUMN IF NOT EXISTS schedules text[];
ALTER TABLE job_specs ADD COLUMN IF NOT EXISTS spread jsonb;

-- Exactly one of schedule, schedules and run_at (was: of schedule and run_at). The migration is
-- one transaction, so the check of the rows already there scans job_specs under the lock the
-- ALTER took (job_specs only: claims and completions write job_runs, but read the spec, so they
-- wait for the scan, which reads the table once).
ALTER TABLE job_specs DROP CONSTRAINT IF EXISTS jobs_one_schedule;
ALTER TABLE job_specs ADD CONSTRAINT jobs_one_schedule CHECK (num_nonnulls(schedule, schedules, run_at) = 1);

CREATE OR REPLACE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion, s.schedules, s.spread
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;
