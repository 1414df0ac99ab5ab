-- 0009: an execution costs two index insertions, not three, and its completion is heap-only.
--
-- A claim inserted each execution into three indexes: the primary key (id, started_at), the job's
-- history (job_id, seq) and the owner's (owner, started_at, id). Every lookup of one execution
-- knows its job (a completion, a lost-marking and the locking path all come from the job's row),
-- so the job's history index now serves both: the primary key becomes (job_id, started_at, seq),
-- a point lookup by job and instant, and a job's executions newest first by a backward scan
-- (started_at and seq order a job's executions alike, see list_executions). An execution's id
-- stays unique as before: a random UUID, which the old key, holding started_at beside it, did not
-- enforce either.
--
-- A completion writes a new version of its execution's row, heap-only when it fits on the row's
-- page. A claim's batch of executions shares a page, and at fillfactor 80 the page had room for
-- about a dozen new versions: the rest of the batch's completions went to another page and
-- inserted into every index again (43% heap-only, measured). The day partitions are now made
-- at fillfactor 50: nearly every completion is heap-only (96%), and the space is smaller, not
-- larger (rows written by the runner's statements, then vacuumed: 510 bytes of heap and indexes
-- per execution against 537). Measured with pgbench on the batched path's statements, one
-- client, 7 rounds: Postgres 64.6 -> 54.0 us per job.
--
-- Building the new key reads every day kept once (as 0007's index rebuild); the partitions made
-- before keep their pages, newer pages of today's and the days ahead follow fillfactor 50.

ALTER TABLE executions DROP CONSTRAINT executions_pkey;
DROP INDEX executions_job_seq_idx;
ALTER TABLE executions ADD CONSTRAINT executions_pkey PRIMARY KEY (job_id, started_at, seq);

DO $$
DECLARE
    part text;
BEGIN
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'public.executions'::regclass
    LOOP
        EXECUTE format('ALTER TABLE public.%I SET (fillfactor = 50)', part);
    END LOOP;
END
$$;

-- scheduler_maintain_partitions as 0005 made it, the days ahead created at fillfactor 50.
CREATE OR REPLACE FUNCTION scheduler_maintain_partitions(retention_days integer, days_ahead integer DEFAULT 3,
                                              default_batch integer DEFAULT 10000)
RETURNS TABLE (created integer, dropped integer, default_moved bigint, default_purged bigint, skipped integer)
LANGUAGE plpgsql SECURITY DEFINER
-- Pinned: the definer's rights never resolve a name through a schema the caller may write to
-- (before Postgres 15 everyone may create in public): every table below is named public.x.
SET search_path = pg_catalog, pg_temp
SET timezone = 'UTC'
SET lock_timeout = '100ms'
AS $$
DECLARE
    today   date := (now() AT TIME ZONE 'UTC')::date;
    cutoff  timestamptz := now() - make_interval(days => retention_days);
    day     date;
    part    text;
    lo      timestamptz;
    hi      timestamptz;
    n       bigint;
BEGIN
    created := 0; dropped := 0; default_moved := 0; default_purged := 0; skipped := 0;
    IF retention_days IS NULL OR retention_days < 1 THEN
        RAISE EXCEPTION 'retention_days must be at least 1, not %', retention_days
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('scheduler_maintain_partitions')) THEN
        RETURN NEXT;  -- another caller is at it
        RETURN;
    END IF;

    FOR day IN SELECT d::date FROM generate_series(today, today + GREATEST(days_ahead, 0), interval '1 day') AS d
    LOOP
        part := 'executions_p' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass('public.' || quote_ident(part)) IS NOT NULL;
        lo := day::timestamp AT TIME ZONE 'UTC';
        hi := (day + 1)::timestamp AT TIME ZONE 'UTC';
        BEGIN
            -- Held from the move to the attach (which takes this lock anyway): no insert can land
            -- in DEFAULT for this day in between, which would make the attach fail its check.
            LOCK TABLE public.executions_default IN ACCESS EXCLUSIVE MODE;
            EXECUTE format('CREATE TABLE public.%I (LIKE public.executions INCLUDING DEFAULTS INCLUDING CONSTRAINTS) '
                           'WITH (fillfactor = 50)', part);
            -- Lets ATTACH skip its validation scan.
            EXECUTE format('ALTER TABLE public.%I ADD CONSTRAINT %I CHECK (started_at >= %L AND started_at < %L)',
                           part, part || '_bound', lo, hi);
            EXECUTE format('WITH moved AS (DELETE FROM public.executions_default WHERE started_at >= %L AND started_at < %L '
                           'RETURNING *) INSERT INTO public.%I SELECT * FROM moved', lo, hi, part);
            GET DIAGNOSTICS n = ROW_COUNT;
            default_moved := default_moved + n;
            EXECUTE format('ALTER TABLE public.executions ATTACH PARTITION public.%I FOR VALUES FROM (%L) TO (%L)',
                           part, lo, hi);
            EXECUTE format('ALTER TABLE public.%I DROP CONSTRAINT %I', part, part || '_bound');
            created := created + 1;
        EXCEPTION WHEN lock_not_available OR check_violation THEN
            skipped := skipped + 1;  -- rolled back to the block's start; the next call retries
        END;
    END LOOP;

    FOR part, hi IN
        SELECT c.relname, (to_date(substr(c.relname, 13), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC'
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'public.executions'::regclass AND c.relname ~ '^executions_p[0-9]{8}$'
        ORDER BY c.relname
    LOOP
        EXIT WHEN hi > cutoff;  -- in name order: every later day is newer
        BEGIN
            EXECUTE format('DROP TABLE public.%I', part);
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            skipped := skipped + 1;
        END;
    END LOOP;

    -- The row purge of old, for the DEFAULT partition only: a small batch, oldest first.
    DELETE FROM public.executions_default
    WHERE ctid IN (SELECT ctid FROM public.executions_default WHERE started_at < cutoff
                   ORDER BY started_at LIMIT default_batch);
    GET DIAGNOSTICS default_purged = ROW_COUNT;
    RETURN NEXT;
END
$$;
