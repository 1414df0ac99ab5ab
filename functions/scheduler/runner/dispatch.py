"""The dispatch pipelines: how claims the fan-out took reach an executor.

Two pipelines, each named with the statement its claims are taken by (``ClaimMode``):

- ``LambdaDispatch`` (the deployment): leases only (``claim_due``); claims are handed to executor
  Lambdas by asynchronous invokes, one claim each while few are claimed at once, a group of up
  to ``claims_per_invoke`` each under a backlog (``group_claims``); the executor starts its
  claims (``start_execution``, ``start_executions``), delivers them and records the outcomes.
- ``InProcessDispatch`` (local mode, ``scheduler.runner.in_process``): claimed and started in
  one statement (``claim_and_start``), delivered by a pool of threads, and the outcomes recorded
  in batches through a ``TimedBatchBuffer``.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduler.core.domain import Claim

if TYPE_CHECKING:  # the fan-out Lambda does not load the delivery code
    from scheduler.ports import FanoutStore

logger = logging.getLogger(__name__)

# Fairness between owners in a deployment (LambdaDispatch): the share of the executors' reserved
# concurrency (the live leases) that one owner's jobs may hold once the jobs have more than one
# owner; a claim that would take an owner past it is deferred for DEFER_SECONDS (claimed again
# then), so one owner's slow targets leave a quarter of the executors to the others.
OWNER_LEASE_SHARE = 0.75
DEFER_SECONDS = 5.0

# How long a dispatch whose executors are all busy waits before counting the live leases again: a
# reserved concurrency of C turns over at most C / FULL_RECHECK_SECONDS invokes a second while full
# (at 0.5 s, 50 executors capped a burst near 100 jobs/s), and each count reads the due rows.
FULL_RECHECK_SECONDS = 0.1
#: Threads of a ``LambdaDispatch`` invoking at once (and connections of its client's pool).
INVOKE_THREADS = 16


@dataclass(frozen=True)
class ClaimMode:
    """Which statement a dispatch's claims are taken by (its ``name``, a query of queries.sql).

    ``claim_due`` leases due jobs for ``lease_seconds`` (the executor starts each later);
    ``claim_and_start`` leases and starts them at once, each lease over its target's timeout
    plus ``lease_margin_seconds``.
    """

    name: str
    lease_margin_seconds: float = 30.0

    def sized(self, room: int) -> int:
        """How many to claim with room for ``room``. ``claim_and_start`` writes its limit into the
        statement (a constant keeps its prepared plan: store.postgres), and a runner's room is
        any number from half its executors to all of them, each limit a statement of its own,
        planned at each of its first five calls on a connection: with 64 executors, 33 limits in
        turn kept most claims unprepared. Rounded down to three leading bits (32, 40, 48, 56,
        64, ...), a room asks at most a fifth less, in 5 statements instead of 33. ``claim_due``'s
        limit is a parameter (the fan-out Lambda's statements are never prepared): as asked."""
        if self.name != "claim_and_start" or room <= 8:
            return room
        shift = room.bit_length() - 3
        return (room >> shift) << shift

    def claim(self, store: FanoutStore, limit: int, lease_seconds: float) -> list[Claim]:
        """Take up to ``limit`` due jobs with this mode's statement."""
        if self.name == "claim_due":
            return store.claim_due(limit, lease_seconds)
        if self.name == "claim_and_start":
            return store.claim_and_start(limit, self.lease_margin_seconds)
        raise ValueError(f"unknown claim mode {self.name!r}")


#: Leases only: the executor starts each claim when its invoke arrives.
CLAIM_DUE = ClaimMode("claim_due")
#: Leased and started in one statement (a runner that delivers at once what it claims).
CLAIM_AND_START = ClaimMode("claim_and_start")


class Dispatch(Protocol):
    """Hands claims to executors."""

    claim_mode: ClaimMode

    def capacity(self) -> int:
        """How many claims ``dispatch`` can take now (the fan-out claims no more than that)."""

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        """Start an executor for each claim; return the claims that could NOT be dispatched (the
        caller releases their leases so no job is lost)."""

    def close(self) -> None:
        """Wait for in-flight dispatches and free resources."""


@runtime_checkable
class WaitsForRoom(Protocol):
    """A dispatch that can tell when its executors have room again (local mode's threads): the
    fan-out waits for that instead of sleeping a fixed pause, and claims a batch worth a statement."""

    def room_worth_a_claim(self) -> int:
        """The room the fan-out waits for (a moment at most) before it claims after a full claim."""

    def wait_for_room(self, timeout: float) -> None:
        """Return once ``room_worth_a_claim`` executors are free, or after ``timeout`` seconds."""


@runtime_checkable
class NoticesWakes(Protocol):
    """A dispatch on a machine that may sleep (local mode on a laptop): the fan-out lets it notice
    a wake before anything that takes expired leases as lost, not only before its claims."""

    def settle(self) -> None:
        """After a wake: this process's leases kept, then the wake's grace waited out."""


def release_connection(answer: dict[str, Any]) -> None:
    """Read an accepted invoke's (empty) body to its end, which gives the connection back to the
    client's pool; left unread, every invoke would open a new one (a TLS handshake on AWS). The
    invoke was accepted: a failure here is not a failed dispatch."""
    try:
        answer["Payload"].read()
    except Exception:
        logger.debug("invoke answer not read", exc_info=True)


def group_claims(claims: Sequence[Claim], most: int, threads: int, *, busy: bool = False) -> list[list[Claim]]:
    """The claims of one dispatch, grouped for the invokes that carry them. Quiet (no more claims
    than invoking threads, and not ``busy``): one claim per invoke, each job its own executor.
    Under a backlog: more claims than threads are spread over the threads, up to ``most`` an
    invoke; ``busy`` (the executors already hold many leases: the backlog sits in Lambda's queue,
    out of the claim's sight) groups ``most`` an invoke. A group costs one invoke, one start and
    one completion statement (or a few), not one each per job."""
    size = most if busy else math.ceil(len(claims) / max(threads, 1))
    size = max(1, min(most, size))
    return [list(claims[i : i + size]) for i in range(0, len(claims), size)]


def invoke_payload(group: Sequence[Claim]) -> dict[str, Any]:
    """The executor's invoke payload for a group: one claim's event (``Claim.to_event``), or
    ``{"claims": [event, ...]}`` for several."""
    if len(group) == 1:
        return group[0].to_event()
    return {"claims": [claim.to_event() for claim in group]}


class LambdaDispatch:
    """Asynchronous Lambda invokes (``InvocationType="Event"``) of the executor, from a bounded
    thread pool, with backoff on throttling; under a backlog each carries a group of claims
    (``group_claims``, up to ``claims_per_invoke``)."""

    claim_mode = CLAIM_DUE
    RETRYABLE = {
        "TooManyRequestsException",
        "ThrottlingException",
        "ServiceException",
        "EC2ThrottledException",
        "ResourceConflictException",
    }

    def __init__(
        self,
        client: Any,
        function_name: str,
        *,
        max_workers: int = INVOKE_THREADS,
        max_tries: int = 5,
        base_delay: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
        max_in_flight: int | None = None,
        in_flight: Callable[[], int] | None = None,
        claims_per_invoke: int = 1,
        owners_over_share: Callable[[int], dict[str, int]] | None = None,
        defer: Callable[[Sequence[Claim], float], int] | None = None,
    ):
        self.client = client
        self.claims_per_invoke = claims_per_invoke
        self.threads = max_workers
        self.function_name = function_name
        # What every invoke sends alike, built once; the client's pool should hold max_workers
        # connections (scheduler.wiring.lambda_client_config), else threads open new ones.
        self._invoke_args = {"FunctionName": function_name, "InvocationType": "Event"}
        self.max_tries = max_tries
        self.base_delay = base_delay
        self.sleep = sleep
        # The executor's reserved concurrency and the live leases (``FanoutStore.live_leases``).
        self.max_in_flight = max_in_flight
        self.in_flight = in_flight
        self._full_until = 0.0
        # Live leases at the last count: as many as the invoking threads or more, the executors
        # are busy and claims go out in full groups (``group_claims``).
        self._leases_seen = 0
        # An owner's share of the leases (``FanoutStore.owners_over_lease_share``), and how to
        # defer the claims past it (``FanoutStore.defer_claims``).
        self.owner_share = max(1, int(max_in_flight * OWNER_LEASE_SHARE)) if max_in_flight else None
        self.owners_over_share, self.defer = owners_over_share, defer
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="invoke")

    def capacity(self) -> int:
        """Unbounded without ``max_in_flight`` (the async invoke queues; throttles are retried in
        ``_invoke``); else what the executor's reserved concurrency leaves beside the live leases."""
        if self.max_in_flight is None or self.in_flight is None:
            return 1_000_000
        now = time.monotonic()
        if now < self._full_until:  # saturated a moment ago: do not count the leases every round
            return 0
        self._leases_seen = self.in_flight()
        room = max(self.max_in_flight - self._leases_seen, 0)
        if room == 0:
            self._full_until = now + FULL_RECHECK_SECONDS
        return room

    def _invoke(self, group: list[Claim]) -> bool:
        job_ids = [claim.job_id for claim in group]
        try:
            payload = json.dumps(invoke_payload(group)).encode()
        except Exception:  # never raise out of the pool: the caller releases what was not sent
            logger.exception("executor payload not built", extra={"job_ids": job_ids})
            return False
        for attempt in range(1, self.max_tries + 1):
            try:
                answer = self.client.invoke(**self._invoke_args, Payload=payload)
            except Exception as exc:  # botocore ClientError, connection errors
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
                if attempt == self.max_tries or (code not in self.RETRYABLE and hasattr(exc, "response")):
                    logger.error("executor invoke failed", extra={"job_ids": job_ids, "error": code})
                    return False
                self.sleep(random.uniform(0, self.base_delay * 2**attempt))
                continue
            release_connection(answer)
            return True
        return False

    def within_shares(self, claims: list[Claim]) -> list[Claim]:
        """The claims to invoke now: those that take no owner past its share of the leases. The
        others (the latest due of an owner's) are deferred. Asked only when the claim could take
        an owner past it; all of them when the deferral cannot be written (fairness then waits,
        not the jobs)."""
        share = self.owner_share
        if share is None or self.owners_over_share is None or self.defer is None:
            return claims
        if self._leases_seen + len(claims) <= share:
            return claims
        over = self.owners_over_share(share)
        kept: list[Claim] = []
        deferred: list[Claim] = []
        for claim in reversed(claims):
            excess = over.get(claim.owner or "", 0)
            if excess > 0:
                over[str(claim.owner)] = excess - 1
                deferred.append(claim)
            else:
                kept.append(claim)
        if not deferred:
            return claims
        try:
            done = self.defer(deferred, DEFER_SECONDS)
        except Exception:
            logger.exception("claims past their owner's share not deferred; dispatched", extra={"jobs": len(deferred)})
            return claims
        owners = sorted({str(claim.owner) for claim in deferred})
        logger.info(
            "claims deferred: their owners hold their share of the leases", extra={"jobs": done, "owners": owners}
        )
        return kept[::-1]

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        claims = self.within_shares(claims)
        busy = self._leases_seen >= self.threads
        groups = group_claims(claims, self.claims_per_invoke, self.threads, busy=busy)
        results = list(self.pool.map(self._invoke, groups))
        return [claim for group, ok in zip(groups, results) if not ok for claim in group]

    def close(self) -> None:
        self.pool.shutdown(wait=True)
