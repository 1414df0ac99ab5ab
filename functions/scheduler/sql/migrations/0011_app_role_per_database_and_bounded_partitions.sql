-- 0011: the application's role confined: to a bounded number of day partitions ahead, and to its
-- own database.
--
-- 1. scheduler_maintain_partitions creates at most 7 days ahead (the runner asks for 3). The
--    function holds DDL rights the application's role lacks (SECURITY DEFINER), and took any
--    days_ahead: one call with 400 made 397 partitions, and past 1,600 a page of executions
--    took 929 ms instead of 6 ms (planning reads every partition's catalog entries). Beyond 7 it
--    now refuses. The retention keeps its floor of one day: a higher one would protect nothing,
--    since the same role may DELETE executions (deleting a job deletes its history).
--
-- 2. One application role per database. Roles are cluster-wide, and 0004 made one,
--    scheduler_data, for every scheduler database on a server: the login of one read and wrote
--    the jobs of all the others (local setups, CI, a shared RDS). Each database now gets a
--    NOLOGIN role of its own, scheduler_data_<database> (scheduler_data_role() returns its name),
--    with 0004's privileges on this database's objects only, and scheduler_data loses every
--    privilege here. The logins the migrating session names (scheduler.app_logins, a JSON array:
--    the migrate function names its own) get the new role in this same transaction, so a
--    running function is never refused, and leave scheduler_data, which no longer serves them.
--    A login not named (a shared server's, a hand-made one) loses its access to this database
--    until it is given the role: ensure_login (the migrate function's next step) or a GRANT
--    (README's upgrade note). Only this database's privileges change: scheduler_data keeps those
--    of the databases not yet migrated, each of which this migration closes in its turn.

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

-- The database's role, its privileges, the shared role's taken away, the named logins moved.
DO $$
DECLARE
    db        text := current_database();
    -- A comment on the role ties it to this database, in a shared catalog: ensure_login reads it
    -- to refuse a login that already serves another database, and a role left by a dropped
    -- database of this name is recognised (scheduler.migrations.ROLE_MARKER says the same).
    marker    text := format('scheduler: the application role of database %I', db);
    base      text := 'scheduler_data_' || db;
    candidate text;
    app       text;  -- the database's role, NULL when none could be made
    legacy    oid := (SELECT oid FROM pg_roles WHERE rolname = 'scheduler_data');
    login     text;
    r         record;
    left_over text;
BEGIN
    -- Names are at most 63 bytes: a long database name gives way to its hash (room is kept for
    -- a suffix).
    IF octet_length(base) > 59 THEN
        base := 'scheduler_data_' || md5(db);
    END IF;
    -- The first free name, or one that 0011 made for a database of this name since dropped and
    -- that holds nothing anywhere, has no member and is a member of nothing: reused. A role of
    -- the name made otherwise (by hand, or still serving a database) is never adopted: it could
    -- have members or rights of its own.
    FOR i IN 1..100 LOOP
        candidate := base || CASE WHEN i = 1 THEN '' ELSE '_' || i END;
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = candidate) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', candidate);
                EXECUTE format('COMMENT ON ROLE %I IS %L', candidate, marker);
                app := candidate;
                EXIT;
            EXCEPTION
                -- Made meanwhile by a migration of another database: the next name.
                WHEN duplicate_object OR unique_violation THEN
                    CONTINUE;
                WHEN insufficient_privilege THEN
                    RAISE NOTICE 'no role created for database % (no CREATEROLE): no application role', db;
                    EXIT;
            END;
        ELSIF EXISTS (
            SELECT FROM pg_roles o
            WHERE o.rolname = candidate AND NOT o.rolcanlogin AND NOT o.rolsuper AND NOT o.rolcreaterole
              AND NOT o.rolcreatedb AND NOT o.rolreplication AND NOT o.rolbypassrls
              AND shobj_description(o.oid, 'pg_authid') = marker
              AND NOT EXISTS (SELECT FROM pg_shdepend s
                              WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = o.oid)
              -- (Since Postgres 16 its creator holds it WITH ADMIN OPTION: not a member that counts.)
              AND NOT EXISTS (SELECT FROM pg_auth_members m
                              WHERE (m.roleid = o.oid AND m.member <> (SELECT oid FROM pg_roles WHERE rolname = current_user))
                                 OR m.member = o.oid))
        THEN
            app := candidate;
            EXIT;
        END IF;
    END LOOP;

    IF app IS NOT NULL THEN
        -- 0004's privileges (and 0005's EXECUTE), on this database's objects.
        BEGIN
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', db, app);
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;  -- not the database's owner: PUBLIC's CONNECT (the default) serves
        END;
        EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', app);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %I', app);
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', app);
        EXECUTE format('REVOKE ALL ON schema_migrations FROM %I', app);
        EXECUTE format('GRANT EXECUTE ON FUNCTION scheduler_maintain_partitions(integer, integer, integer) TO %I', app);
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', app);
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO %I', app);
    END IF;

    IF legacy IS NOT NULL THEN
        -- Every privilege of scheduler_data in this database, wherever it sits (privileges an
        -- operator added by hand go too, and are not carried over).
        -- (A REVOKE this user may not make, on another owner's object, is reported below.)
        FOR r IN SELECT format('%s %s', CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                               c.oid::regclass) AS object
                 FROM pg_class c WHERE EXISTS (SELECT FROM aclexplode(c.relacl) a WHERE a.grantee = legacy)
                 UNION ALL
                 SELECT 'FUNCTION ' || p.oid::regprocedure FROM pg_proc p
                 WHERE EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = legacy)
                 UNION ALL
                 SELECT 'SCHEMA ' || quote_ident(n.nspname) FROM pg_namespace n
                 WHERE EXISTS (SELECT FROM aclexplode(n.nspacl) a WHERE a.grantee = legacy)
        LOOP
            BEGIN
                EXECUTE format('REVOKE ALL ON %s FROM scheduler_data', r.object);
            EXCEPTION WHEN insufficient_privilege THEN
                NULL;
            END;
        END LOOP;
        FOR r IN SELECT d.defaclrole::regrole AS owner, d.defaclnamespace::regnamespace AS nsp,
                        CASE d.defaclobjtype WHEN 'r' THEN 'TABLES' WHEN 'S' THEN 'SEQUENCES'
                                             WHEN 'f' THEN 'FUNCTIONS' WHEN 'T' THEN 'TYPES'
                                             ELSE 'SCHEMAS' END AS kind
                 FROM pg_default_acl d
                 WHERE EXISTS (SELECT FROM aclexplode(d.defaclacl) a WHERE a.grantee = legacy)
        LOOP
            BEGIN
                EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %s %s REVOKE ALL ON %s FROM scheduler_data',
                               r.owner, CASE WHEN r.nsp::oid = 0 THEN '' ELSE 'IN SCHEMA ' || r.nsp END, r.kind);
            EXCEPTION WHEN insufficient_privilege THEN
                NULL;  -- another user's defaults: reported below
            END;
        END LOOP;
        BEGIN
            EXECUTE format('REVOKE ALL ON DATABASE %I FROM scheduler_data', db);
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;  -- not the database's owner: 0004 could not grant it either
        END;
        -- pg_shdepend lists what the role still holds in this database (or on it).
        SELECT string_agg(DISTINCT s.classid::regclass::text, ', ') INTO left_over
        FROM pg_shdepend s
        WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = legacy
          AND (s.dbid = (SELECT oid FROM pg_database WHERE datname = db)
               OR (s.classid = 'pg_database'::regclass AND s.objid = (SELECT oid FROM pg_database WHERE datname = db)));
        IF left_over IS NOT NULL THEN
            RAISE WARNING 'scheduler_data still holds privileges in database % (in %): revoke them by hand',
                db, left_over;
        END IF;
    END IF;

    -- The logins that serve this database, as the migrating session names them: the database's
    -- role, and out of scheduler_data (granted directly, as ensure_login did). Secrets Manager's
    -- multi-user rotation alternates between a login and its clone, a member of it (GRANT <name>
    -- TO <name>_clone), and either may be in use: a named clone brings its login along.
    -- Privileges are checked at every statement against the committed catalog (role membership
    -- caches are invalidated at commit): a session open across this transaction goes from
    -- scheduler_data's rights to the new role's when it commits, never through neither. Since
    -- Postgres 16 a GRANT or REVOKE of membership needs ADMIN OPTION on the role, which the
    -- migrating user holds on the roles it created (RDS's master user made both); else a WARNING.
    FOR login IN
        WITH named AS (
            SELECT jsonb_array_elements_text(
                       COALESCE(NULLIF(current_setting('scheduler.app_logins', true), ''), '[]')::jsonb) AS name
        )
        SELECT name FROM named
        UNION
        SELECT left(n.name, -6) FROM named n
        WHERE n.name LIKE '%\_clone'
          AND EXISTS (SELECT FROM pg_auth_members m
                      WHERE m.roleid = to_regrole(quote_ident(left(n.name, -6)))
                        AND m.member = to_regrole(quote_ident(n.name)))
    LOOP
        CONTINUE WHEN NOT EXISTS (SELECT FROM pg_roles WHERE rolname = login);
        -- A login that serves another database through that one's role is not given this one
        -- (ensure_login refuses it too): one login for two databases would join them again.
        IF EXISTS (
            SELECT FROM pg_roles o
            JOIN pg_shdescription d ON d.objoid = o.oid AND d.classoid = 'pg_authid'::regclass
            WHERE d.description LIKE 'scheduler: the application role of database %'
              AND o.rolname IS DISTINCT FROM app
              AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = login)
              AND pg_has_role(login, o.oid, 'MEMBER')
              AND EXISTS (SELECT FROM pg_shdepend s
                          WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = o.oid
                            AND s.dbid <> (SELECT oid FROM pg_database WHERE datname = db)))
        THEN
            RAISE WARNING 'login % serves another database: not given %', login, app;
            CONTINUE;
        END IF;
        BEGIN
            IF app IS NOT NULL AND NOT pg_has_role(login, app, 'MEMBER') THEN
                EXECUTE format('GRANT %I TO %I', app, login);
            END IF;
            IF legacy IS NOT NULL
               AND EXISTS (SELECT FROM pg_auth_members WHERE roleid = legacy AND member = to_regrole(quote_ident(login))) THEN
                EXECUTE format('REVOKE scheduler_data FROM %I', login);
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'login %: its role could not be changed (%): give it % by hand', login, SQLERRM, app;
        END;
    END LOOP;

    -- scheduler_data's other members reached this database through it, and no longer do; which
    -- of them serve it (and not another database of the server) only the operator knows. Not
    -- said of a database made by this same session (0004 applied in it): none served it yet.
    IF legacy IS NOT NULL AND app IS NOT NULL
       AND (SELECT applied_at FROM schema_migrations WHERE version = 4)
           < (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) THEN
        SELECT string_agg(m.member::regrole::text, ', ' ORDER BY m.member::regrole::text) INTO left_over
        FROM pg_auth_members m WHERE m.roleid = legacy AND NOT pg_has_role(m.member, app, 'MEMBER');
        IF left_over IS NOT NULL THEN
            RAISE WARNING 'members of scheduler_data (%) no longer reach database % through it: '
                'GRANT % TO the ones that serve it', left_over, db, quote_ident(app);
        END IF;
    END IF;

    -- A database's copy (CREATE DATABASE ... TEMPLATE) copies its grants, and so this name: the
    -- copy shares the original's role.
    EXECUTE format('CREATE FUNCTION scheduler_data_role() RETURNS name LANGUAGE sql IMMUTABLE AS %L',
                   format('SELECT %L::name', app));
    COMMENT ON FUNCTION scheduler_data_role() IS
        'The application role of this database (migration 0011): its logins are its members. NULL: none.';
END
$$;
