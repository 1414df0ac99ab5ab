"""Local mode (`scheduler local`): the API, the runner and an embedded PostgreSQL in one
process, and its log lines."""
