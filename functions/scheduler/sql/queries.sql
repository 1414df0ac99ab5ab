-- Named queries of the store. Each starts with a "-- name: <name>" line; scheduler.sql loads
-- them into a dict. Parameters use psycopg's %(name)s style. Every time comes from now():
-- the database clock, so runners with skewed clocks still agree.

-- name: now
SELECT now() AS now;

-- fragment: job_row
-- The columns of the view jobs (migration 0010), from a "spec" row of job_specs and a "run" row of
-- job_runs: what an insert, an update or a locking read returns. The state is the run's, the
-- spec's copy being written after the statement that changes it (job_runs_state_to_spec).
spec.id, spec.owner, spec.name, spec.description, spec.tags, spec.schedule, spec.run_at, spec.timezone,
spec.start_at, spec.end_at, spec.target, spec.retry, spec.missed_runs, run.state, run.version,
run.scheduled_at, run.attempt, run.next_run_at, run.manual_run_at, run.due_at, run.locked_until,
run.lock_token, run.lease_kind, run.running_execution_id, run.last_run_at, run.run_count,
run.failure_count, run.last_status, run.last_error, spec.created_at, spec.updated_at,
spec.after_completion, spec.schedules, spec.spread, spec.exclude_calendars, spec.on_excluded,
spec.pause_note, spec.pause_until, spec.paused_by, spec.paused_at, spec.on_success, spec.on_failure,
spec.on_complete, spec.alerts, spec.limits

-- name: insert_job
-- The specification, and its run state when the name was free (its insert sees no spec row
-- otherwise): nothing is returned for a name taken.
WITH spec AS (
    INSERT INTO job_specs (id, owner, name, description, tags, schedule, run_at, timezone, start_at,
                           end_at, target, retry, missed_runs, state, created_at, updated_at,
                           after_completion, schedules, spread, exclude_calendars, on_excluded, alerts,
                           limits, on_success, on_failure, on_complete)
    VALUES (%(id)s, %(owner)s, %(name)s, %(description)s, %(tags)s, %(schedule)s, %(run_at)s,
            %(timezone)s, %(start_at)s, %(end_at)s, %(target)s, %(retry)s, %(missed_runs)s, %(state)s,
            %(created_at)s, %(created_at)s, %(after_completion)s, %(schedules)s, %(spread)s,
            %(exclude_calendars)s, %(on_excluded)s, %(alerts)s, %(limits)s, %(on_success)s, %(on_failure)s,
            %(on_complete)s)
    ON CONFLICT ON CONSTRAINT jobs_owner_name_key DO NOTHING
    RETURNING *
), run AS (
    INSERT INTO job_runs (job_id, state, scheduled_at, next_run_at)
    SELECT id, state, %(scheduled_at)s, %(next_run_at)s FROM spec
    RETURNING *
), skipped AS (
    -- A one-off outside its window, on record as skipped (0015).
    {{ insert_skips }}
    FROM run, jsonb_array_elements(%(skips)s::jsonb) AS s
)
SELECT {{ job_row }} FROM spec JOIN run ON run.job_id = spec.id;

-- name: get_job
SELECT * FROM jobs WHERE id = %(id)s AND owner = %(owner)s;

-- name: get_job_for_update
-- The job, held for an edit or a delete: its run state's row. The lock order of a job's rows:
-- a statement that locks both locks its job_runs row first, then its job_specs row, since a
-- completion that ends a job holds the first when its trigger writes the second (the other order
-- could deadlock with it). The run state's row lock is the job's lock: claims and starts take it
-- (FOR UPDATE SKIP LOCKED, their UPDATE), and nothing writes a job without it.
SELECT {{ job_row }}, now() AS db_now
FROM job_runs run JOIN job_specs spec ON spec.id = run.job_id
WHERE run.job_id = %(id)s AND spec.owner = %(owner)s
FOR UPDATE OF run;

-- name: list_jobs
-- Keyset pagination on (owner, name): name is unique per owner, so a page boundary is exact
-- and rows inserted meanwhile can neither repeat nor push a row off a page. Planned with its
-- values (never prepared: Store.list_jobs), so that a prefix is a range of the (owner, name)
-- index (names in code point order, 0007: those that begin with it lie from it to it followed
-- by the last code point), not a filter of every one of the owner's jobs.
SELECT * FROM jobs
WHERE owner = %(owner)s
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
  -- tags <> '{}' lets the planner read the tag index, which holds only jobs with tags (0008).
  AND (%(tag)s::text IS NULL OR (tags @> ARRAY[%(tag)s::text] AND tags <> '{}'))
  AND (%(name_prefix)s::text IS NULL OR (name >= %(name_prefix)s::text AND name < %(name_prefix)s::text || chr(1114111)
       AND left(name, length(%(name_prefix)s::text)) = %(name_prefix)s::text))
  AND (%(after_name)s::text IS NULL OR name > %(after_name)s::text)
ORDER BY name
LIMIT %(limit)s;

