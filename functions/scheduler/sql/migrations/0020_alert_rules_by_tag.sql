-- 0020: alert rules on every job with a tag (issue 34). An owner's named rule set says: every job
-- of mine that carries this tag (now, or tagged later) has these alert rules too. The rules are
-- what the API accepted for a job's "alerts" (the same validation; targets' secrets sealed).
--
-- Nothing of the hot path changes: claims and completions read neither table. The alert sweep
-- finds the jobs a rule set covers through the tag index of 0008 (job_specs.tags, GIN, the jobs
-- with tags only), and decides their rules with the job's own, under the job's alert state
-- (alert_states, 0017): one incident per job, each rule firing at most once in it.
CREATE TABLE IF NOT EXISTS alert_rules (
    owner      text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    tag        text        NOT NULL,
    alerts     jsonb       NOT NULL,  -- the rules, as a job's "alerts" (secrets sealed)
    version    integer     NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, name)
);

-- The alerts a rule set fired name it (NULL: the job's own rules). Catalog-only: nullable, no default.
ALTER TABLE alert_deliveries ADD COLUMN IF NOT EXISTS rule_name text;
