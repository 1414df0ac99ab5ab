"""Planning: pure functions from a job and the database's now to the job's schedule columns
after each event (create, edit, pause, resume, an attempt)."""
