-- 0026: the leases of executions whose job was edited while they ran. An edit may move the job's
-- next attempt, and with it due_at, past the lease's end; if that execution's runner then dies,
-- the claim, which reads due rows only, finds the orphan at the job's new time at the earliest
-- (a one-off moved a year on stayed "running" for a year). The edit notes the lease here
-- (watch_lease); the fan-out's check of the jobs with nothing due (lost_while_not_due) reads the
-- notes whose time has passed, marks such an orphan lost and drops the note.
--
-- Expand only: a new table, a row per job edited during a run (a few), kept until its lease
-- ends. job_runs gains no index: one on its lease would end the claim's heap-only updates.
CREATE TABLE IF NOT EXISTS lease_watch (
    job_id uuid        PRIMARY KEY,
    until  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS lease_watch_until_idx ON lease_watch (until);