-- fragment: mark_lost
-- After an "orphan" CTE (job_id, execution_id: executions whose lease expired while they ran, so
-- their runner died or stalled, and started_at: its job's last_run_at, since start_execution and
-- claim_and_start set both to the same now() and nothing else writes running_execution_id, so
-- job and instant name the row, one probe of one day's primary key): those still running are
-- marked lost. The bounds on started_at are the orphans' earliest and latest, computed before the
-- update runs: with no orphan (nearly every claim) both are NULL and every partition is pruned
-- at run time, so nothing of executions is read. Without them the plan could scan today's
-- partition for its first running row before finding there is no orphan to join it with: a
-- generic plan made while the partition was small did, on every claim (0.35 ms a claim at 2,500
-- rows, growing with the day's executions).
lost AS (
    UPDATE executions e
    SET status = 'lost', finished_at = now(),
        duration_ms = (EXTRACT(EPOCH FROM now() - e.started_at) * 1000)::integer,
        error = 'the lease expired before the execution finished (runner lost)'
    FROM orphan
    WHERE e.job_id = orphan.job_id AND e.started_at = orphan.started_at AND e.id = orphan.execution_id
      AND e.status = 'running'
      AND e.started_at BETWEEN (SELECT min(started_at) FROM orphan) AND (SELECT max(started_at) FROM orphan)
    RETURNING e.id
)

-- name: update_job
-- An edit, pause or resume, planned before the statement (scheduler.service) from the job as it
-- was read at version %(version)s: written only if the job is still that version and, when a
-- plan is given (%(reschedule)s), still has the run state it was planned from (a completion
-- moves the occurrence in hand without a new version). Nothing is written otherwise, and the
-- caller reads the job again. The run state's row is locked first (the lock order: see
-- get_job_for_update), for this statement only: both tables are written from the row it holds,
-- so they cannot disagree. Every column the API can change is written; the version moves on by one.
WITH current AS (
    SELECT r.* FROM job_runs r JOIN job_specs s ON s.id = r.job_id
    WHERE r.job_id = %(id)s AND s.owner = %(owner)s
    FOR UPDATE OF r
), checked AS (
    SELECT * FROM current
    WHERE version = %(version)s
      AND (NOT %(reschedule)s
           OR (state, scheduled_at, attempt, next_run_at)
              IS NOT DISTINCT FROM (%(was_state)s::text, %(was_scheduled_at)s::timestamptz,
                                    %(was_attempt)s::integer, %(was_next_run_at)s::timestamptz))
), orphan AS (
    -- An execution whose lease expired is over, as the claim would find (a paused job is not
    -- claimed again, so its orphan would otherwise stay "running").
    SELECT c.job_id, c.running_execution_id AS execution_id, c.last_run_at AS started_at
    FROM checked c
    WHERE c.running_execution_id IS NOT NULL AND c.locked_until < now()
), {{ mark_lost }}, spec AS (
    UPDATE job_specs
    SET name = %(name)s, description = %(description)s, tags = %(tags)s, schedule = %(schedule)s,
        run_at = %(run_at)s, timezone = %(timezone)s, start_at = %(start_at)s, end_at = %(end_at)s,
        target = %(target)s, retry = %(retry)s, missed_runs = %(missed_runs)s,
        state = CASE WHEN %(reschedule)s THEN %(state)s ELSE checked.state END,
        after_completion = %(after_completion)s, schedules = %(schedules)s, spread = %(spread)s,
        exclude_calendars = %(exclude_calendars)s, on_excluded = %(on_excluded)s, alerts = %(alerts)s,
        limits = %(limits)s, on_success = %(on_success)s, on_failure = %(on_failure)s,
        on_complete = %(on_complete)s, updated_at = now(),
        -- The pause's record (0015), as of the version read (the service passes it on, or
        -- clears it); a pause (%(pausing)s) of a job not paused yet starts now.
        pause_note = %(pause_note)s, pause_until = %(pause_until)s, paused_by = %(paused_by)s,
        paused_at = CASE WHEN %(pausing)s THEN COALESCE(job_specs.paused_at, now()) ELSE %(paused_at)s END
    FROM checked
    WHERE job_specs.id = checked.job_id
    RETURNING job_specs.*
), run AS (
    UPDATE job_runs
    SET state = CASE WHEN %(reschedule)s THEN %(state)s ELSE job_runs.state END,
        scheduled_at = CASE WHEN %(reschedule)s THEN %(scheduled_at)s ELSE job_runs.scheduled_at END,
        attempt = CASE WHEN %(reschedule)s THEN %(attempt)s ELSE job_runs.attempt END,
        next_run_at = CASE WHEN %(reschedule)s THEN %(next_run_at)s ELSE job_runs.next_run_at END,
        -- A claim not yet started is void after an edit (its executor will find the token gone), so
        -- the job is claimable again at its new time rather than when that lease expires; so is an
        -- expired one (its execution is marked lost above).
        lock_token = CASE WHEN running_execution_id IS NULL OR locked_until < now() THEN NULL ELSE lock_token END,
        locked_until = CASE WHEN running_execution_id IS NULL OR locked_until < now() THEN NULL ELSE locked_until END,
        lease_kind = CASE WHEN running_execution_id IS NULL OR locked_until < now() THEN NULL ELSE lease_kind END,
        running_execution_id = CASE WHEN locked_until < now() THEN NULL ELSE running_execution_id END,
        last_status = CASE WHEN running_execution_id IS NOT NULL AND locked_until < now() THEN 'lost'
                           ELSE last_status END,
        version = version + 1
    FROM spec
    WHERE job_id = spec.id
    RETURNING job_runs.*
), skipped AS (
    -- The occurrences the plan moved past without running them (a resume's): written with it.
    {{ insert_skips }}
    FROM run, jsonb_array_elements(%(skips)s::jsonb) AS s
)
SELECT {{ job_row }} FROM spec JOIN run ON run.job_id = spec.id;

-- fragment: insert_skips
-- Skipped rows (0015), from a JSON array s per row (domain.Skip.as_json: reason, count, first
-- occurrence) and its job's id (run.job_id) in the FROM that follows (s is a column there): one execution with status
-- 'skipped' for a run of occurrences, recorded now (started_at and finished_at: its day's
-- partition), scheduled_at its first occurrence. The owner comes from the job's specification
-- (the executions' trigger, 0010).
INSERT INTO executions (id, job_id, scheduled_at, attempt, trigger, status, started_at, finished_at,
                        skip_reason, skipped_count)
SELECT gen_random_uuid(), run.job_id, (s->>2)::timestamptz, 0, 'schedule', 'skipped', now(), now(),
       s->>0, (s->>1)::integer

-- name: record_skips
-- Skipped rows of jobs whose completion was just written (service.complete_executions, in the
-- completion's transaction; only when a plan skipped something, so a completion that skips
-- nothing runs no such statement): a JSON array of [job_id, reason, count, first].
WITH run AS (
    SELECT (o->>0)::uuid AS job_id, o - 0 AS s FROM jsonb_array_elements(%(skips)s::jsonb) AS o
)
{{ insert_skips }}
FROM run;

-- name: calendar_skips_ahead
-- The calendar-skipped rows of a job that an edit replanning it from %(now)s may have to trim
-- (service.update_job; only for an edit of the occurrences of a job with calendars): those whose
-- first occurrence is after %(now)s, recorded in advance, and the latest whose first is not, the
-- one that may straddle it (a job's rows count runs of occurrences one after the other). Each
-- day's partition is probed by the job's key.
(SELECT id, started_at, scheduled_at, skipped_count FROM executions
 WHERE job_id = %(job_id)s AND status = 'skipped' AND skip_reason = 'calendar'
   AND scheduled_at > %(now)s::timestamptz)
UNION ALL
(SELECT id, started_at, scheduled_at, skipped_count FROM executions
 WHERE job_id = %(job_id)s AND status = 'skipped' AND skip_reason = 'calendar'
   AND scheduled_at <= %(now)s::timestamptz
 ORDER BY scheduled_at DESC LIMIT 1);

-- name: trim_skips
-- In the transaction of the edit that replanned the job (update_job, written: the job was still
-- the version the trims were planned from), what is left of its calendar-skipped rows recorded
-- in advance: a JSON array of [id, started_at, count read, count kept]; a row keeping none is
-- deleted. Only a row still as read (its count) is changed.
WITH t AS (
    SELECT (o->>0)::uuid AS id, (o->>1)::timestamptz AS started_at, (o->>2)::integer AS was,
           (o->>3)::integer AS kept
    FROM jsonb_array_elements(%(trims)s::jsonb) AS o
), gone AS (
    DELETE FROM executions e USING t
    WHERE e.job_id = %(job_id)s AND e.started_at = t.started_at AND e.id = t.id AND t.kept = 0
      AND e.status = 'skipped' AND e.skip_reason = 'calendar' AND e.skipped_count = t.was
    RETURNING e.id
)
UPDATE executions e SET skipped_count = t.kept
FROM t
WHERE e.job_id = %(job_id)s AND e.started_at = t.started_at AND e.id = t.id AND t.kept > 0
  AND e.status = 'skipped' AND e.skip_reason = 'calendar' AND e.skipped_count = t.was;

-- name: expired_pauses
-- Paused jobs whose pause_until has come (0015's partial index holds the paused jobs with an
-- end only): the runner resumes them (service.resume_expired_pauses), oldest end first.
SELECT id::text AS id, owner FROM job_specs
WHERE pause_until <= now() AND pause_until IS NOT NULL AND state = 'paused'
ORDER BY pause_until
LIMIT %(limit)s;

-- name: lost_while_not_due
-- Executions of jobs with nothing due whose lease expired while they ran: their runner died
-- during the delivery, and the claim, which reads due rows only, does not find them. Two kinds:
-- jobs that are not active (paused, most of all: found through job_specs' partial index, state
-- <> 'active'), and jobs edited during the run to a later time (their leases noted in
-- lease_watch, 0026). Marked lost here, as update_job does for a resume or an edit: the lease is
-- cleared and last_status is 'lost'; the attempt stays in hand, so a resume delivers it again
-- (plan_resume), and an active job's next attempt is the one its edit planned. A note whose time
-- has passed is dropped, or moved to the lease's new end when the lease was kept meanwhile (a
-- delivery waiting for its slot). A lease index on job_runs would end the claim's HOT updates.
WITH watched AS (
    SELECT job_id FROM lease_watch WHERE until < now() ORDER BY until LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), orphan AS (
    SELECT r.job_id, r.running_execution_id AS execution_id, r.last_run_at AS started_at
    FROM job_runs r
    WHERE r.job_id IN (SELECT id FROM job_specs WHERE state <> 'active' UNION ALL SELECT job_id FROM watched)
      AND (r.due_at IS NULL OR r.due_at > now())
      AND r.running_execution_id IS NOT NULL AND r.locked_until < now()
    LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
), {{ mark_lost }}, released AS (
    UPDATE job_runs r
    SET lock_token = NULL, locked_until = NULL, lease_kind = NULL, running_execution_id = NULL,
        last_status = 'lost'
    FROM orphan
    WHERE r.job_id = orphan.job_id AND r.running_execution_id = orphan.execution_id
    RETURNING r.job_id
), kept AS (
    UPDATE lease_watch w SET until = r.locked_until
    FROM job_runs r
    WHERE w.job_id IN (SELECT job_id FROM watched) AND r.job_id = w.job_id
      AND r.running_execution_id IS NOT NULL AND r.locked_until >= now()
    RETURNING w.job_id
), dropped AS (
    DELETE FROM lease_watch
    WHERE job_id IN (SELECT job_id FROM watched) AND job_id NOT IN (SELECT job_id FROM kept)
)
-- Each execution marked lost, with its job (the runner logs them by name).
SELECT orphan.job_id::text AS job_id, lost.id::text AS execution_id
FROM lost JOIN orphan ON orphan.execution_id = lost.id;

-- name: watch_lease
-- A job edited while its execution ran (update_job kept the lease): its lease noted, so that if
-- that runner dies the orphan is found once the lease ends (lost_while_not_due), whatever time
-- the edit gave the job's next attempt.
INSERT INTO lease_watch (job_id, until)
SELECT job_id, locked_until FROM job_runs
WHERE job_id = %(id)s AND running_execution_id IS NOT NULL AND locked_until >= now()
ON CONFLICT (job_id) DO UPDATE SET until = EXCLUDED.until;

-- name: delete_job
-- The job and its executions, once the caller holds the row (get_job_for_update, in the same
-- transaction): executions reference their job by id only (0006), and with the row held no claim
-- or start can add one, while this statement, begun after the lock was granted, sees every
-- execution committed before it (one started just before the delete took the lock included).
WITH execution AS (
    DELETE FROM executions WHERE job_id = %(id)s AND owner = %(owner)s
)
DELETE FROM job_specs WHERE id = %(id)s AND owner = %(owner)s RETURNING id;  -- its job_runs row by the key's cascade

-- fragment: new_request
-- Whether a run request starts a new request rather than joining the one in the job's slot:
-- none is pending, or the one there is the manual run under way (requested before the run
-- started: last_run_at is the start). A request made during the run took the slot for the next
-- run; the requests after it join that one, as requests do until a run starts.
(r.manual_run_at IS NULL
 OR (r.lease_kind = 'manual' AND r.running_execution_id IS NOT NULL AND r.manual_run_at <= r.last_run_at))

-- name: request_manual_run
-- Run now, outside the schedule. If the job is leased, the claim takes it once the lease ends.
-- Requests coalesce until a run starts; one made while a manual run is under way is a new one
-- (new_request). The run state's update runs first, its specification's reads its rows (the
-- lock order: see get_job_for_update).
-- The overrides (0015): a request's own replace a pending request's; a request without any keeps
-- those of the pending one it joins, and a new request starts with its own (or none).
WITH run AS (
    UPDATE job_runs r
    SET manual_run_at = CASE WHEN {{ new_request }} THEN now() ELSE r.manual_run_at END,
        manual_overrides = CASE WHEN {{ new_request }} THEN %(overrides)s::jsonb
                                -- a pending backfill delivery is kept: the request joins it
                                WHEN r.manual_overrides ? 'backfill_at' THEN r.manual_overrides
                                ELSE COALESCE(%(overrides)s::jsonb, r.manual_overrides) END,
        -- A new request of the owner's own is no chained run (one coalesced with a pending
        -- chained run keeps its cause).
        pending_cause = CASE WHEN {{ new_request }} THEN NULL ELSE r.pending_cause END
    FROM job_specs s
    WHERE r.job_id = %(id)s AND s.id = r.job_id AND s.owner = %(owner)s
    RETURNING r.*
), spec AS (
    UPDATE job_specs SET updated_at = now() FROM run WHERE id = run.job_id RETURNING job_specs.*
)
SELECT {{ job_row }} FROM spec JOIN run ON run.job_id = spec.id;

-- fragment: due_rows
due AS (
    -- Rows with something due whose lease is free or expired, oldest first. FOR UPDATE SKIP
    -- LOCKED lets concurrent claimers take disjoint batches without waiting on each other, and
    -- the partial index on due_at keeps the cost proportional to the due rows, not the table.
    -- The claim then updates each row it locked by its ctid (a TID scan), not by a second probe
    -- of the primary key: the row is locked, so that version is the one to update; in the rare
    -- race where it changed before the lock, the update finds nothing and the job stays due.
    -- slot_wait_* (0022): an occurrence handed back for its target's slot waited since then.
    SELECT job_id AS id, ctid AS row_ctid, running_execution_id AS orphan_execution_id, last_run_at AS orphan_started_at,
           slot_wait_since, slot_wait_for
    FROM job_runs
    WHERE due_at <= now()
      AND (locked_until IS NULL OR locked_until < now())
    ORDER BY due_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)

-- fragment: due_leases
{{ due_rows }}, orphan AS (
    -- A lease that expired while its execution ran: that runner died or stalled. Its execution
    -- is marked lost and the job is delivered again (at-least-once); the stale runner can no
    -- longer complete because the token below changes (fencing).
    SELECT id AS job_id, orphan_execution_id AS execution_id, orphan_started_at AS started_at
    FROM due WHERE orphan_execution_id IS NOT NULL
), {{ mark_lost }}

-- name: claim_due
-- Lease due jobs for executors that start them later (the fan-out Lambda's invokes). A job
-- whose lease expired while its execution ran comes back with that execution (orphan_*), which
-- the store marks lost in the same transaction (mark_executions_lost). The marking is not a CTE
-- here, as in claim_and_start: an update of executions whose rows come from the claim is planned
-- over every day partition kept (about 7 ms with 32 days), and the fan-out's statements are
-- planned at every call (RDS Proxy); orphans are rare.
WITH {{ due_rows }}
UPDATE job_runs j
SET lock_token = gen_random_uuid(),
    locked_until = now() + make_interval(secs => %(lease_seconds)s),
    -- Whichever is due first runs first: a pending manual run, unless the occurrence in hand
    -- has been due since before the request (due_at is the earlier of the two), so a stream of
    -- run-now requests cannot hold the schedule back. A manual run does not disturb the
    -- occurrence in hand.
    lease_kind = CASE WHEN j.manual_run_at = j.due_at THEN 'manual' ELSE 'schedule' END,
    running_execution_id = NULL,
    last_status = CASE WHEN due.orphan_execution_id IS NULL THEN j.last_status ELSE 'lost' END
FROM due
WHERE j.ctid = due.row_ctid AND j.job_id = due.id
RETURNING j.job_id, j.lock_token, j.lease_kind, j.locked_until, j.due_at, now() AS claimed_at,
          CASE WHEN j.lease_kind = 'manual' THEN j.manual_run_at ELSE j.scheduled_at END AS scheduled_at,
          (due.orphan_execution_id IS NOT NULL) AS reclaimed, due.orphan_execution_id, due.orphan_started_at,
          -- the job's owner: the fan-out keeps each owner's leases to a share (owners_over_lease_share)
          (SELECT d.owner FROM job_specs d WHERE d.id = j.job_id) AS owner;

-- name: lost_runs
-- How often a manual or chained run (its trigger and scheduled_at: the request's) was lost with
-- its runner, read when its lease is reclaimed (attempts.given_up bounds it). The execution
-- started at or after its request: the day partitions before are pruned, the rest probed by key.
-- The execution started for it again is numbered after those lost (attempt 2 after one), as a
-- scheduled occurrence's is: its X-Scheduler-Attempt and its row say the same.
WITH lost AS (
    SELECT count(*) AS lost FROM executions
    WHERE job_id = %(job_id)s AND started_at >= %(scheduled_at)s::timestamptz
      AND scheduled_at = %(scheduled_at)s::timestamptz AND trigger = %(trigger)s AND status = 'lost'
), renumbered AS (
    UPDATE executions SET attempt = 1 + (SELECT lost FROM lost)
    WHERE job_id = %(job_id)s AND started_at = %(started_at)s::timestamptz AND id = %(execution_id)s
      AND (SELECT lost FROM lost) > 0  -- by its key's (job_id, started_at): one probe, not a day's scan
    RETURNING id
)
SELECT lost FROM lost;

-- name: jobs_still_stored
-- Which of the jobs whose outcomes were refused still exist (the others were deleted during
-- their delivery, not taken over): read on that rare path only, for the log line.
SELECT id::text AS id FROM job_specs WHERE id = ANY(%(ids)s::uuid[]);

-- name: mark_executions_lost
-- The orphans a claim_due found (each array one element per execution: its job, its id and its
-- started_at), marked lost if still running.
WITH orphan AS (
    SELECT * FROM unnest(%(job_id)s::uuid[], %(execution_id)s::uuid[], %(started_at)s::timestamptz[])
        AS o(job_id, execution_id, started_at)
), {{ mark_lost }}
SELECT count(*) AS lost FROM lost;

-- name: release_lease
-- Give a claim back (it could not be dispatched): the job is due again at once.
UPDATE job_runs SET lock_token = NULL, locked_until = NULL, lease_kind = NULL
WHERE job_id = %(job_id)s AND lock_token = %(lock_token)s AND running_execution_id IS NULL
RETURNING job_id AS id;

-- fragment: started_job_columns
-- The columns of a started job that recording its execution (record_started) reads: its run
-- state's (j, job_runs) and its specification's (d, job_specs).
d.id, d.owner, d.name, d.schedule, d.run_at, d.timezone, d.start_at, d.end_at, d.created_at, d.target,
d.retry, d.missed_runs, j.state, j.version, j.scheduled_at, j.attempt, j.next_run_at, j.lease_kind,
d.after_completion, d.schedules, d.spread, j.manual_run_at, j.running_execution_id AS run_id, d.exclude_calendars,
d.on_excluded, d.limits, CASE WHEN j.lease_kind = 'manual' THEN j.manual_overrides END AS manual_overrides,
-- The chains (0016) as one value, NULL for a job without any (nearly all: one NULL to read), and
-- a manual run's pending cause (a chained run's), NULL for every other run: decided here, on the
-- row in hand, rather than on the CTE's rows below (5,600 instructions a job less for Postgres).
CASE WHEN d.on_success = '{}' AND d.on_failure = '{}' AND d.on_complete = '{}' THEN NULL
     ELSE jsonb_build_array(d.on_success, d.on_failure, d.on_complete) END AS chains,
CASE WHEN j.lease_kind = 'manual' THEN j.pending_cause END AS cause

-- fragment: record_started
-- After a "job" CTE that started jobs (their running_execution_id set, answered as run_id, the
-- attempt counted): their executions recorded as running ("run"). The query then selects
-- started_columns.
run AS (
    -- due_at (0012): when this attempt was due, the run state's next_run_at (the occurrence, a
    -- retry's time, the resume of a catch-up) or the manual run's request.
    -- overrides (0015): a manual run's, as shown (masked). A manual run with a pending cause
    -- (0016) is a chained run: trigger 'chain', caused_by the execution that ended.
    -- waited_ms, waited_for (0022): how long and why an occurrence handed back for its target's
    -- slot waited before this start, as the "job" CTE answers them (NULL for nearly every start).
    INSERT INTO executions (id, job_id, owner, scheduled_at, attempt, trigger, status, started_at, due_at, overrides,
                            caused_by, caused_by_job_id, waited_ms, waited_for)
    -- A backfill's delivery (0015) is a manual request carrying its occurrence (backfill_at).
    SELECT job.run_id, job.id, job.owner,
           CASE job.lease_kind WHEN 'manual'
                THEN COALESCE((job.manual_overrides->>'backfill_at')::timestamptz, job.manual_run_at)
                ELSE job.scheduled_at END,
           -- a manual run is attempt 1; a backfill's retry carries its attempt (0019)
           CASE job.lease_kind WHEN 'manual' THEN COALESCE((job.manual_overrides->>'attempt')::integer, 1)
                ELSE job.attempt END,
           CASE WHEN job.manual_overrides ? 'backfill_at' THEN 'backfill'
                WHEN job.cause IS NOT NULL THEN 'chain'
                WHEN job.lease_kind = 'manual' THEN 'manual'
                WHEN job.attempt > 1 THEN 'retry' ELSE 'schedule' END,
           'running', now(),
           CASE job.lease_kind WHEN 'manual' THEN job.manual_run_at ELSE job.next_run_at END,
           job.manual_overrides->'shown',
           (job.cause->>'execution_id')::uuid, (job.cause->>'job_id')::uuid,
           job.waited_ms, job.waited_for
    FROM job
    RETURNING id, scheduled_at, attempt, trigger, started_at, waited_ms
)

-- fragment: started_columns
-- A started row, read by position (scheduler.store.STARTED_COLUMNS names them in this order):
-- the columns of its job that its delivery and its completion's plan need, no more, then its
-- execution's. No other: the runner turns every column of every row into a Python value. The
-- target and retry as text, parsed in read_started (a loader's Python frame a value cost more
-- than the parse). waited_ms last: the wait for its target's slot it starts with (after a
-- hand-back), which the lateness metric leaves out.
job.id, job.owner, job.name, job.schedule, job.run_at, job.timezone, job.start_at, job.end_at,
job.created_at, job.target::text, job.retry::text, job.missed_runs, job.state, job.version, job.scheduled_at,
job.attempt, job.next_run_at, job.lease_kind, job.after_completion, job.schedules, job.spread, job.limits,
run.id AS execution_id, run.scheduled_at AS execution_scheduled_at,
run.attempt AS execution_attempt, run.trigger AS execution_trigger,
run.started_at AS execution_started_at, job.exclude_calendars, job.on_excluded,
job.manual_overrides->'deliver' AS overrides,
job.chains, job.cause, run.waited_ms

-- fragment: start_lease
-- The SET of a start (start_execution, start_executions): the lease covers the target's own
-- timeout plus a margin for the bookkeeping around it; the attempt is counted.
locked_until = now() + make_interval(secs => COALESCE((d.target->>'timeout_seconds')::float, 30)
                                             + %(lease_margin_seconds)s),
attempt = CASE WHEN j.lease_kind = 'schedule' THEN j.attempt + 1 ELSE j.attempt END,
last_run_at = now()

-- fragment: slot_wait_cleared
-- A deployed executor's start ends the wait of an occurrence handed back for its target's slot
-- (0022): record_started writes it on the execution (slot_waited, from the run state as it was
-- before the start, "prior").
slot_wait_since = NULL, slot_wait_for = NULL

-- fragment: slot_waited
(extract(epoch FROM now() - prior.slot_wait_since) * 1000)::integer AS waited_ms, prior.slot_wait_for AS waited_for

-- fragment: startable
-- The WHERE of a start, after the claim's token matched: the lease unexpired, no execution started
-- on it yet (so a duplicate invoke does nothing), and still due (an edit or a pause between the
-- claim and this start leaves nothing to run).
j.locked_until > now() AND j.running_execution_id IS NULL
AND (j.lease_kind = 'manual' OR (j.state = 'active' AND j.next_run_at <= now()))

-- name: start_execution
-- Phase two of the lease: the executor confirms its claim (token matches, lease unexpired, no
-- execution started on it yet, so a duplicate invoke does nothing), extends the lease over the
-- delivery, counts the attempt and records the execution as running, in one statement.
WITH prior AS (
    -- The run state before this start, for what the start clears (0022).
    SELECT job_id, slot_wait_since, slot_wait_for FROM job_runs WHERE job_id = %(job_id)s
), job AS (
    UPDATE job_runs j
    SET {{ start_lease }}, running_execution_id = %(execution_id)s, {{ slot_wait_cleared }}
    FROM job_specs d, prior
    WHERE j.job_id = %(job_id)s AND d.id = j.job_id AND prior.job_id = j.job_id AND j.lock_token = %(lock_token)s
      AND {{ startable }}
    RETURNING {{ started_job_columns }}, {{ slot_waited }}
), {{ record_started }}
SELECT {{ started_columns }}
FROM job JOIN run ON run.id = job.run_id;

-- name: start_executions
-- start_execution for a group of claims (an executor invoked with several), in one statement:
-- each parameter an array with one element per claim. A claim whose lease was lost is left out.
WITH claim AS (
    SELECT * FROM unnest(%(job_id)s::uuid[], %(lock_token)s::uuid[], %(execution_id)s::uuid[])
        AS c(job_id, lock_token, execution_id)
), prior AS (
    -- The run states before this start, for what the start clears (0022).
    SELECT job_id, slot_wait_since, slot_wait_for FROM job_runs WHERE job_id = ANY (%(job_id)s::uuid[])
), job AS (
    UPDATE job_runs j
    SET {{ start_lease }}, running_execution_id = claim.execution_id, {{ slot_wait_cleared }}
    FROM claim JOIN job_specs d ON d.id = claim.job_id JOIN prior ON prior.job_id = claim.job_id
    WHERE j.job_id = claim.job_id AND j.lock_token = claim.lock_token AND {{ startable }}
    RETURNING {{ started_job_columns }}, {{ slot_waited }}
), {{ record_started }}
SELECT {{ started_columns }}
FROM job JOIN run ON run.id = job.run_id;

-- name: claim_and_start
-- Both phases of the lease in one statement, for a runner that delivers at once what it claims
-- (local mode, taking no more than it has idle executors): the claim of claim_due and the
-- start of start_execution, the lease set over the target's timeout plus the margin.
WITH {{ due_leases }}, job AS (
    UPDATE job_runs j
    -- One token for the batch, the runner's (fencing needs one a claim, not one a job): by it, a
    -- batch whose answer was lost with its connection is read back (started_by_lease).
    SET lock_token = %(lock_token)s,
        locked_until = now() + make_interval(secs => COALESCE((d.target->>'timeout_seconds')::float, 30)
                                                         + %(lease_margin_seconds)s),
        lease_kind = CASE WHEN j.manual_run_at = j.due_at THEN 'manual' ELSE 'schedule' END,
        attempt = CASE WHEN j.manual_run_at = j.due_at THEN j.attempt ELSE j.attempt + 1 END,
        running_execution_id = gen_random_uuid(),
        last_run_at = now(),
        last_status = CASE WHEN due.orphan_execution_id IS NULL THEN j.last_status ELSE 'lost' END,
        {{ slot_wait_cleared }}
    FROM due JOIN job_specs d ON d.id = due.id
    WHERE j.ctid = due.row_ctid AND j.job_id = due.id
    -- A delivery local mode handed back (no room to wait for its slot, or its owner's share of
    -- the threads) starts with the wait behind it, as a deployed executor's start does
    -- (slot_waited, from the claimed row as it was).
    -- lost: the execution of an expired lease marked lost (mark_lost), NULL for nearly every claim.
    RETURNING {{ started_job_columns }}, j.lock_token, due.orphan_execution_id AS lost,
              (extract(epoch FROM now() - due.slot_wait_since) * 1000)::int AS waited_ms, due.slot_wait_for AS waited_for
), {{ record_started }}
-- The claim's lease time is its execution's started_at (one now()); its due_at and locked_until
-- are not read back (nothing of local mode reads them).
SELECT {{ started_columns }}, job.lock_token, job.lost
FROM job JOIN run ON run.id = job.run_id;

-- name: started_by_lease
-- The executions a start (claim_and_start, start_execution, start_executions) recorded under
-- these lease tokens, read back when its connection died after the statement was sent: it may
-- have committed with its answer lost. The rows the start would have answered (the execution the
-- claim marked lost is not known here: NULL). With execution ids (a deployed executor's start,
-- which chose them), only those: a duplicate invoke carrying the same token may have started the
-- job itself.
WITH job AS (
    SELECT {{ started_job_columns }}, j.lock_token, NULL::uuid AS lost, j.last_run_at
    FROM job_runs j JOIN job_specs d ON d.id = j.job_id
    WHERE j.lock_token = ANY (%(lock_token)s::uuid[]) AND j.running_execution_id IS NOT NULL
      AND (%(execution_id)s::uuid[] IS NULL OR j.running_execution_id = ANY (%(execution_id)s::uuid[]))
), run AS (
    SELECT e.id, e.scheduled_at, e.attempt, e.trigger, e.started_at, e.waited_ms
    FROM executions e JOIN job ON e.job_id = job.id AND e.started_at = job.last_run_at AND e.id = job.run_id
)
SELECT {{ started_columns }}, job.lock_token, job.lost
FROM job JOIN run ON run.id = job.run_id;

-- name: leased_job
-- Completion's second path (its job changed since the execution started): the job as it is now,
-- if our lease still stands (the fence), to plan from; the completion is then written for that
-- version (complete_job), or read again. No row is held while the plan is made. The execution
-- started with the job's last_run_at (see mark_lost): one day's primary key is probed.
-- Its trigger and attempt too: a failed backfill delivery is retried (0019).
SELECT {{ job_row }}, now() AS db_now, run.last_run_at AS ran_started_at, ran.scheduled_at AS ran_scheduled_at,
       ran.trigger AS ran_trigger, ran.attempt AS ran_attempt
FROM job_runs run JOIN job_specs spec ON spec.id = run.job_id
LEFT JOIN LATERAL (
    -- OFFSET 0 keeps the subquery apart: probed with the run's last_run_at as a parameter, it
    -- runs in that day's partition only (joined flat, every day's partition was scanned).
    SELECT scheduled_at, trigger, attempt FROM executions
    WHERE job_id = run.job_id AND started_at = run.last_run_at AND id = %(execution_id)s
    OFFSET 0
) ran ON true
WHERE run.job_id = %(job_id)s AND run.lock_token = %(lock_token)s AND run.running_execution_id = %(execution_id)s;

