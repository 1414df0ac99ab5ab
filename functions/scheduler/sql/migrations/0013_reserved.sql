-- 0013: reserved. Issue 33's branches were given 0013 to 0015 at once, and this branch
-- (issue33-runs) uses 0015 only; the numbers must run without gaps, so this placeholder holds
-- its place. When the branch that owns 0013 is merged, its migration replaces this file.
SELECT 1;
