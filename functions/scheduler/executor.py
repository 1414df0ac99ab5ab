"""The executor: take one claim, deliver it, record the outcome.

Phase two of the lease: the executor first confirms its claim (the token still holds the job and
the lease has not expired) and extends the lease over the delivery; an invocation that arrives
after its lease was taken over does nothing. A failing target never raises: its failure is
recorded and the job moves on (durable retry, next occurrence or final failure). Only an
infrastructure fault (the database unreachable) raises, so that Lambda's async retry and the
dead-letter queue take over.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from scheduler import constants as c
from scheduler.lifecycle import Outcome
from scheduler.secrets import SecretError
from scheduler.store import StartedExecution, Store
from scheduler.targets import Delivery, DeliveryResult, TargetPolicy, deliver
from scheduler.telemetry import Metrics, NullMetrics

logger = logging.getLogger(__name__)

# Time kept back from the Lambda deadline for recording the outcome.
DEADLINE_RESERVE_SECONDS = 5.0
# Added to the target's timeout for the lease taken over the delivery.
LEASE_MARGIN_SECONDS = 30.0


@dataclass(frozen=True)
class ExecutionReport:
    """What one executor invocation did (the handler's answer)."""

    job_id: str
    outcome: str  # "lease_lost", "completed" or "fenced" (finished after losing the lease)
    execution_id: str | None = None
    status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"job_id": self.job_id, "outcome": self.outcome, "execution_id": self.execution_id,
                "status": self.status}


def execute_claim(event: Mapping[str, Any], *, store: Store, decrypt_target: Callable[[dict], dict],
                  policy: TargetPolicy, metrics: Metrics | None = None,
                  remaining_seconds: Callable[[], float] | None = None) -> ExecutionReport:
    """Run one claim (the fan-out's invoke payload: ``job_id``, ``lock_token``, ...)."""
    metrics = metrics or NullMetrics()
    job_id, token = str(event["job_id"]), str(event["lock_token"])
    started = store.start_execution(job_id, token, LEASE_MARGIN_SECONDS)
    began = time.monotonic()
    if started is None:
        logger.info("claim no longer holds the job; nothing to do", extra={"job_id": job_id})
        return ExecutionReport(job_id, "lease_lost")
    lateness_ms = (started.started_at - started.scheduled_at).total_seconds() * 1000
    metrics.milliseconds(c.METRIC_LATENESS_MS, max(lateness_ms, 0.0), trigger=started.trigger)
    log = {"job_id": job_id, "execution_id": started.execution_id, "attempt": started.attempt}
    max_attempts = int((started.job.get("retry") or {}).get("max_attempts", 3))
    if started.trigger != "manual" and started.attempt > max_attempts:
        # Earlier attempts were lost with their runners (a target that kills the executor, say):
        # give the occurrence up rather than redeliver it forever.
        result = DeliveryResult("failed", False, error=f"gave up: the {max_attempts} attempt(s) allowed were "
                                                       "made and the last was lost with its runner")
    else:
        result = _deliver(started, job_id, decrypt_target, policy, remaining_seconds, log)
    outcome = Outcome(status=result.status, retryable=result.retryable,
                      retry_after_seconds=result.retry_after_seconds, error=result.error)
    row = store.complete_execution(job_id, token, started.execution_id, outcome,
                                   http_status=result.http_status, response_excerpt=result.response_excerpt,
                                   started=started, elapsed_seconds=time.monotonic() - began)
    metrics.count(c.METRIC_EXECUTIONS, status=result.status)
    if row is None:
        logger.warning("lease lost during the delivery; outcome not recorded", extra={**log, "status": result.status})
        return ExecutionReport(job_id, "fenced", started.execution_id, result.status)
    logger.info("execution finished", extra={**log, "status": result.status, "http_status": result.http_status,
                                             "lateness_ms": round(lateness_ms)})
    return ExecutionReport(job_id, "completed", started.execution_id, result.status)


def _deliver(started: StartedExecution, job_id: str, decrypt_target: Callable[[dict], dict],
             policy: TargetPolicy, remaining_seconds: Callable[[], float] | None,
             log: dict[str, Any]) -> DeliveryResult:
    """Decrypt the target and deliver the started execution (never raises for the target)."""
    try:
        target = decrypt_target(dict(started.job["target"]))
    except SecretError as exc:  # a token that cannot be read: the job's fault, for good
        logger.error("cannot decrypt the target's secrets", extra={**log, "error": type(exc).__name__})
        return DeliveryResult("failed", False, error="the target's secrets cannot be decrypted")
    except Exception as exc:  # KMS throttled or unreachable: another attempt may do
        logger.warning("decrypting the target's secrets failed", extra={**log, "error": type(exc).__name__})
        return DeliveryResult("failed", True, error="the target's secrets could not be decrypted now "
                                                    f"({type(exc).__name__})")
    cap = None
    if remaining_seconds is not None:
        cap = max(remaining_seconds() - DEADLINE_RESERVE_SECONDS, 0.0)
    delivery = Delivery(job_id=job_id, execution_id=started.execution_id,
                        scheduled_at=started.scheduled_at, attempt=started.attempt)
    return deliver(target, delivery, policy, timeout_cap=cap)
