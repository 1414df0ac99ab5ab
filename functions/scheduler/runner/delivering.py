"""One delivery of a started execution (``deliver_started``): its target's secrets decrypted,
a manual run's overrides applied, and its time kept within the lease, as the process knows it.

The lease is set by the database (over the target's timeout plus a margin) when the claim or the
start commits. A delivery must end before it does: another runner may take the job over then
and deliver it again. So the delivery's time is capped by the lease this process can count on
(``StartedExecution.deliver_by``), and a delivery whose lease no longer leaves room for the
target's whole timeout (the database's answer reached the runner late) is not made
(``lease_too_short``): the executor hands it back instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.core.domain import Outcome, StartedExecution
from scheduler.core.errors import SecretError
from scheduler.targets.overrides import apply_overrides
from scheduler.targets.results import FAILED, Delivery, TargetPolicy
from scheduler.targets.router import deliver

logger = logging.getLogger("scheduler.runner.executor")  # the executor's lines, as before the move

# Time kept back from the Lambda deadline for recording the outcome.
DEADLINE_RESERVE_SECONDS = 5.0
# Added to the target's timeout for the lease taken over the delivery.
LEASE_MARGIN_SECONDS = 30.0


def log_fields(started: StartedExecution) -> dict[str, Any]:
    """The fields of a delivery's log lines."""
    return {"job_id": str(started.job.id), "execution_id": started.execution_id, "attempt": started.attempt}


def target_timeout(started: StartedExecution) -> float:
    """The target's ``timeout_seconds`` (30 by default), over which its lease is taken."""
    return float((started.job.target or {}).get("timeout_seconds") or 30)


def lease_too_short(started: StartedExecution) -> str | None:
    """Why a started execution is not to be delivered now, None when its lease leaves room for
    the target's whole timeout (``StartedExecution.deliver_by``). The lease is set by the
    database when the claim (or the start) commits, and runs from then: an answer that reached
    this runner late (a stalled connection, a paused process) may leave less of it than the
    delivery needs, or none, and another runner may have taken the job over. Such a delivery
    is handed back, its start undone, rather than made beside the other runner's."""
    if started.deliver_by is None:
        return None
    left, timeout = started.deliver_by - time.monotonic(), target_timeout(started)
    if left >= timeout:
        return None
    return (
        f"its lease left {max(left, 0.0):.0f} s for a delivery when it could begin (the target's timeout "
        f"is {timeout:g} s): the database's answer reached the runner late"
    )


def deliver_started(
    started: StartedExecution,
    job_id: str,
    decrypt_target: Callable[[dict], dict],
    policy: TargetPolicy,
    remaining_seconds: Callable[[], float] | None,
    log: dict[str, Any],
) -> Outcome:
    """Decrypt the target and deliver the started execution (never raises for the target). The
    delivery ends within the lease: the time the decryption took (KMS, slow or retried) comes
    off half the margin first, then off the target's timeout, so the lease never runs out under
    a delivery that is still going (another runner would deliver it again)."""
    began = time.monotonic()
    try:
        target = decrypt_target(dict(started.job.target or {}))
        if started.overrides:
            target = _overridden(target, started.overrides, decrypt_target)
    except SecretError as exc:  # a token that cannot be read: the job's fault, for good
        logger.error("cannot decrypt the target's secrets", extra={**log, "error": type(exc).__name__})
        return Outcome(FAILED, False, error="the target's secrets cannot be decrypted")
    except Exception as exc:  # KMS throttled or unreachable: another attempt may do
        logger.warning("decrypting the target's secrets failed", extra={**log, "error": type(exc).__name__})
        return Outcome(FAILED, True, error=f"the target's secrets could not be decrypted now ({type(exc).__name__})")
    # Half the margin is the decryption's; past that, it comes off the timeout, so that the other
    # half is left for recording the outcome under the lease.
    timeout = float(target.get("timeout_seconds") or 30)
    cap = timeout - max(0.0, time.monotonic() - began - LEASE_MARGIN_SECONDS / 2)
    if remaining_seconds is not None:
        cap = min(cap, remaining_seconds() - DEADLINE_RESERVE_SECONDS)
    if started.deliver_by is not None:  # the lease as this process knows it (a late answer)
        cap = min(cap, started.deliver_by - time.monotonic())
    cap = max(cap, 0.0)
    delivery = Delivery(
        job_id=job_id,
        execution_id=started.execution_id,
        scheduled_at=started.scheduled_at,
        attempt=started.attempt,
        owner=started.job.owner,
        cause=started.cause,
        vars=(started.overrides or {}).get("vars") or None,
    )
    return deliver(target, delivery, policy, timeout_cap=cap)


def _overridden(target: dict, overrides: Mapping[str, Any], decrypt_target: Callable[[dict], dict]) -> dict:
    """The target with a manual run's overrides; their credential headers, stored as secret-box
    tokens, decrypted through the target's own secret place (a header auth's ``value``)."""
    secret = {
        name: decrypt_target({"type": "http", "auth": {"type": "header", "value": token}})["auth"]["value"]
        for name, token in (overrides.get("secret_headers") or {}).items()
    }
    return apply_overrides(target, overrides, secret)
