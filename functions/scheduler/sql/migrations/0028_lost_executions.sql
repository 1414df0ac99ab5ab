-- 0028: the lost executions of each owner and job, listed without reading the others. A status
-- filter on the executions' listings walked the owner's (or the job's) executions newest first
-- until it had a page: for a rare status it read every day kept, 0.25-0.32 s a page at a million
-- executions. No index of executions may lead with the status: the completion writes it (running
-- to succeeded), and a column in any index, or in a partial index's predicate, ends the heap-only
-- updates that 96% of completions are (0009). "running" needs no copy: each running execution is
-- its job's live run, named by job_runs (running_execution_id, started at last_run_at). "lost"
-- gets one here: a row a lost execution, the key of its execution (job, started_at, seq: one
-- probe of one day's primary key) with its owner and id, the order of GET /v1/executions.
--
-- Triggers keep it, not the statements that mark executions lost: while the migrations run and
-- after a rolled-back deployment the previous code writes against this schema (README, "expand,
-- then contract"), and a row it marked lost must be listed all the same. They fire on a row that
-- is or was lost only: the WHEN conditions are checked in the executor (no function call) for
-- the others, a completion's update among them. The row goes with its execution's delete (a
-- job's delete, the DEFAULT partition's purge); a dropped day partition's rows go with it in
-- scheduler_maintain_partitions, below, which fires no trigger. The rows lost before this
-- migration are copied by the next one (0029), out of this transaction: creating the triggers
-- holds executions' lock, which a copy reading every day would hold for as long as it reads.
CREATE TABLE IF NOT EXISTS lost_executions (
    job_id     uuid        NOT NULL,
    started_at timestamptz NOT NULL,
    seq        bigint      NOT NULL,
    id         uuid        NOT NULL,
    owner      text        COLLATE "C" NOT NULL,
    PRIMARY KEY (job_id, started_at, seq)
);
CREATE INDEX IF NOT EXISTS lost_executions_owner_idx ON lost_executions (owner, started_at DESC, id DESC);

CREATE OR REPLACE FUNCTION lost_executions_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'lost' THEN
        DELETE FROM public.lost_executions
        WHERE job_id = OLD.job_id AND started_at = OLD.started_at AND seq = OLD.seq;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.status = 'lost' THEN
        INSERT INTO public.lost_executions (job_id, started_at, seq, id, owner)
        VALUES (NEW.job_id, NEW.started_at, NEW.seq, NEW.id, NEW.owner)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS executions_lost_inserted ON executions;
DROP TRIGGER IF EXISTS executions_lost_updated ON executions;
DROP TRIGGER IF EXISTS executions_lost_deleted ON executions;
CREATE TRIGGER executions_lost_inserted AFTER INSERT ON executions
    FOR EACH ROW WHEN (NEW.status = 'lost') EXECUTE FUNCTION lost_executions_kept();
CREATE TRIGGER executions_lost_updated AFTER UPDATE ON executions
    FOR EACH ROW WHEN (OLD.status = 'lost' OR NEW.status = 'lost') EXECUTE FUNCTION lost_executions_kept();
CREATE TRIGGER executions_lost_deleted AFTER DELETE ON executions
    FOR EACH ROW WHEN (OLD.status = 'lost') EXECUTE FUNCTION lost_executions_kept();

-- scheduler_maintain_partitions as 0011 made it, and lost_executions kept with the days: a day
-- partition dropped takes its lost rows' entries along, and the rows a new day's partition takes
-- over from DEFAULT keep theirs (their move out of DEFAULT fired its delete; their insert into
-- the partition, not attached yet, fired nothing).
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
    -- The most days after today a call may create: the application's role calls this with its
    -- own arguments, and must not grow the catalog without bound.
    max_days_ahead constant integer := 7;
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
    IF days_ahead IS NULL OR days_ahead < 0 OR days_ahead > max_days_ahead THEN
        RAISE EXCEPTION 'days_ahead must be between 0 and %, not %', max_days_ahead, days_ahead
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('scheduler_maintain_partitions')) THEN
        RETURN NEXT;  -- another caller is at it
        RETURN;
    END IF;

    FOR day IN SELECT d::date FROM generate_series(today, today + days_ahead, interval '1 day') AS d
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
            IF n > 0 THEN  -- the moved rows that are lost: their entries again (0028)
                EXECUTE format('INSERT INTO public.lost_executions (job_id, started_at, seq, id, owner) '
                               'SELECT job_id, started_at, seq, id, owner FROM public.%I WHERE status = %L '
                               'ON CONFLICT DO NOTHING', part, 'lost');
            END IF;
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
            -- Its lost rows' entries (0028), in the same step: the drop fires no trigger.
            DELETE FROM public.lost_executions WHERE started_at >= hi - interval '1 day' AND started_at < hi;
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            skipped := skipped + 1;
        END;
    END LOOP;

    -- The row purge of old, for the DEFAULT partition only: a small batch, oldest first (the
    -- lost rows' entries go with them, by the delete's trigger).
    DELETE FROM public.executions_default
    WHERE ctid IN (SELECT ctid FROM public.executions_default WHERE started_at < cutoff
                   ORDER BY started_at LIMIT default_batch);
    GET DIAGNOSTICS default_purged = ROW_COUNT;
    RETURN NEXT;
END
$$;
