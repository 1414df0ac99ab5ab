-- 0013: reserved for the schedules branch of issue 33 (several expressions, spread). This
-- placeholder keeps the numbering without a gap on the calendars branch (0014); at the merge the
-- schedules branch's own 0013 replaces it.
SELECT 1;
