-- 0018: per-target limits. A job's "limits" ({"key", "max_in_flight", "per_second"}; NULL for a
-- job without, the common case) bound the deliveries to one target key (by default the target's
-- origin) across every runner, fan-out and executor: a delivery takes a slot (target_slots)
-- before it calls the target and gives it back when it ends. A delivery that finds the key full
-- waits for a slot, and its execution says so (waited_ms, waited_for).
--
-- Claims and completions are unchanged: a started row carries the job's limits (NULL for most
-- jobs) and only a job with limits reads or writes these tables.
ALTER TABLE job_specs ADD COLUMN IF NOT EXISTS limits jsonb;

CREATE OR REPLACE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion, s.schedules, s.spread,
       s.exclude_calendars, s.on_excluded, s.pause_note, s.pause_until, s.paused_by, s.paused_at,
       s.on_success, s.on_failure, s.on_complete, s.alerts, s.limits
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;

-- How long a delivery waited for its target's slot, and why (catalog-only: nullable, no default).
ALTER TABLE executions ADD COLUMN IF NOT EXISTS waited_ms integer;
ALTER TABLE executions ADD COLUMN IF NOT EXISTS waited_for text;

-- One row per key: its limits as last given by a delivery (the row a slot's taker locks, so that
-- the takers of one key count the slots one at a time).
CREATE TABLE IF NOT EXISTS target_limits (
    key           text PRIMARY KEY,
    max_in_flight integer,
    per_second    double precision,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- A slot: held from acquired_at until released_at (or until, its lease: a runner that died
-- frees its slots when their lease ends). Rows are kept a second after their release, for the
-- per_second count (slots acquired in the last second), then deleted by the next taker.
CREATE TABLE IF NOT EXISTS target_slots (
    token       uuid        PRIMARY KEY,
    key         text        NOT NULL,
    job_id      uuid        NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    until       timestamptz NOT NULL,
    released_at timestamptz
);
CREATE INDEX IF NOT EXISTS target_slots_key_idx ON target_slots (key, acquired_at);
