-- 0027: a job's change log records a backfill (POST /v1/jobs/{id}/backfill): who asked for which
-- past range, as a run now is recorded. An entry "backfill", its diff the range and the count of
-- occurrences queued; the job's version unchanged (a backfill changes no field of the job).
-- NOT VALID, then VALIDATE, as 0024: no exclusive lock held while the entries are read.
ALTER TABLE job_changes DROP CONSTRAINT IF EXISTS job_changes_action_check;
ALTER TABLE job_changes ADD CONSTRAINT job_changes_action_check
    CHECK (action IN ('create', 'update', 'pause', 'resume', 'run', 'delete', 'replan', 'backfill')) NOT VALID;
ALTER TABLE job_changes VALIDATE CONSTRAINT job_changes_action_check;
