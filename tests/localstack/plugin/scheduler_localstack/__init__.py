"""LocalStack plugins for the scheduler's deployed-stack tests (see pyproject.toml)."""
