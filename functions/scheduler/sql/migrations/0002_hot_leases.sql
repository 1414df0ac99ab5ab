-- 0002: leases and starts become heap-only-tuple (HOT) updates.
--
-- A claim and a start write only lease columns (lock_token, locked_until, lease_kind,
-- running_execution_id, attempt, last_run_at). When none of them is indexed and the page has
-- room, Postgres writes the new row version in the same page without touching any index: two of
-- a run's three writes to its job then skip the six index insertions. So the index on
-- locked_until goes (next_due_in reads the claim's index instead), and pages keep half their
-- room free, so a claim can lease a whole page of jobs in place.
DROP INDEX jobs_lease_idx;
ALTER TABLE jobs SET (fillfactor = 50);
