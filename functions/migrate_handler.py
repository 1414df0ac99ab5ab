"""Lambda: apply the SQL migrations (a CloudFormation custom resource, on every deploy in which
the migrations changed). Connects to the database instance directly, not through RDS Proxy, as
the master user; then gives the functions' application user its login (from its own secret), a
member of the database's own application role (migration 0011).

Rollback safety: the event carries the hash of the migrations the template was synthesized with
(``ResourceProperties.MigrationsHash``). When it is not the hash of the migrations this code
carries, the event belongs to another version of the stack (a rollback re-sending the old
properties) and the function does nothing: a schema only moves forward (expand, then contract).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from scheduler.settings import Settings, get_settings
from scheduler.store.db import conninfo_from_settings, read_secret
from scheduler.store.migrations import ensure_login, files_hash, migrate, migrations_digest
from scheduler.transport.custom_resources import respond
from scheduler.wiring import route_domain_logs_to

logger = Logger()
# The migrations' own lines (each one applied, a wait for a lock) are the domain package's: in
# the function's JSON log, as the other functions' (Lambda's root logger drops INFO).
route_domain_logs_to(logger)

PHYSICAL_ID = "migrations"


def on_event(
    event: dict, settings: Settings, *, secrets_client: Any = None, apply: Callable[..., list[int]] = migrate
) -> dict:
    """The custom resource's answer to ``event``; migrates only for this code's own hash."""
    physical_id = event.get("PhysicalResourceId", PHYSICAL_ID)
    if event.get("RequestType") == "Delete":
        return {"PhysicalResourceId": physical_id}
    wanted = (event.get("ResourceProperties") or {}).get("MigrationsHash")
    carried = files_hash()
    if wanted is not None and wanted != carried:
        logger.warning(
            "migrations hash of the event is not this code's: nothing done (rollback?)",
            extra={"event_hash": wanted, "code_hash": carried},
        )
        return {"PhysicalResourceId": physical_id, "Data": {"Applied": 0, "Skipped": "hash mismatch"}}
    conninfo = conninfo_from_settings(settings, direct=True, secrets_client=secrets_client)
    app = read_secret(settings.database_app_secret_arn, secrets_client) if settings.database_app_secret_arn else None
    # The login is named to the migrations: one that moves its privileges (0011) moves them in
    # the same transaction, and the running functions are never refused.
    applied = apply(conninfo, app_logins=[app["username"]] if app else [])
    logger.info("migrations applied", extra={"applied": applied})
    login = "none"
    if app:
        login = ensure_login(conninfo, app["username"], app["password"])
        logger.info("application login", extra={"username": app["username"], "login": login})
    return {
        "PhysicalResourceId": PHYSICAL_ID,
        "Data": {"Applied": len(applied), "Digest": migrations_digest(), "AppLogin": login},
    }


@logger.inject_lambda_context(log_event=False)
def handler(event: dict, context: object) -> dict:
    """Create/Update: migrate (when the hash is this code's). Delete: nothing (the data outlives
    the stack's custom resource). Answered to the provider framework, or to CloudFormation itself
    when the function is the resource's service token (the LocalStack variant)."""
    return respond(event, lambda request: on_event(dict(request), get_settings()))