-- fragment: complete_outcomes
-- After an "outcome" CTE (one row per execution: job_id, lock_token, execution_id, version, the
-- planned state, scheduled_at, attempt and next_run_at, ran_scheduled_at, the execution's
-- started_at (with the job, its primary key in that day's partition: the update probes it
-- only), and how it ended),
-- and the earliest and latest of those started_at as plain values: the planner then plans the
-- update over those days' partitions only, not every day kept (complete_jobs' outcome rows come
-- from a parameter it cannot see into: with 32 days kept, 4.8-8.6 ms of planning a call). Each
-- job's next state, computed by scheduler.lifecycle, the lease released and the execution's
-- outcome recorded. Fenced by the token, and valid only for the version the plan was computed
-- from: from the row start_execution or claim_and_start returned (the usual case; after an
-- edit, pause or resume nothing is written for that job and the service takes the locking path),
-- or from the row lock_leased_job holds. Returns the ids of the jobs NOT written (fenced, or
-- changed since), as text: nearly always none, so a batch's answer is empty rather than one row a
-- job for the client to read.
job AS (
    UPDATE job_runs j
    SET state = o.state, scheduled_at = o.scheduled_at, attempt = o.attempt, next_run_at = o.next_run_at,
        manual_run_at = CASE WHEN j.lease_kind = 'manual' AND o.ran_scheduled_at IN (j.manual_run_at,
                             (j.manual_overrides->>'backfill_at')::timestamptz) THEN NULL ELSE j.manual_run_at END,
        manual_overrides = CASE WHEN j.lease_kind = 'manual' AND o.ran_scheduled_at IN (j.manual_run_at,
                             (j.manual_overrides->>'backfill_at')::timestamptz) THEN NULL ELSE j.manual_overrides END,
        -- A chained run's cause goes with its request (a new one that came meanwhile stays).
        pending_cause = CASE WHEN j.lease_kind = 'manual' AND o.ran_scheduled_at IN (j.manual_run_at,
                             (j.manual_overrides->>'backfill_at')::timestamptz) THEN NULL ELSE j.pending_cause END,
        lock_token = NULL, locked_until = NULL, lease_kind = NULL, running_execution_id = NULL,
        -- An occurrence skipped at its start (missed: its runners were down) is no run and no
        -- failure, and leaves the last run's status as it was.
        run_count = j.run_count + CASE WHEN o.status = 'skipped' THEN 0 ELSE 1 END,
        failure_count = j.failure_count + CASE WHEN o.status IN ('succeeded', 'skipped') THEN 0 ELSE 1 END,
        last_status = CASE WHEN o.status = 'skipped' THEN j.last_status ELSE o.status END,
        last_error = CASE WHEN o.status = 'skipped' THEN j.last_error ELSE o.error END
    FROM outcome o
    WHERE j.job_id = o.job_id AND j.lock_token = o.lock_token AND j.running_execution_id = o.execution_id
      AND j.version = o.version
      -- The jobs' keys again, as an array: the planner takes a batch of outcomes for 100 rows
      -- and, below a few thousand jobs, read every job to join them rather than probe each key.
      AND j.job_id = ANY (ARRAY(SELECT job_id FROM outcome))
    RETURNING j.job_id AS id
), execution AS (
    UPDATE executions e
    SET status = o.status, finished_at = now(), http_status = o.http_status,
        response_excerpt = o.response_excerpt, error = o.error,
        skip_reason = CASE WHEN o.status = 'skipped' THEN 'missed' END,
        skipped_count = CASE WHEN o.status = 'skipped' THEN 1 END,
        duration_ms = (EXTRACT(EPOCH FROM now() - e.started_at) * 1000)::integer
    FROM outcome o JOIN job ON job.id = o.job_id
    WHERE e.job_id = o.job_id AND e.started_at = o.started_at AND e.id = o.execution_id AND e.status = 'running'
      AND e.started_at BETWEEN %(earliest_started_at)s::timestamptz AND %(latest_started_at)s::timestamptz
    RETURNING e.id
)
SELECT o.job_id::text AS job_id FROM outcome o WHERE NOT EXISTS (SELECT FROM job WHERE job.id = o.job_id)

