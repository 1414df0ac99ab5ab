-- 0022: a deployed executor hands a limited delivery back rather than wait in its Lambda. When a
-- job's target key stays full for longer than a short wait, its start is undone (the running
-- execution removed, the attempt not counted) and its lease shortened to a pause, after which a
-- fan-out claims it again: no executor sleeps through a wait for a slot, as none sleeps through a
-- retry's backoff. The row keeps when the wait began and for what, and the executor's start that
-- finally delivers writes them on its execution (waited_ms, waited_for) and clears them. Local
-- mode never hands back (its waiting room waits without a thread): its claims leave them alone.
--
-- Catalog-only (nullable, no default); NULL for every job that never waited, and for a job
-- between its waits.
ALTER TABLE job_runs ADD COLUMN IF NOT EXISTS slot_wait_since timestamptz;
ALTER TABLE job_runs ADD COLUMN IF NOT EXISTS slot_wait_for text;
