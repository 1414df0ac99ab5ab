-- The privileges of the functions' database login: least privilege, read and write the
-- scheduler's rows, no DDL (the master user keeps that, for the migrations only).
--
-- They sit on a NOLOGIN role, scheduler_data. The login (scheduler_app, and the clone that
-- Secrets Manager's multi-user rotation alternates with) is a member of it, created by the
-- migrate function from its secret: no password is ever written in SQL.
--
-- Roles are cluster-wide: scheduler_data may exist already (another database on the server, an
-- earlier run, a concurrent migration of another database), and a migrating user without
-- CREATEROLE (some local setups) skips all of this with a notice: the code then connects as
-- that user, as before.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'scheduler_data') THEN
        BEGIN
            CREATE ROLE scheduler_data NOLOGIN;
        EXCEPTION
            -- Two databases migrated at once: the other one created it first.
            WHEN duplicate_object OR unique_violation THEN NULL;
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'role scheduler_data not created (no CREATEROLE): no application role';
                RETURN;
        END;
    END IF;
    BEGIN
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO scheduler_data', current_database());
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;  -- not the database's owner: PUBLIC's CONNECT (the default) serves
    END;
    GRANT USAGE ON SCHEMA public TO scheduler_data;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO scheduler_data;
    GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO scheduler_data;
    -- The migrations' own record is not the application's business.
    REVOKE ALL ON schema_migrations FROM scheduler_data;
    -- Tables and sequences of later migrations (created by this same migrating user) get the
    -- same rights without a grant of their own.
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO scheduler_data;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO scheduler_data;
END
$$;
