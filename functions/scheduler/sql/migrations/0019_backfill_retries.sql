-- 0019: a backfill delivery that fails is retried under its job's retry policy, as a scheduled
-- occurrence is (issue 33, item 4's leftover). The retry to come is the backfill's own state: the
-- occurrence (retry_of), the attempt it will be (retry_attempt), when (retry_at: NULL when none is
-- waiting) and when its first attempt started (retry_since: max_age_seconds counts from it, a
-- backfill's occurrences being past by design). pump_backfills hands a waiting retry over before
-- the next occurrence, through the job's manual request as every delivery, so one run at a time
-- holds and the backfill stays in order.
--
-- Expand only: nullable columns without a default, a change of the catalog. Claims, starts and
-- completions of jobs without a failed backfill delivery neither read nor write them.
ALTER TABLE backfills
    ADD COLUMN IF NOT EXISTS retry_of      timestamptz,
    ADD COLUMN IF NOT EXISTS retry_attempt integer,
    ADD COLUMN IF NOT EXISTS retry_at      timestamptz,
    ADD COLUMN IF NOT EXISTS retry_since   timestamptz;