-- name: complete_job
-- One execution's outcome (an executor Lambda's), parameters as plain values. The outcome row is
-- inlined (NOT MATERIALIZED), so the planner sees the execution's started_at as a constant and
-- plans its day's partition only: materialized, every completion planned the update over every
-- day kept (about 1.9 ms with 35 partitions, against 0.1 ms), at each call since the executors'
-- statements are not prepared (RDS Proxy).
WITH outcome AS NOT MATERIALIZED (
    SELECT %(job_id)s::uuid AS job_id, %(lock_token)s::uuid AS lock_token, %(execution_id)s::uuid AS execution_id,
           %(version)s::integer AS version, %(state)s::text AS state, %(scheduled_at)s::timestamptz AS scheduled_at,
           %(attempt)s::integer AS attempt, %(next_run_at)s::timestamptz AS next_run_at,
           %(ran_scheduled_at)s::timestamptz AS ran_scheduled_at, %(status)s::text AS status,
           %(error)s::text AS error, %(http_status)s::integer AS http_status,
           %(response_excerpt)s::text AS response_excerpt, %(started_at)s::timestamptz AS started_at
), {{ complete_outcomes }};

-- name: complete_jobs
-- A batch of outcomes (local mode's, or those of an executor's group that ended together) in one
-- parameter: a JSON array of one array per execution, its values in complete_job's order
-- (scheduler.store.completions). The client encodes it in one call in C, where an array
-- parameter per column cost psycopg a Python loop over every value (14 a job: 11-12 us of a
-- job's client CPU here, against 3). As jsonb it is parsed once and read by position at no more
-- cost to the server than the arrays (11-16 us a job against 13-14); as json, each ->> would
-- parse its element again (46-50 us).
WITH outcome AS (
    SELECT (o->>0)::uuid AS job_id, (o->>1)::uuid AS lock_token, (o->>2)::uuid AS execution_id,
           (o->>3)::integer AS version, o->>4 AS state, (o->>5)::timestamptz AS scheduled_at,
           (o->>6)::integer AS attempt, (o->>7)::timestamptz AS next_run_at,
           (o->>8)::timestamptz AS ran_scheduled_at, o->>9 AS status, o->>10 AS error,
           (o->>11)::integer AS http_status, o->>12 AS response_excerpt, (o->>13)::timestamptz AS started_at
    FROM jsonb_array_elements(%(outcomes)s::jsonb) AS o
), {{ complete_outcomes }};

-- name: get_execution
-- Internal and test use only (no route reads it): executions are keyed by their job (0009), so
-- this reads every row of the days the execution may be in, the day of its started_at when given.
SELECT * FROM executions
WHERE id = %(execution_id)s
  AND (%(started_at)s::timestamptz IS NULL OR started_at = %(started_at)s::timestamptz);

-- name: find_owner_execution
-- One of the owner's executions by its id, with its job's name (GET /v1/executions/{id}). No
-- index leads with the id (executions are keyed by their job, 0009): the owner's index is walked,
-- every day kept, until the id is met; about a third of a second at a million executions of the
-- owner, where a client paging through them for it took minutes.
SELECT e.*, j.name AS job_name
FROM executions e
JOIN job_specs j ON j.id = e.job_id
WHERE e.owner = %(owner)s AND e.id = %(execution_id)s::uuid
LIMIT 1;

-- name: list_executions
-- Newest first. A job's executions start one at a time (under its lease, each in a transaction
-- that follows the previous one's start), so started_at and seq order them alike, and (started_at,
-- seq) is a total order: the primary key's, read backwards. The cursor is the last row seen: its
-- seq, and its started_at when it carries one (the key's own condition; a cursor without it,
-- issued before cursors carried one, is served by seq alone, read past the newer rows). since and
-- until (the store's, see Store.list_executions: the recent days before now or before the
-- cursor's row's started_at, and the days up to the cursor's), constants when planned, leave out
-- the partitions of other days: never prepared (Store.list_executions), as a generic plan keeps
-- none of these conditions in the index's (a page of a job with a million executions read them
-- all, 0.4 s, where planned with its values it reads the page, 0.1 ms).
SELECT e.* FROM executions e
WHERE e.job_id = %(job_id)s
  AND (%(status)s::text IS NULL OR e.status = %(status)s::text)
  AND (%(since)s::timestamptz IS NULL OR e.started_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR e.started_at < %(until)s::timestamptz)
  AND (%(before_seq)s::bigint IS NULL OR e.seq < %(before_seq)s::bigint)
  AND (%(before_started_at)s::timestamptz IS NULL
       OR (e.started_at, e.seq) < (%(before_started_at)s::timestamptz, %(before_seq)s::bigint))
ORDER BY e.started_at DESC, e.seq DESC
LIMIT %(limit)s;

-- name: due_backlog
-- For the metrics: how many jobs are due and not under way (no live lease token), and how late the
-- oldest is; and how many of them a claim can take now (the helpers' count). A claim deferred
-- for its owner's share of the leases (defer_claims) has no token but is not claimable until its
-- pause ends: it is due, and counted. A delivery handed back for its target's slot, in its pause
-- (hand_back_for_slot: no token, a wait recorded, not claimable yet), is not: it waits for its
-- job's own limits (SlotWaitMs), not for the scheduler (nor, then, does a claim of it deferred
-- before its start). The due index bounds the cost by the due jobs, as the claim's.
SELECT count(*) AS due,
       count(*) FILTER (WHERE locked_until IS NULL OR locked_until < now()) AS claimable,
       COALESCE(EXTRACT(EPOCH FROM now() - min(due_at)), 0)::float AS oldest_due_age_seconds
FROM job_runs
WHERE due_at <= now() AND (lock_token IS NULL OR locked_until IS NULL OR locked_until < now())
  AND (slot_wait_for IS NULL OR locked_until IS NULL OR locked_until < now());

