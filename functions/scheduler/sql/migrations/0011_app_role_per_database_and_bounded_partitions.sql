-- 0011: the application's role confined: to a bounded number of day partitions ahead, and to its
-- own database.
--
-- 1. scheduler_maintain_partitions creates at most 7 days ahead (the runner asks for 3). The
--    function holds DDL rights the application's role lacks (SECURITY DEFINER), and took any
--    days_ahead: one call with 400 made 397 partitions, and past 1,600 a page of executions
--    took 929 ms instead of 6 ms (planning reads every partition's catalog entries). Beyond 7 it
--    now refuses. The retention keeps its floor of one day: a higher one would protect nothing,
--    since the same role may DELETE executions (deleting a job deletes its history).

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

-- The partitions made more than 7 days ahead before the cap (by a role that asked for them) and
-- holding no row go: the function never makes them again, and each one slows the planning of
-- every read of executions until retention drops it, a year or more later. One holding rows
-- stays (a NOTICE names it). Dropping takes executions' lock: on a database that has them, this
-- waits for the readers of the moment, as any migration's DDL does.
DO $$
DECLARE
    part text;
    used boolean;
BEGIN
    FOR part IN
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'public.executions'::regclass AND c.relname ~ '^executions_p[0-9]{8}$'
          AND to_date(substr(c.relname, 13), 'YYYYMMDD') > (now() AT TIME ZONE 'UTC')::date + 7
        ORDER BY c.relname
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT FROM public.%I)', part) INTO used;
        IF used THEN
            RAISE NOTICE 'partition % is more than 7 days ahead but holds rows: kept', part;
        ELSE
            EXECUTE format('DROP TABLE public.%I', part);
        END IF;
    END LOOP;
END
$$;
