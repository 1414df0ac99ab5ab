-- 0001: jobs and their executions.

CREATE TABLE jobs (
    id                   uuid        PRIMARY KEY,
    owner                text        NOT NULL,
    name                 text        NOT NULL,
    description          text,
    tags                 text[]      NOT NULL DEFAULT '{}',
    schedule             text,
    run_at               timestamptz,
    timezone             text        NOT NULL DEFAULT 'UTC',
    start_at             timestamptz,
    end_at               timestamptz,
    -- The target as the API accepted it, with its secrets encrypted by the secret box.
    target               jsonb       NOT NULL,
    retry                jsonb       NOT NULL,
    missed_runs          text        NOT NULL DEFAULT 'run_once'
                                     CHECK (missed_runs IN ('skip', 'run_once', 'run_all')),
    state                text        NOT NULL DEFAULT 'active'
                                     CHECK (state IN ('active', 'paused', 'completed')),
    version              integer     NOT NULL DEFAULT 1,

    -- The occurrence in hand (scheduled_at), the attempts made at it so far, and when the
    -- next attempt runs (next_run_at: the occurrence itself, or a retry's time).
    scheduled_at         timestamptz,
    attempt              integer     NOT NULL DEFAULT 0,
    next_run_at          timestamptz,
    -- A run requested by POST /run, served before the schedule, paused or not.
    manual_run_at        timestamptz,
    -- What the claim looks at. Generated, so no write can forget to keep it in step:
    -- NULL when nothing is due (a paused or completed job without a manual run).
    due_at               timestamptz GENERATED ALWAYS AS (
                             LEAST(manual_run_at, CASE WHEN state = 'active' THEN next_run_at END)
                         ) STORED,

    -- The lease: who holds the job and until when. A completion only counts with the token.
    locked_until         timestamptz,
    lock_token           uuid,
    lease_kind           text        CHECK (lease_kind IN ('schedule', 'manual')),
    running_execution_id uuid,

    last_run_at          timestamptz,
    run_count            bigint      NOT NULL DEFAULT 0,
    failure_count        bigint      NOT NULL DEFAULT 0,
    last_status          text,
    last_error           text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT jobs_owner_name_key UNIQUE (owner, name),
    CONSTRAINT jobs_one_schedule CHECK ((schedule IS NULL) <> (run_at IS NULL))
);

-- The claim's index: paused and completed jobs are not in it, and the claim reads it as a range
-- (due_at <= now()), so a claim's cost follows the due jobs, not the table.
CREATE INDEX jobs_due_idx ON jobs (due_at) WHERE due_at IS NOT NULL;
-- Held leases only (few rows): when the next one expires.
CREATE INDEX jobs_lease_idx ON jobs (locked_until) WHERE locked_until IS NOT NULL;
CREATE INDEX jobs_owner_state_idx ON jobs (owner, state, name);
CREATE INDEX jobs_tags_idx ON jobs USING gin (tags);

CREATE TABLE executions (
    id               uuid        PRIMARY KEY,
    -- A total order for newest-first pages, cheaper and safer than timestamps.
    seq              bigserial   NOT NULL,
    job_id           uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    scheduled_at     timestamptz NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    attempt          integer     NOT NULL,
    trigger          text        NOT NULL CHECK (trigger IN ('schedule', 'manual', 'retry')),
    status           text        NOT NULL
                                 CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'lost')),
    http_status      integer,
    response_excerpt text,
    error            text,
    duration_ms      integer
);

CREATE INDEX executions_job_seq_idx ON executions (job_id, seq DESC);
CREATE INDEX executions_started_idx ON executions (started_at);
