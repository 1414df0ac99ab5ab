-- 0014: calendars, per owner, and a job's exclude_calendars / on_excluded.
--
-- A calendar is what its owner defined (timezone, dates, ranges, yearly, or ics), kept as given
-- in "definition" (jsonb) and compiled by the planning code when a job's next time is computed.
-- Its name is unique per owner (code point order, as job names since 0007); version counts its
-- changes (the planning code caches a compiled calendar by owner, name and version).
CREATE TABLE IF NOT EXISTS calendars (
    owner      text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    timezone   text        NOT NULL DEFAULT 'UTC',
    definition jsonb       NOT NULL,
    version    integer     NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, name)
);

-- Expand only: columns with a constant default are a change of the catalog (no table rewrite).
-- A job without calendars has the empty array: its planning reads no calendar (no extra query).
ALTER TABLE job_specs ADD COLUMN IF NOT EXISTS exclude_calendars text[] NOT NULL DEFAULT '{}';
ALTER TABLE job_specs ADD COLUMN IF NOT EXISTS on_excluded text NOT NULL DEFAULT 'skip'
    CHECK (on_excluded IN ('skip', 'shift'));

-- The jobs that name a calendar (a calendar's DELETE answers 409 naming them; its PUT replans
-- them): only the jobs that name one are in the index.
CREATE INDEX IF NOT EXISTS job_specs_exclude_calendars ON job_specs USING gin (exclude_calendars)
    WHERE exclude_calendars <> '{}';

-- The view jobs (0010, 0013) with the two columns at its end (CREATE OR REPLACE VIEW may add columns
-- after the existing ones).
CREATE OR REPLACE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion, s.schedules, s.spread,
       s.exclude_calendars, s.on_excluded
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;