-- name: next_due_in
-- Seconds until the earliest due job that is not leased (or whose lease has expired), read from
-- the claim's index in due order. A lease still held is not looked at: the fan-out sleeps at
-- most a second, so a lease that expires is reclaimed within a second of its end.
SELECT EXTRACT(EPOCH FROM (
           SELECT due_at FROM job_runs
           WHERE due_at IS NOT NULL AND (locked_until IS NULL OR locked_until < now())
           ORDER BY due_at
           LIMIT 1
       ) - now())::float AS seconds;

-- name: maintain_partitions
-- Retention by whole days (migration 0005): the executions' partitions created ahead (at most 7
-- days, 0011) and dropped past the retention, by a function that holds the DDL rights the
-- application's role lacks.
SELECT created, dropped, default_moved, default_purged, skipped
FROM scheduler_maintain_partitions(%(retention_days)s::integer, %(days_ahead)s::integer);

-- name: list_owner_executions
-- The owner's executions across their jobs, newest first, each with its job's name. Keyset
-- pagination on (started_at, id): the index executions_owner_started_idx gives this order for
-- one owner, so a page reads about `limit` entries (and as many job rows) however many
-- executions and jobs the owner has; the row comparison is the index's own condition. Filters
-- on status and job narrow the same walk; since stops it at an instant. until (exclusive) is the
-- store's: the part of a page older than its first try (Store.list_owner_executions); both bounds,
-- constants when the statement is planned (it is never prepared: a generic plan has none), leave
-- out the partitions of the days outside them.
SELECT e.*, j.name AS job_name
FROM executions e
JOIN job_specs j ON j.id = e.job_id
WHERE e.owner = %(owner)s
  AND (%(status)s::text IS NULL OR e.status = %(status)s::text)
  AND (%(job_id)s::uuid IS NULL OR e.job_id = %(job_id)s::uuid)
  AND (%(since)s::timestamptz IS NULL OR e.started_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR e.started_at < %(until)s::timestamptz)
  AND (%(before_started_at)s::timestamptz IS NULL
       OR (e.started_at, e.id) < (%(before_started_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY e.started_at DESC, e.id DESC
LIMIT %(limit)s;

-- fragment: live_run
-- A job's live run (after a job_runs row r): its execution, one probe of one day's primary key.
-- Every running execution is one, and each job has at most one: a start (start_execution,
-- start_executions, claim_and_start) writes running_execution_id and last_run_at with the row it
-- inserts as running, started at that same now(); record_wait moves both together; and every
-- statement that clears running_execution_id ends its execution in the same transaction (the
-- completion writes its outcome, mark_lost marks it lost, hand_back_for_slot deletes it, a
-- job's delete deletes both). The status is checked all the same: claim_and_start marks the
-- orphan of the row it locked lost even when its update then misses that row (the race due_rows
-- tells of), which leaves the run named. OFFSET 0 keeps the probe a subquery run with the row's
-- values, so that run-time pruning reads that day's index only.
SELECT * FROM executions e
WHERE e.job_id = r.job_id AND e.started_at = r.last_run_at AND e.id = r.running_execution_id
  AND e.status = 'running'
OFFSET 0

-- name: list_owner_running
-- list_owner_executions with status=running: the owner's jobs with a live run (job_runs), each run
-- probed (live_run), in the listing's order and with its conditions (the run's last_run_at and
-- running_execution_id are the execution's started_at and id). No index can name the running ones
-- (a claim's and a start's updates of job_runs, as a completion's of executions, are heap-only
-- only while no index holds what they write), so the owner's jobs are read: by the (owner, name)
-- index and each run state by its key, or job_runs whole when the owner holds most jobs (the
-- planner's choice): about 0.15-0.5 ms a thousand jobs, whatever their executions. An owner of
-- many jobs pages by the walk instead (Store.list_owner_executions, RUNNING_JOBS_CAP).
SELECT e.*, s.name AS job_name
FROM job_specs s
JOIN job_runs r ON r.job_id = s.id
CROSS JOIN LATERAL ({{ live_run }}) e
WHERE s.owner = %(owner)s AND e.owner = %(owner)s
  AND r.running_execution_id IS NOT NULL
  AND (%(job_id)s::uuid IS NULL OR s.id = %(job_id)s::uuid)
  AND (%(since)s::timestamptz IS NULL OR r.last_run_at >= %(since)s::timestamptz)
  AND (%(before_started_at)s::timestamptz IS NULL
       OR (r.last_run_at, r.running_execution_id) < (%(before_started_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY e.started_at DESC, e.id DESC
LIMIT %(limit)s;

-- name: owner_jobs_up_to
-- How many jobs the owner has, counted up to %(cap)s: list_owner_running reads them all, so an
-- owner of that many pages status=running by the walk of its executions instead (Store.
-- list_owner_executions). In the index's order, so that the count reads the (owner, name) index
-- alone (index-only), not the specifications.
SELECT count(*) AS jobs FROM (
    SELECT FROM job_specs WHERE owner = %(owner)s ORDER BY name LIMIT %(cap)s
) owned;

-- name: list_job_running
-- list_executions with status=running: the job's live run, if any (live_run), with the page's
-- cursor conditions.
SELECT e.* FROM job_runs r
CROSS JOIN LATERAL ({{ live_run }}) e
WHERE r.job_id = %(job_id)s AND r.running_execution_id IS NOT NULL
  AND (%(before_seq)s::bigint IS NULL OR e.seq < %(before_seq)s::bigint)
  AND (%(before_started_at)s::timestamptz IS NULL
       OR (e.started_at, e.seq) < (%(before_started_at)s::timestamptz, %(before_seq)s::bigint))
LIMIT %(limit)s;

-- fragment: lost_execution
-- A lost execution (after a lost_executions row l, 0028), one probe of its day's primary key.
SELECT * FROM executions e
WHERE e.job_id = l.job_id AND e.started_at = l.started_at AND e.seq = l.seq AND e.status = 'lost'
OFFSET 0

-- name: list_owner_lost
-- list_owner_executions with status=lost: the owner's entries of lost_executions (0028, kept by
-- triggers) in the listing's order, its own index's, each execution probed (lost_execution).
SELECT e.*, j.name AS job_name
FROM lost_executions l
CROSS JOIN LATERAL ({{ lost_execution }}) e
JOIN job_specs j ON j.id = e.job_id
WHERE l.owner = %(owner)s AND e.owner = %(owner)s
  AND (%(job_id)s::uuid IS NULL OR l.job_id = %(job_id)s::uuid)
  AND (%(since)s::timestamptz IS NULL OR l.started_at >= %(since)s::timestamptz)
  AND (%(before_started_at)s::timestamptz IS NULL
       OR (l.started_at, l.id) < (%(before_started_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY l.started_at DESC, l.id DESC
LIMIT %(limit)s;

-- name: list_job_lost
-- list_executions with status=lost: the job's entries of lost_executions, its primary key read
-- backwards (the listing's order), each execution probed (lost_execution).
SELECT e.* FROM lost_executions l
CROSS JOIN LATERAL ({{ lost_execution }}) e
WHERE l.job_id = %(job_id)s
  AND (%(before_seq)s::bigint IS NULL OR l.seq < %(before_seq)s::bigint)
  AND (%(before_started_at)s::timestamptz IS NULL
       OR (l.started_at, l.seq) < (%(before_started_at)s::timestamptz, %(before_seq)s::bigint))
ORDER BY l.started_at DESC, l.seq DESC
LIMIT %(limit)s;

-- name: delete_completed_jobs
-- after_completion = 'delete': jobs whose completion, written just before in the same
-- transaction, left them completed are deleted with their executions (as delete_job). The
-- completion's UPDATE holds their rows until the commit, so nothing can change them in between
-- and no execution can be started for them; the conditions still fence it: a job another runner
-- holds, or with a manual run pending, is kept (its next completion deletes it once that run is
-- done).
-- Each delete is the last entry of its job's change log, by the scheduler (the log is kept for
-- the executions' retention period from it, then purged, as after a delete by the API).
WITH job AS (
    DELETE FROM job_specs s
    USING job_runs r
    WHERE s.id = ANY(%(job_ids)s::uuid[]) AND r.job_id = s.id AND s.after_completion = 'delete'
      AND r.state = 'completed' AND r.lock_token IS NULL AND r.manual_run_at IS NULL
    RETURNING s.id, s.owner, r.version
), execution AS (
    DELETE FROM executions e USING job WHERE e.job_id = job.id
), logged AS (
    INSERT INTO job_changes (job_id, owner, actor, action, version)
    SELECT id, owner, 'scheduler', 'delete', version FROM job
)
SELECT id FROM job;

-- name: count_live_leases
-- Executors at work or on their way: unexpired leases, claimed (waiting in Lambda's invoke queue)
-- or started. The fan-out keeps this under the executor's reserved concurrency, so no invoke
-- waits throttled until it expires into the dead-letter queue. A leased job stays due (due_at is
-- in the past until its completion moves next_run_at), so the due index bounds the cost by the due
-- jobs, like the claim's, not by the table (a job paused under its lease is not counted, nor
-- one deferred: defer_claims).
SELECT count(*) AS leases FROM job_runs WHERE due_at <= now() AND locked_until > now() AND lock_token IS NOT NULL;

-- name: owners_over_lease_share
-- The owners whose jobs hold more than %(share)s of the live leases (count_live_leases), and by how
-- many: the fan-out defers that many of their claims (defer_claims), so that one owner's slow
-- targets never hold all of the executors' reserved concurrency. None while the jobs have one
-- owner (a share would only leave executors idle): two probes of the (owner, name) index each.
-- Read only when a claim could take an owner past its share; the live leases are at most the
-- reserved concurrency.
SELECT d.owner, count(*) - %(share)s AS excess
FROM job_runs r JOIN job_specs d ON d.id = r.job_id
WHERE r.due_at <= now() AND r.locked_until > now() AND r.lock_token IS NOT NULL
GROUP BY d.owner
HAVING count(*) > %(share)s
   AND (EXISTS (SELECT FROM job_specs o WHERE o.owner < d.owner) OR EXISTS (SELECT FROM job_specs o WHERE o.owner > d.owner));

-- name: defer_claims
-- Claims not dispatched because their owner holds its share of the leases: each job is left alone
-- for a pause (no lease token, so not counted as a lease; not claimable until locked_until), then
-- claimed again as any due job. Answers the ids deferred.
UPDATE job_runs j
SET lock_token = NULL, lease_kind = NULL, locked_until = now() + make_interval(secs => %(seconds)s)
FROM unnest(%(job_id)s::uuid[], %(lock_token)s::uuid[]) AS c(job_id, lock_token)
WHERE j.job_id = c.job_id AND j.lock_token = c.lock_token AND j.running_execution_id IS NULL
RETURNING j.job_id;

-- name: insert_calendar
-- A new calendar of its owner; nothing is returned when the name is taken.
INSERT INTO calendars (owner, name, timezone, definition)
VALUES (%(owner)s, %(name)s, %(timezone)s, %(definition)s)
ON CONFLICT (owner, name) DO NOTHING
RETURNING *;

-- name: get_calendar
SELECT * FROM calendars WHERE owner = %(owner)s AND name = %(name)s;

-- name: list_calendars
-- Keyset pagination on (owner, name), as list_jobs.
SELECT * FROM calendars
WHERE owner = %(owner)s AND (%(after_name)s::text IS NULL OR name > %(after_name)s::text)
ORDER BY name
LIMIT %(limit)s;

-- name: replace_calendar
-- With an expected version (If-Match), only that version is replaced; the caller tells an absent
-- calendar from a changed one, or from one that would not change, by reading it again (a
-- replacement by what it has writes nothing). The calendar as it was (prior_*, held by the CTE)
-- is answered too: the change log's diff.
WITH prior AS (
    SELECT timezone, definition FROM calendars WHERE owner = %(owner)s AND name = %(name)s FOR UPDATE
)
UPDATE calendars c
SET timezone = %(timezone)s, definition = %(definition)s, version = c.version + 1, updated_at = now()
FROM prior
WHERE c.owner = %(owner)s AND c.name = %(name)s
  AND (%(expected_version)s::integer IS NULL OR c.version = %(expected_version)s::integer)
  AND (c.timezone, c.definition) IS DISTINCT FROM (%(timezone)s::text, %(definition)s::jsonb)
RETURNING c.*, prior.timezone AS prior_timezone, prior.definition AS prior_definition;

-- name: lock_calendar
-- A calendar held for its delete, so that the jobs that name it are read with it held.
SELECT * FROM calendars WHERE owner = %(owner)s AND name = %(name)s FOR UPDATE;

-- name: hold_calendars
-- The calendars a job being written names, held (FOR KEY SHARE) until the write commits: a
-- concurrent delete of one (lock_calendar, FOR UPDATE) waits for it, then finds the job and
-- answers 409; a calendar deleted first is absent here, and the write is refused (400).
SELECT name FROM calendars
WHERE owner = %(owner)s AND name = ANY(%(names)s::text[])
FOR KEY SHARE;

-- name: jobs_using_calendar
-- The owner's jobs that name the calendar (the partial GIN index of 0014 holds only jobs that name one).
SELECT id, name FROM job_specs
WHERE owner = %(owner)s AND exclude_calendars @> ARRAY[%(name)s::text] AND exclude_calendars <> '{}'
ORDER BY name
LIMIT %(limit)s;

-- name: jobs_naming_calendar
-- Every job of the owner's that names the calendar, whole: a replacement checks and replans them.
SELECT * FROM jobs
WHERE owner = %(owner)s AND exclude_calendars @> ARRAY[%(name)s::text] AND exclude_calendars <> '{}'
ORDER BY name;

-- name: delete_calendar
DELETE FROM calendars WHERE owner = %(owner)s AND name = %(name)s;

-- name: calendars_of
-- The calendars named by (owner, name) pairs: those of the jobs a completion plans, in one read.
SELECT c.* FROM calendars c
JOIN unnest(%(owners)s::text[], %(names)s::text[]) AS wanted(owner, name)
  ON c.owner = wanted.owner AND c.name = wanted.name;
-- name: alert_jobs
-- The jobs with alert rules, those checked longest ago first: what a sweep of the alerts reads.
-- A job's own rules: the partial index of 0017 holds only them; an owner's rules by tag (0020):
-- per rule set, the tag index of 0008 (jobs with tags only). Jobs without rules are never read.
WITH wanted AS (
    SELECT id FROM job_specs WHERE alerts IS NOT NULL
    UNION
    SELECT t.id FROM alert_rules ar
    JOIN job_specs t ON t.owner = ar.owner AND t.tags @> ARRAY[ar.tag::text] AND t.tags <> '{}'
)
SELECT s.id, s.owner, s.name, s.alerts, r.state, r.next_run_at
FROM wanted w
JOIN job_specs s ON s.id = w.id
JOIN job_runs r ON r.job_id = s.id
LEFT JOIN alert_states a ON a.job_id = s.id
ORDER BY a.checked_at NULLS FIRST
LIMIT %(limit)s;

-- fragment: tag_rules_of_s
-- The owner's rule sets (0020) whose tag the job s carries, by name: {name, alerts} each, and
-- when the first of them was last written (NULL: none).
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object('name', ar.name, 'alerts', ar.alerts) ORDER BY ar.name) AS tag_rules,
           min(ar.updated_at) AS tag_rules_since
    FROM alert_rules ar
    WHERE ar.owner = s.owner AND s.tags @> ARRAY[ar.tag::text]
) tagged ON true

-- name: ensure_alert_state
-- A job's alert state, its executions read from when its rules were last written (a job's own
-- rules: the job's write; rules by tag only: the later of the job's write and the rule set's).
INSERT INTO alert_states (job_id, seen_started_at, seen_seq)
SELECT s.id, CASE WHEN s.alerts IS NOT NULL THEN s.updated_at ELSE GREATEST(s.updated_at, tagged.tag_rules_since) END, 0
FROM job_specs s
{{ tag_rules_of_s }}
WHERE s.id = %(job_id)s AND (s.alerts IS NOT NULL OR tagged.tag_rules IS NOT NULL)
ON CONFLICT (job_id) DO NOTHING;

-- name: lock_alert_state
-- The job's alert state held while the sweep decides, with the job as it is now (its own rules
-- and the rule sets of its tags); another runner's sweep of the same job skips it (its decision
-- is being made).
SELECT a.*, s.owner, s.name, s.alerts, r.state, r.next_run_at, now() AS db_now, tagged.tag_rules
FROM alert_states a
JOIN job_specs s ON s.id = a.job_id
JOIN job_runs r ON r.job_id = a.job_id
{{ tag_rules_of_s }}
WHERE a.job_id = %(job_id)s AND (s.alerts IS NOT NULL OR tagged.tag_rules IS NOT NULL)
FOR UPDATE OF a SKIP LOCKED;

-- name: executions_after
-- The job's executions after (started_at, seq), oldest first: the primary key's order (0009);
-- the bound on started_at leaves the older day partitions out.
SELECT * FROM executions
WHERE job_id = %(job_id)s AND started_at >= %(started_at)s
  AND (started_at, seq) > (%(started_at)s::timestamptz, %(seq)s::bigint)
ORDER BY started_at, seq
LIMIT %(limit)s;

-- name: save_alert_state
UPDATE alert_states
SET seen_started_at = %(seen_started_at)s, seen_seq = %(seen_seq)s, failures_in_row = %(failures_in_row)s,
    incident_id = %(incident_id)s, incident_opened_at = %(incident_opened_at)s, fired = %(fired)s,
    checked_at = now()
WHERE job_id = %(job_id)s;

-- name: insert_alert_delivery
-- One alert per rule, event and incident (the unique key): a second decision of the same is a no-op.
-- created_at is the clock's, not the transaction's: the alerts of one sweep list in the order decided.
INSERT INTO alert_deliveries (id, owner, job_id, job_name, rule_key, rule_on, threshold, event, incident_id,
                              execution_id, target, vars, created_at, next_attempt_at, rule_name)
VALUES (%(id)s, %(owner)s, %(job_id)s, %(job_name)s, %(rule_key)s, %(rule_on)s, %(threshold)s, %(event)s,
        %(incident_id)s, %(execution_id)s, %(target)s, %(vars)s, clock_timestamp(), now(), %(rule_name)s)
ON CONFLICT (incident_id, rule_key, event) DO NOTHING;

-- name: claim_alert_deliveries
-- Pending alerts due for an attempt, leased to this runner (SKIP LOCKED: two runners never send
-- one alert at once; an expired lease is taken over). Each claim counts an attempt. The lease
-- covers the target's own timeout (up to 900 s) and %(lease_seconds)s more: an attempt still
-- sending keeps its alert (a fixed 60 s let a second runner send a slow hook's alert again).
WITH due AS (
    SELECT id FROM alert_deliveries
    WHERE status = 'pending' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now())
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE alert_deliveries d
SET locked_until = now() + make_interval(secs => COALESCE((d.target->>'timeout_seconds')::float, 30)
                                                 + %(lease_seconds)s),
    attempts = d.attempts + 1
FROM due
WHERE d.id = due.id
RETURNING d.*;

-- name: extend_alert_leases
-- Alerts being sent (each by its id and the attempt its sender holds) kept that many more seconds,
-- in one statement however many: local mode's sends under way when the machine woke from a sleep,
-- whose leases ran out while it slept (another runner would take them over and send them again).
-- An attempt already taken over is not kept, nor one recorded (its lease released: a retry to come
-- keeps its status and its count). Answers the ids kept.
UPDATE alert_deliveries d SET locked_until = GREATEST(d.locked_until, now() + make_interval(secs => h.seconds))
FROM unnest(%(id)s::uuid[], %(attempt)s::integer[], %(seconds)s::float8[]) AS h(id, attempt, seconds)
WHERE d.id = h.id AND d.status = 'pending' AND d.attempts = h.attempt AND d.locked_until IS NOT NULL
RETURNING d.id::text AS id;

-- name: record_alert_delivery
-- An attempt's outcome: delivered, given up (failed), or pending again after %(retry_in)s seconds.
-- Fenced by the attempt (each claim counts one): an attempt whose lease another runner took over
-- writes nothing over that runner's.
UPDATE alert_deliveries
SET status = %(status)s, locked_until = NULL, last_error = %(error)s, http_status = %(http_status)s,
    delivered_at = CASE WHEN %(status)s = 'delivered' THEN now() END,
    next_attempt_at = now() + make_interval(secs => %(retry_in)s)
WHERE id = %(id)s AND status = 'pending' AND (%(attempt)s::integer IS NULL OR attempts = %(attempt)s::integer);

-- name: list_alerts
-- The owner's alert deliveries, newest first; keyset pagination on (created_at, id).
SELECT * FROM alert_deliveries
WHERE owner = %(owner)s
  AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s::uuid)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(before_created_at)s::timestamptz IS NULL
       OR (created_at, id) < (%(before_created_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: alert_work
-- Whether a sweep of the alerts has anything to do (a deployment's fan-out asks once a tick
-- before it invokes one): a job with rules, a rule set by tag, or an alert still to send. Each
-- reads a partial index or a small table.
SELECT EXISTS (SELECT 1 FROM job_specs WHERE alerts IS NOT NULL)
    OR EXISTS (SELECT 1 FROM alert_rules)
    OR EXISTS (SELECT 1 FROM alert_deliveries WHERE status = 'pending') AS found;

-- name: lock_target_limit
-- A slot's taker, first: the key's row, created or updated with the limits given, held until the
-- transaction ends, so that the takers of one key count its slots one at a time (the count is
-- the next statement's, which sees every slot committed before this lock was granted).
INSERT INTO target_limits (key, max_in_flight, per_second)
VALUES (%(key)s, %(max_in_flight)s, %(per_second)s)
ON CONFLICT (key) DO UPDATE
SET max_in_flight = EXCLUDED.max_in_flight, per_second = EXCLUDED.per_second, updated_at = now()
RETURNING key;

-- name: take_target_slot
-- Then, in the same transaction: a slot, if the key has fewer than max_in_flight held (released
-- and expired ones do not count) and fewer than per_second taken in the last second; a per_second
-- below 1 is one start in each 1/per_second seconds (0.1: one every 10 s). The key's slots
-- released (or expired) before that window are deleted on the way. Answers the token, or nothing.
WITH win AS (
    SELECT clock_timestamp() - make_interval(secs => greatest(1.0, 1.0 / COALESCE(%(per_second)s::float, 1.0))) AS since
), gone AS (
    DELETE FROM target_slots
    WHERE key = %(key)s AND (released_at < (SELECT since FROM win) OR until < (SELECT since FROM win))
), counts AS (
    SELECT count(*) FILTER (WHERE released_at IS NULL AND until > clock_timestamp()) AS in_flight,
           count(*) FILTER (WHERE acquired_at > (SELECT since FROM win)) AS in_window
    FROM target_slots WHERE key = %(key)s
)
INSERT INTO target_slots (token, key, job_id, until)
SELECT %(token)s, %(key)s, %(job_id)s, clock_timestamp() + make_interval(secs => %(lease_seconds)s)
FROM counts
WHERE (%(max_in_flight)s::integer IS NULL OR in_flight < %(max_in_flight)s::integer)
  AND (%(per_second)s::float IS NULL OR in_window < greatest(1.0, %(per_second)s::float))
RETURNING token;

-- name: running_version
-- A started job's version while its execution runs under its lease (fenced by the token): read by
-- a delivery that waited for its slot before it calls the target. An edit or a pause meanwhile
-- moved the version on; no row: the lease was lost, or the job deleted.
SELECT version FROM job_runs
WHERE job_id = %(job_id)s AND lock_token = %(lock_token)s AND running_execution_id = %(execution_id)s;

-- name: release_target_slot
UPDATE target_slots SET released_at = clock_timestamp() WHERE token = %(token)s;

-- name: extend_target_slots
-- Slots still held (each by its token) kept that many more seconds, in one statement however
-- many: local mode's deliveries under way when the machine woke from a sleep, whose slots'
-- leases ran out while it slept (the limit would let others take them). Answers the tokens kept.
UPDATE target_slots s SET until = GREATEST(s.until, clock_timestamp() + make_interval(secs => h.seconds))
FROM unnest(%(token)s::uuid[], %(seconds)s::float8[]) AS h(token, seconds)
WHERE s.token = h.token AND s.released_at IS NULL
RETURNING s.token::text AS token;

-- name: record_wait
-- A delivery that waited for its target's slot, about to call the target: how long and why, on
-- its execution (added to what it already waited when it started after a hand-back,
-- hand_back_for_slot), and its start moved to now, as a deployed delivery's after a hand-back
-- starts when it is claimed again: its lateness counts the wait, its duration the target's call.
-- The job's last_run_at moves with it (the execution's key, job and start), under the lease's
-- token; nothing is written, and no row answered, if the lease was lost. A wait across midnight
-- moves the row to the next day's partition.
WITH run AS (
    UPDATE job_runs SET last_run_at = now()
    WHERE job_id = %(job_id)s AND lock_token = %(lock_token)s AND running_execution_id = %(execution_id)s
      AND last_run_at = %(started_at)s
    RETURNING last_run_at
)
UPDATE executions
SET waited_ms = COALESCE(waited_ms, 0) + %(waited_ms)s, waited_for = %(waited_for)s,
    started_at = (SELECT last_run_at FROM run)
WHERE job_id = %(job_id)s AND started_at = %(started_at)s AND id = %(execution_id)s AND EXISTS (SELECT FROM run)
RETURNING started_at;

-- name: hand_back_for_slot
-- A deployed executor's limited delivery whose key stayed full: its start undone, in one statement
-- fenced by the lease's token and the execution's id. The running execution, which never called
-- the target, is removed; the attempt is not counted; last_run_at goes back to the run before
-- (the newest execution left); the lease now ends after a pause, when a fan-out claims the job
-- again (nothing is lost: an expired lease without a running execution is claimed as any due
-- job). The wait began at the first hand-back of this occurrence (an execution started after one
-- carries that wait in waited_ms), else when this delivery began to wait; the pause is half the
-- wait so far, within its bounds, with a quarter of jitter either way, so that the waits of one
-- key spread out and back off. The claim is spent (its token cleared, as defer_claims does): no
-- executor is at work on the job during its pause, so it is not a live lease (count_live_leases,
-- owners_over_lease_share), and a duplicate invoke of the claim starts nothing. Answers the job's
-- id when handed back, nothing when the lease was taken over.
WITH waited AS (
    SELECT COALESCE(
        (SELECT e.started_at - make_interval(secs => e.waited_ms / 1000.0) FROM executions e
         WHERE e.job_id = %(job_id)s AND e.started_at = %(started_at)s AND e.id = %(execution_id)s),
        now() - make_interval(secs => %(waited_seconds)s)) AS since
), run AS (
    UPDATE job_runs j
    SET running_execution_id = NULL,
        attempt = CASE WHEN j.lease_kind = 'schedule' THEN j.attempt - 1 ELSE j.attempt END,
        locked_until = now() + make_interval(secs => (0.75 + random() / 2) * LEAST(
            GREATEST(extract(epoch FROM now() - waited.since)::float8 / 2, %(min_pause_seconds)s),
            %(max_pause_seconds)s)),
        last_run_at = (SELECT max(e.started_at) FROM executions e
                       WHERE e.job_id = j.job_id AND NOT (e.started_at = %(started_at)s AND e.id = %(execution_id)s)),
        slot_wait_since = waited.since,
        slot_wait_for = %(waited_for)s,
        lock_token = NULL,
        lease_kind = NULL
    FROM waited
    WHERE j.job_id = %(job_id)s AND j.lock_token = %(lock_token)s AND j.running_execution_id = %(execution_id)s
    RETURNING j.job_id
), unstarted AS (
    DELETE FROM executions e USING run
    WHERE e.job_id = run.job_id AND e.started_at = %(started_at)s AND e.id = %(execution_id)s
)
SELECT job_id FROM run;

-- name: extend_leases
-- Deliveries waiting for their target's slot keep their leases (each fenced by its token, kept
-- by its own seconds), in one statement however many wait (local mode's waiting room): answers
-- the ids of the jobs whose lease still stood and was kept.
UPDATE job_runs j SET locked_until = GREATEST(j.locked_until, now() + make_interval(secs => w.seconds))
FROM unnest(%(job_id)s::uuid[], %(lock_token)s::uuid[], %(seconds)s::float8[]) AS w(job_id, lock_token, seconds)
WHERE j.job_id = w.job_id AND j.lock_token = w.lock_token AND j.running_execution_id IS NOT NULL
RETURNING j.job_id::text AS job_id;

-- name: purge_alerts
-- Alerts past the retention (the executions'), delivered or given up, a batch at a time; and the
-- alert state of jobs deleted since, or left without rules (their own removed, their tag or its
-- rule set gone): rules given again start from their writing, not from this old state.
WITH states AS (
    DELETE FROM alert_states a
    WHERE NOT EXISTS (
        SELECT 1 FROM job_specs s
        WHERE s.id = a.job_id
          AND (s.alerts IS NOT NULL
               OR EXISTS (SELECT 1 FROM alert_rules ar WHERE ar.owner = s.owner AND s.tags @> ARRAY[ar.tag::text]))
    )
)
DELETE FROM alert_deliveries
WHERE id IN (SELECT id FROM alert_deliveries
             WHERE status <> 'pending' AND created_at < now() - make_interval(days => %(retention_days)s)
             LIMIT 1000);
-- name: insert_backfill
-- A backfill's occurrences (0015), planned by the service from the job as read; its deliveries are
-- handed over by pump_backfills. Answers the job's version too, for its change-log entry (0027).
WITH spec AS (
    SELECT s.id, s.owner, r.version FROM job_specs s JOIN job_runs r ON r.job_id = s.id
    WHERE s.id = %(job_id)s AND s.owner = %(owner)s
), backfill AS (
    INSERT INTO backfills (id, job_id, owner, occurrences, interval_seconds)
    SELECT %(id)s, spec.id, spec.owner, %(occurrences)s::timestamptz[], %(interval_seconds)s FROM spec
    RETURNING id
)
SELECT backfill.id, spec.version FROM backfill, spec;

-- name: pump_backfills
-- The primary fan-out, every second: each backfill whose next delivery is due hands its next
-- occurrence to its job as a manual request carrying it (backfill_at), when the job has no request
-- pending; the claim then takes it under the job's lease like any manual run, so a backfill never
-- runs beside a live execution, and no faster than one every interval_seconds. One backfill per
-- job at a time (the oldest); the job's run state's row is locked first (get_job_for_update).
-- A retry waiting (retry_at, 0019) goes first, once its time has come: the occurrence that failed
-- again, with the attempt it is (attempt: record_started counts it), before the next one.
WITH candidate AS (
    SELECT b.id FROM backfills b
    WHERE b.finished_at IS NULL AND COALESCE(b.retry_at, b.next_at) <= now()
      AND b.id = (SELECT o.id FROM backfills o WHERE o.job_id = b.job_id AND o.finished_at IS NULL
                  ORDER BY o.created_at, o.id LIMIT 1)
    ORDER BY b.next_at
    LIMIT %(limit)s
), ready AS (
    SELECT b.id, b.job_id, b.retry_at IS NOT NULL AS retrying,
           CASE WHEN b.retry_at IS NULL THEN b.occurrences[b.position + 1] ELSE b.retry_of END AS at,
           CASE WHEN b.retry_at IS NOT NULL THEN b.retry_attempt END AS attempt
    FROM candidate c JOIN backfills b ON b.id = c.id JOIN job_runs r ON r.job_id = b.job_id
    -- Handed over only to an idle job (no request pending, no lease held): a delivery handed
    -- over while the job ran waited in its request slot, where a chained run asked for meanwhile
    -- would join it rather than run on its own.
    WHERE r.manual_run_at IS NULL AND (r.locked_until IS NULL OR r.locked_until < now())
    FOR UPDATE OF r, b SKIP LOCKED
), run AS (
    UPDATE job_runs r
    SET manual_run_at = now(),
        manual_overrides = jsonb_strip_nulls(jsonb_build_object('backfill_at', ready.at, 'attempt', ready.attempt))
    FROM ready WHERE r.job_id = ready.job_id
    RETURNING r.job_id
)
UPDATE backfills b
SET position = CASE WHEN ready.retrying THEN b.position ELSE b.position + 1 END,
    next_at = now() + make_interval(secs => b.interval_seconds), retry_at = NULL,
    finished_at = CASE WHEN b.position + (CASE WHEN ready.retrying THEN 0 ELSE 1 END) >= cardinality(b.occurrences)
                       THEN now() END
FROM ready JOIN run ON run.job_id = ready.job_id
WHERE b.id = ready.id
RETURNING b.id;

-- name: record_shifts
-- In the transaction of their completions: where a calendar moved each execution's occurrence
-- from (0025). One element per execution: its job, id and started_at (the partition's key, whose
-- bounds prune the days read), the occurrence it was moved from and the calendar.
WITH shift AS (
    SELECT * FROM jsonb_to_recordset(%(shifts)s::jsonb)
        AS s(job_id uuid, execution_id uuid, started_at timestamptz, shifted_from timestamptz, excluded_by text)
)
UPDATE executions e
SET shifted_from = shift.shifted_from, excluded_by = shift.excluded_by
FROM shift
WHERE e.job_id = shift.job_id AND e.started_at = shift.started_at AND e.id = shift.execution_id
  AND e.started_at BETWEEN (SELECT min(started_at) FROM shift) AND (SELECT max(started_at) FROM shift);

-- name: record_backfill_retries
-- In the transaction of their completions (only when a failed backfill delivery is to be retried:
-- other completions run no such statement): the retry each asks its backfill for, a JSON array of
-- [job_id, occurrence, the attempt it will be, when, the failed attempt's start, max_age_seconds
-- or null]. The backfill is the job's latest that handed the occurrence over; it is open again if
-- that was its last. max_age_seconds counts from the occurrence's first attempt (retry_since):
-- a retry later than that is not recorded.
WITH retry AS (
    SELECT (r->>0)::uuid AS job_id, (r->>1)::timestamptz AS occurrence, (r->>2)::integer AS attempt,
           (r->>3)::timestamptz AS at, (r->>4)::timestamptz AS started_at, (r->>5)::float AS max_age
    FROM jsonb_array_elements(%(retries)s::jsonb) AS r
), target AS (
    SELECT DISTINCT ON (retry.job_id) b.id, retry.*,
           CASE WHEN retry.attempt <= 2 OR b.retry_of IS DISTINCT FROM retry.occurrence OR b.retry_since IS NULL
                THEN retry.started_at ELSE b.retry_since END AS since
    FROM retry JOIN backfills b ON b.job_id = retry.job_id AND retry.occurrence = ANY (b.occurrences[1:b.position])
    ORDER BY retry.job_id, b.created_at DESC, b.id DESC
)
UPDATE backfills b
SET retry_of = t.occurrence, retry_attempt = t.attempt, retry_at = t.at, retry_since = t.since, finished_at = NULL
FROM target t
WHERE b.id = t.id AND (t.max_age IS NULL OR t.at <= t.since + make_interval(secs => t.max_age))
RETURNING b.id;
-- name: request_chained_runs
-- Chained runs (0016): the finished executions of a completion, written just before in the same
-- transaction, ask for a run of the jobs their chains name (names or ids of the same owner; a
-- name or id that no longer names a job is passed over). %(chains)s is a JSON array of
-- {"owner", "names": [...], "ids": [...], "cause": {...}}. Each job is asked for as by
-- request_manual_run (a request pending coalesces; one made while a manual run is under way is a
-- new one, new_request), with the cause its run's execution records (caused_by) and renders ({{cause.*}}).
-- The rows are locked in id order, so two completions asking for the same jobs cannot deadlock.
WITH chain AS (
    SELECT c->>'owner' AS owner, ARRAY(SELECT jsonb_array_elements_text(c->'names')) AS names,
           ARRAY(SELECT jsonb_array_elements_text(c->'ids'))::uuid[] AS ids, c->'cause' AS cause, n
    FROM jsonb_array_elements(%(chains)s::jsonb) WITH ORDINALITY AS t(c, n)
), target AS (
    -- A reference that is the id of one of the owner's jobs names that job only, not a job that
    -- has it as its name (such names are refused since, but may be stored): as resolve_jobs and
    -- the write's cycle check read it.
    SELECT DISTINCT ON (s.id) s.id, chain.cause
    FROM chain JOIN job_specs s ON s.owner = chain.owner
        AND (s.id = ANY(chain.ids)
             OR (s.name = ANY(chain.names)
                 AND NOT EXISTS (SELECT FROM job_specs o
                                 WHERE o.owner = chain.owner AND o.id = ANY(chain.ids) AND o.id::text = lower(s.name))))
    ORDER BY s.id, chain.n DESC
), locked AS (
    -- A backfill delivery handed over but not started yet (backfill_at in a slot that is no run
    -- under way) gives the slot up to the chained run: joined, it ran as the backfill's
    -- occurrence with the chain's cause, and the chained run never ran as itself.
    SELECT r.job_id, target.cause, {{ new_request }} AS new_request,
           CASE WHEN NOT {{ new_request }} THEN (r.manual_overrides->>'backfill_at')::timestamptz END AS backfill_at,
           (r.manual_overrides->>'attempt')::integer AS backfill_attempt
    FROM job_runs r JOIN target ON target.id = r.job_id
    ORDER BY r.job_id
    FOR UPDATE OF r
), given_back AS (
    -- Its backfill (the job's latest that handed the occurrence over) hands it over again, at
    -- once, once the job is idle: the same occurrence, the same attempt (a retry's is waiting).
    SELECT DISTINCT ON (locked.job_id) b.id, locked.backfill_attempt
    FROM locked JOIN backfills b ON b.job_id = locked.job_id
    WHERE locked.backfill_at IS NOT NULL
      AND CASE WHEN locked.backfill_attempt IS NULL THEN b.occurrences[b.position] = locked.backfill_at
               ELSE b.retry_of = locked.backfill_at END
    ORDER BY locked.job_id, b.created_at DESC, b.id DESC
), backfill AS (
    UPDATE backfills b
    SET position = CASE WHEN given_back.backfill_attempt IS NULL THEN b.position - 1 ELSE b.position END,
        retry_at = CASE WHEN given_back.backfill_attempt IS NULL THEN b.retry_at ELSE now() END,
        next_at = now(), finished_at = NULL
    FROM given_back WHERE b.id = given_back.id
)
UPDATE job_runs r
SET manual_run_at = CASE WHEN locked.new_request OR locked.backfill_at IS NOT NULL THEN now() ELSE r.manual_run_at END,
    -- A new request carries no overrides: those in the slot are the run's under way (a run now's
    -- one-off body and headers, a backfill's occurrence), which must not run again.
    manual_overrides = CASE WHEN locked.new_request OR locked.backfill_at IS NOT NULL THEN NULL
                            ELSE r.manual_overrides END,
    pending_cause = locked.cause
FROM locked
WHERE r.job_id = locked.job_id
RETURNING r.job_id::text AS job_id;

-- name: hold_chains
-- A write of a job with chains, first: the owner's chain_owners row (0021), created or updated,
-- held until the transaction ends, so that the owner's chain writes check for cycles one at a
-- time (the reads that follow see every chain committed before this lock was granted).
INSERT INTO chain_owners (owner) VALUES (%(owner)s)
ON CONFLICT (owner) DO UPDATE SET held_at = now();

-- name: chain_links
-- The owner's jobs that chain to others (0016), to refuse a write that would close a cycle.
SELECT id::text AS id, name, on_success, on_failure, on_complete FROM job_specs
WHERE owner = %(owner)s AND (on_success <> '{}' OR on_failure <> '{}' OR on_complete <> '{}');

-- name: resolve_jobs
-- The owner's jobs named (by name or id) in a chain being written: their ids and names.
SELECT id::text AS id, name FROM job_specs
WHERE owner = %(owner)s AND (name = ANY(%(names)s::text[]) OR id = ANY(%(ids)s::uuid[]));

-- name: insert_job_change
-- An entry of a job's change log (0016), in the transaction of the change it records: the
-- version the change left, the database's now (the transaction's).
INSERT INTO job_changes (job_id, owner, actor, action, version, diff)
VALUES (%(job_id)s, %(owner)s, %(actor)s, %(action)s, %(version)s, %(diff)s);

-- name: list_job_changes
-- A page of a job's change log, newest first (its key read backwards): the owner's entries only,
-- kept after the job's delete. The cursor is the last seq seen.
SELECT job_id::text AS subject, seq, at, actor, action, version, diff FROM job_changes
WHERE job_id = %(job_id)s AND owner = %(owner)s
  AND (%(before_seq)s::bigint IS NULL OR seq < %(before_seq)s::bigint)
ORDER BY seq DESC
LIMIT %(limit)s;

-- name: purge_job_changes
-- Retention of the change log: the entries of jobs deleted more than the executions' retention
-- ago, a small batch a call (the partitions' upkeep calls it after its own).
WITH gone AS (
    SELECT job_id FROM job_changes
    WHERE action = 'delete' AND at < now() - make_interval(days => %(retention_days)s::integer)
    ORDER BY at
    LIMIT %(limit)s
)
DELETE FROM job_changes c USING gone WHERE c.job_id = gone.job_id;

-- name: insert_resource_change
-- An entry of a calendar's or a rule set's change log (0023), in the transaction of its change.
INSERT INTO resource_changes (owner, kind, name, actor, action, version, diff)
VALUES (%(owner)s, %(kind)s, %(name)s, %(actor)s, %(action)s, %(version)s, %(diff)s);

-- name: list_resource_changes
-- A page of a calendar's or a rule set's change log, newest first (its key read backwards), kept
-- after its delete. The cursor is the last seq seen.
SELECT name AS subject, seq, at, actor, action, version, diff FROM resource_changes
WHERE owner = %(owner)s AND kind = %(kind)s AND name = %(name)s
  AND (%(before_seq)s::bigint IS NULL OR seq < %(before_seq)s::bigint)
ORDER BY seq DESC
LIMIT %(limit)s;

-- name: purge_resource_changes
-- Retention of the calendars' and rule sets' change log, as purge_job_changes: the entries up to
-- a delete made more than the executions' retention ago (a name made again keeps what came after).
WITH gone AS (
    SELECT owner, kind, name, seq FROM resource_changes
    WHERE action = 'delete' AND at < now() - make_interval(days => %(retention_days)s::integer)
    ORDER BY at
    LIMIT %(limit)s
)
DELETE FROM resource_changes c USING gone
WHERE c.owner = gone.owner AND c.kind = gone.kind AND c.name = gone.name AND c.seq <= gone.seq;

-- name: put_alert_rule
-- An owner's rule set by tag (0020), created or replaced (version + 1); "created" says which. The
-- set as it was (prior_*, held by the CTE; NULL when created) is answered too: the change log's diff.
-- The CTE is joined into the insert's row so that it is read (and the row held) before the write:
-- read first from RETURNING, it would find the row already updated by this statement, and skip it.
-- A WITH query runs once per statement: RETURNING reads what it held then.
WITH prior AS (
    SELECT tag, alerts FROM alert_rules WHERE owner = %(owner)s AND name = %(name)s FOR UPDATE
)
INSERT INTO alert_rules (owner, name, tag, alerts)
SELECT %(owner)s, %(name)s, %(tag)s, %(alerts)s FROM (SELECT 1) AS one LEFT JOIN prior ON true
ON CONFLICT (owner, name) DO UPDATE
SET tag = EXCLUDED.tag, alerts = EXCLUDED.alerts, version = alert_rules.version + 1, updated_at = now()
-- A replacement by what the set has writes nothing (no row: the caller reads it again).
WHERE (alert_rules.tag, alert_rules.alerts) IS DISTINCT FROM (EXCLUDED.tag, EXCLUDED.alerts)
RETURNING *, (xmax = 0) AS created, (SELECT tag FROM prior) AS prior_tag, (SELECT alerts FROM prior) AS prior_alerts;

-- name: create_alert_rule
-- A rule set created only when the owner has none of that name (If-None-Match: *): no row when
-- it has one, which is left as it is.
INSERT INTO alert_rules (owner, name, tag, alerts)
VALUES (%(owner)s, %(name)s, %(tag)s, %(alerts)s)
ON CONFLICT (owner, name) DO NOTHING
RETURNING *, true AS created, NULL::text AS prior_tag, NULL::jsonb AS prior_alerts;

-- name: replace_alert_rule
-- A rule set replaced only at the version expected (If-Match): never created. No row: absent or
-- changed, which the caller tells apart by reading it again. With the set as it was (prior_*).
WITH prior AS (
    SELECT tag, alerts FROM alert_rules WHERE owner = %(owner)s AND name = %(name)s FOR UPDATE
)
UPDATE alert_rules r
SET tag = %(tag)s, alerts = %(alerts)s, version = r.version + 1, updated_at = now()
FROM prior
WHERE r.owner = %(owner)s AND r.name = %(name)s AND r.version = %(expected_version)s::integer
  AND (r.tag, r.alerts) IS DISTINCT FROM (%(tag)s::text, %(alerts)s::jsonb)
RETURNING r.*, false AS created, prior.tag AS prior_tag, prior.alerts AS prior_alerts;

-- name: get_alert_rule
SELECT * FROM alert_rules WHERE owner = %(owner)s AND name = %(name)s;

-- name: list_alert_rules
-- Keyset pagination on (owner, name), as list_calendars.
SELECT * FROM alert_rules
WHERE owner = %(owner)s AND (%(after_name)s::text IS NULL OR name > %(after_name)s::text)
ORDER BY name
LIMIT %(limit)s;

-- name: delete_alert_rule
-- The set deleted, as it was (its change-log entry).
DELETE FROM alert_rules WHERE owner = %(owner)s AND name = %(name)s RETURNING *;

-- name: a_stored_secret
-- One secret stored in a job's target (its token), or nothing: local mode checks at start that
-- its key file opens what the database holds. A scan of the specifications, once a start.
SELECT substring(target::text FROM 'enc:v1:[A-Za-z0-9_-]+') AS token
FROM job_specs WHERE target::text LIKE '%%enc:v1:%%' LIMIT 1;

-- name: record_parked
-- The pause's record of the jobs the runner paused with their completion (their next run took
-- too long to plan against their calendars): why, by the scheduler, since now; and its entry in
-- the job's change log (a pause by the scheduler, at the version the completion left).
WITH parked AS (
    UPDATE job_specs s SET pause_note = p.note, paused_by = 'scheduler', paused_at = now(), pause_until = NULL
    FROM unnest(%(job_id)s::uuid[], %(note)s::text[]) AS p(job_id, note)
    WHERE s.id = p.job_id
    RETURNING s.id, s.owner
)
INSERT INTO job_changes (job_id, owner, actor, action, version, diff)
SELECT parked.id, parked.owner, 'scheduler', 'pause', r.version, '{"state": {"from": "active", "to": "paused"}}'
FROM parked JOIN job_runs r ON r.job_id = parked.id;
