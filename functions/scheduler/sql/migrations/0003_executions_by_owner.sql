-- 0003: executions listed across a caller's jobs (GET /v1/executions), and after_completion.
--
-- The listing reads one owner's executions newest first. A join to jobs cannot give that order
-- from an index (it would merge the histories of every job of the owner, or walk the whole
-- table's newest rows filtering other owners out), so each execution carries its job's owner
-- (a job's owner never changes) and one index serves the first page and every next one: equality
-- on owner, then the keyset order (started_at DESC, id DESC). A page reads about `limit` index
-- entries whatever the size of the table or the number of the owner's jobs.
ALTER TABLE executions ADD COLUMN owner text;

UPDATE executions e SET owner = j.owner FROM jobs j WHERE j.id = e.job_id;

ALTER TABLE executions ALTER COLUMN owner SET NOT NULL;

-- The runner's insert (record_started in queries.sql) writes the owner itself. Any other writer
-- that leaves it out gets it from the job here, so no insert can forget it; the WHEN clause is
-- checked without calling the function, so the runner's inserts pay nothing for it.
CREATE FUNCTION executions_owner_from_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.owner := (SELECT owner FROM jobs WHERE id = NEW.job_id);
    RETURN NEW;
END
$$;

CREATE TRIGGER executions_owner_from_job BEFORE INSERT ON executions
    FOR EACH ROW WHEN (NEW.owner IS NULL) EXECUTE FUNCTION executions_owner_from_job();

CREATE INDEX executions_owner_started_idx ON executions (owner, started_at DESC, id DESC);

-- A completed job (a one-off that ran, or past its end_at) with 'delete' is deleted with its
-- executions when its last execution is recorded.
ALTER TABLE jobs ADD COLUMN after_completion text NOT NULL DEFAULT 'keep'
    CHECK (after_completion IN ('keep', 'delete'));
