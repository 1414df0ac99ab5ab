-- 0015: reserved for a migration of a branch developed alongside (issue 33/34); a no-op here so
-- that 0016 applies in order. At the merge, that branch's 0015 replaces this file.
SELECT 1;
