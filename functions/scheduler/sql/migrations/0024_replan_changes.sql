-- 0024: a job's change log records a calendar's replan. Replacing a calendar computes again the
-- occurrence in hand of every job that names it; that write moves the job's version on, so a
-- client's If-Match made before it fails. The log now says why: an entry "replan", by the caller
-- who replaced the calendar, its diff the calendar's version and the occurrence that moved.
-- NOT VALID, then VALIDATE: the check is swapped without holding an exclusive lock while every
-- entry already there is read (they all pass: the new set is the old one and more).
ALTER TABLE job_changes DROP CONSTRAINT IF EXISTS job_changes_action_check;
ALTER TABLE job_changes ADD CONSTRAINT job_changes_action_check
    CHECK (action IN ('create', 'update', 'pause', 'resume', 'run', 'delete', 'replan')) NOT VALID;
ALTER TABLE job_changes VALIDATE CONSTRAINT job_changes_action_check;
