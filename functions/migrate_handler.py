"""Lambda: apply the SQL migrations (a CloudFormation custom resource, on every deploy in which
the migrations changed). Connects to the database instance directly, not through RDS Proxy."""

from __future__ import annotations

from aws_lambda_powertools import Logger

from scheduler.db import conninfo_from_settings
from scheduler.migrations import migrate, migrations_digest
from scheduler.settings import get_settings

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict, context: object) -> dict:
    """Create/Update: migrate. Delete: nothing (the data outlives the stack's custom resource)."""
    if event.get("RequestType") == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "migrations")}
    applied = migrate(conninfo_from_settings(get_settings(), direct=True))
    logger.info("migrations applied", extra={"applied": applied})
    return {"PhysicalResourceId": "migrations", "Data": {"Applied": len(applied), "Digest": migrations_digest()}}
