"""Storage: every read and write of jobs and executions, on Postgres (``postgres.Store``, with the
execution pages of ``history`` and the completion parameters of ``completions``), the connection
pools (``db``), the migrations (``migrations``) and the database URLs of the command line
(``database_urls``). This package module imports nothing, so the migrate function loads the
migrations without the store."""
