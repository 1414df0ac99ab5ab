-- 0025: an execution of an occurrence that a calendar moved (on_excluded: shift) records where
-- from: the occurrence it was moved from (shifted_from) and the calendar that excluded it
-- (excluded_by), as the preview shows them. Without them, a run at 00:00 after a holiday read in
-- the history as a run of a schedule that never fires at 00:00.
--
-- Expand only: nullable columns without a default are a change of the catalog (no rewrite, on
-- the parent and every day partition alike). Written with the execution's completion
-- (record_shifts); executions recorded before, and every other execution, have NULL.
ALTER TABLE executions ADD COLUMN IF NOT EXISTS shifted_from timestamptz,
                       ADD COLUMN IF NOT EXISTS excluded_by text;
