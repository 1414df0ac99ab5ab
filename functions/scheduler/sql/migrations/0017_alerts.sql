-- 0017: alert rules on a job, the state of their incidents, and the alert deliveries.
--
-- job_specs.alerts holds the rules the API accepted (a JSON array; NULL for a job without any,
-- the common case), with their targets' secrets sealed as a job target's are. The view jobs
-- gains the column at its end (CREATE OR REPLACE keeps the view's grants and its columns).
--
-- Nothing of the hot path changes: claims and completions neither read nor write these tables.
-- A sweep (scheduler.runner.alerts, from every runner loop) reads the executions of the jobs
-- with rules, past a watermark kept per job in alert_states, and decides there; the partial
-- index below lets it find those jobs without reading the others.
ALTER TABLE job_specs ADD COLUMN IF NOT EXISTS alerts jsonb;

CREATE OR REPLACE VIEW jobs AS
SELECT s.id, s.owner, s.name, s.description, s.tags, s.schedule, s.run_at, s.timezone, s.start_at,
       s.end_at, s.target, s.retry, s.missed_runs, s.state, r.version, r.scheduled_at, r.attempt,
       r.next_run_at, r.manual_run_at, r.due_at, r.locked_until, r.lock_token, r.lease_kind,
       r.running_execution_id, r.last_run_at, r.run_count, r.failure_count, r.last_status,
       r.last_error, s.created_at, s.updated_at, s.after_completion, s.schedules, s.spread,
       s.exclude_calendars, s.on_excluded, s.pause_note, s.pause_until, s.paused_by, s.paused_at,
       s.on_success, s.on_failure, s.on_complete, s.alerts
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id;

CREATE INDEX IF NOT EXISTS job_specs_with_alerts_idx ON job_specs (id) WHERE alerts IS NOT NULL;

-- Per job with rules: how far its executions were read (the last finished one, by its key:
-- started_at, seq), the failures in a row so far, and the incident open (if any) with the rules
-- that fired in it. One row per job; a sweep holds it (FOR UPDATE SKIP LOCKED) while it decides,
-- so two runners never both fire for one incident. No foreign key (as executions, 0006): a
-- deleted job's row is removed by the hourly purge of the alerts, and job_specs stays truncatable
-- alone (the benchmarks do).
CREATE TABLE IF NOT EXISTS alert_states (
    job_id            uuid        PRIMARY KEY,
    seen_started_at   timestamptz,
    seen_seq          bigint,
    failures_in_row   integer     NOT NULL DEFAULT 0,
    incident_id       uuid,
    incident_opened_at timestamptz,
    fired             text[]      NOT NULL DEFAULT '{}',  -- the rules (their keys) fired in the incident
    checked_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per alert to send: what fired (the rule, the incident, the execution), the target it
-- goes to (copied from the rule, secrets sealed, so a deleted job's alerts are still sent), the
-- template variables, and its delivery: pending until delivered or given up, retried with a
-- backoff (next_attempt_at), leased while a runner sends it (locked_until). Kept after the job
-- is deleted (no foreign key), for the retention period.
CREATE TABLE IF NOT EXISTS alert_deliveries (
    id              uuid        PRIMARY KEY,
    owner           text        NOT NULL,
    job_id          uuid        NOT NULL,
    job_name        text        NOT NULL,
    rule_key        text        NOT NULL,  -- the rule's place in the job's alerts, its on and threshold
    rule_on         text        NOT NULL,
    threshold       double precision,
    event           text        NOT NULL CHECK (event IN ('fired', 'recovered')),
    incident_id     uuid        NOT NULL,
    execution_id    uuid,
    target          jsonb       NOT NULL,
    vars            jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    locked_until    timestamptz,
    delivered_at    timestamptz,
    last_error      text,
    http_status     integer,
    -- One alert per rule per incident, whatever two sweeps decide.
    UNIQUE (incident_id, rule_key, event)
);

CREATE INDEX IF NOT EXISTS alert_deliveries_pending_idx ON alert_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS alert_deliveries_owner_idx ON alert_deliveries (owner, created_at DESC, id);
