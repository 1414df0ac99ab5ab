-- 0021: one row per owner that has written a chain (on_success, on_failure, on_complete), held
-- (a row lock, until the transaction ends) by every write of a job with chains while it checks
-- them for a cycle: two such writes of one owner at once (A.on_success = [B] and B.on_success =
-- [A]) are checked one after the other, the second seeing the first's links, so exactly one is
-- refused. A row lock rather than an advisory lock: through RDS Proxy an advisory lock is
-- session state and pins the connection (DESIGN.md's invariants). Writes without chains, claims
-- and completions never touch it.
CREATE TABLE IF NOT EXISTS chain_owners (
    owner   text COLLATE "C" PRIMARY KEY,
    held_at timestamptz NOT NULL DEFAULT now()
);
