-- 0029: the executions lost before 0028 entered in lost_executions. Its own transaction, after
-- 0028's: the triggers enter every row marked lost since that one committed (a write to
-- executions begun before them held the table's lock, which creating them waited for, so it
-- committed before, and this copy reads it); the copy reads every day kept holding only the lock
-- a read takes, the live writes going on meanwhile. A row both copied and entered is entered once.
INSERT INTO lost_executions (job_id, started_at, seq, id, owner)
SELECT job_id, started_at, seq, id, owner FROM executions WHERE status = 'lost'
ON CONFLICT DO NOTHING;
