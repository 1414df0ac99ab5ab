"""Delivery of one execution to its target: the shared types and the ``deliver()`` dispatcher.

The executor calls :func:`deliver` with the job's ``target`` (a plain dict of the API contract,
secrets already decrypted), the identity of the delivery and the deployment's
:class:`TargetPolicy`. It gets back a :class:`DeliveryResult` that says what happened and whether
another attempt is worth it; ``deliver`` never raises for a failure of the target.

Modules:

- :mod:`scheduler.targets.http`: HTTP(S) targets (requests, one session reused across warm
  invocations, SSRF-guarded connections, a wall-clock deadline, a capped response read).
- :mod:`scheduler.targets.amqp`: AMQP(S) targets (pika, publisher confirms, mandatory
  routing, a small pool of broker connections reused across warm invocations).
- :mod:`scheduler.targets.aws`: Lambda, SQS, SNS and EventBridge targets, and SigV4 signing of
  HTTP targets, as the job's role assumed for its owner (:mod:`scheduler.targets.aws_credentials`).
- :mod:`scheduler.targets.ssrf`: the address guard both use, and URL syntax checks for the API.

See ``docs/delivery.md`` for the retry classification and the delivery semantics.
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import math
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable

from scheduler import templates
from scheduler.timeutil import format_time, idempotency_key

__all__ = [
    "Delivery",
    "DeliveryResult",
    "TargetPolicy",
    "deliver",
    "DEFAULT_TIMEOUT_SECONDS",
    "EXCERPT_LIMIT",
]

#: Default of ``target.timeout_seconds`` (http and amqp).
DEFAULT_TIMEOUT_SECONDS = 30.0
#: Bytes of a response body kept in ``DeliveryResult.response_excerpt`` (and the most ever read).
EXCERPT_LIMIT = 4096

SUCCEEDED = "succeeded"
FAILED = "failed"
TIMED_OUT = "timed_out"

# Names of the delivery headers (HTTP headers, and AMQP message headers).
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_JOB_ID = "X-Scheduler-Job-Id"
HEADER_EXECUTION_ID = "X-Scheduler-Execution-Id"
HEADER_SCHEDULED_AT = "X-Scheduler-Scheduled-At"
HEADER_ATTEMPT = "X-Scheduler-Attempt"


@dataclass(frozen=True)
class Delivery:
    """The identity of one delivery attempt: which occurrence of which job, which try."""

    job_id: str
    execution_id: str
    scheduled_at: datetime  # aware, UTC
    attempt: int  # 1-based
    owner: str | None = None  # the job's owner: the ExternalId of AWS targets' role

    @property
    def idempotency_key(self) -> str:
        """``<job id>:<scheduled_at>``: the same for every attempt of one occurrence."""
        return idempotency_key(self.job_id, self.scheduled_at)

    def headers(self) -> dict[str, str]:
        """The delivery headers of the contract (HTTP headers; AMQP message headers)."""
        return {
            HEADER_IDEMPOTENCY_KEY: self.idempotency_key,
            HEADER_JOB_ID: str(self.job_id),
            HEADER_EXECUTION_ID: str(self.execution_id),
            HEADER_SCHEDULED_AT: format_time(self.scheduled_at) or "",
            HEADER_ATTEMPT: str(self.attempt),
        }


@dataclass(frozen=True)
class DeliveryResult:
    """The outcome of one delivery attempt.

    ``status`` is ``"succeeded"``, ``"failed"`` or ``"timed_out"``; ``retryable`` says whether
    another attempt could succeed (network errors, timeouts, 5xx, 408, 429, broker down ...).
    ``error`` is human text and never contains a secret. ``retry_after_seconds`` (from an HTTP
    ``Retry-After``) is a floor for the next backoff.
    """

    status: str
    retryable: bool
    http_status: int | None = None
    response_excerpt: str | None = None
    error: str | None = None
    retry_after_seconds: float | None = None

    @property
    def succeeded(self) -> bool:
        """True when the target accepted the delivery."""
        return self.status == SUCCEEDED


@dataclass(frozen=True)
class TargetPolicy:
    """What targets a deployment may reach.

    ``allow_private``: local mode; loopback, private and other non-public addresses allowed.
    ``allow_list``: hostnames (exact, or ``*.example.com`` for subdomains) or CIDRs/addresses
    that bypass the SSRF guard. ``default_broker_url``: the broker of AMQP targets without a url
    (trusted: not subject to the guard).
    """

    allow_private: bool = False
    allow_list: tuple[str, ...] = ()
    default_broker_url: str | None = None


def deliver(
    target: dict,
    delivery: Delivery,
    policy: TargetPolicy,
    *,
    timeout_cap: float | None = None,
) -> DeliveryResult:
    """Render placeholders in the body, then deliver to an http, amqp or AWS target.

    Never raises for a target's failure (returns a failed DeliveryResult); ``timeout_cap`` bounds
    the time further (the executor passes its remaining Lambda time). The time spent is bounded
    by ``min(target.timeout_seconds, timeout_cap)`` (plus a few milliseconds of bookkeeping).
    """
    try:
        if not isinstance(target, dict):
            return permanent("invalid target: not an object")
        kind = target.get("type")
        if kind not in ("http", "amqp", "lambda", "sqs", "sns", "eventbridge"):
            return permanent(f"invalid target: unknown type {kind!r}" if isinstance(kind, str)
                             else "invalid target: missing type")
        budget, problem = _budget(target, timeout_cap)
        if problem is not None:
            return permanent(problem)
        if budget <= 0:
            return DeliveryResult(TIMED_OUT, True, error="no time left for the delivery")
        if kind not in ("http", "amqp"):  # every text field is rendered there
            return _target_module("aws").deliver_aws(target, delivery, policy, budget=budget)
        target = _rendered(target, delivery)
        if kind == "http":
            return _target_module("http").deliver_http(target, delivery, policy, budget=budget)
        return _target_module("amqp").deliver_amqp(target, delivery, policy, budget=budget)
    except Exception as exc:  # the contract: never raise for a delivery
        return DeliveryResult(FAILED, True, error=f"internal error while delivering: {type(exc).__name__}")


# --------------------------------------------------------------------------------------------
# helpers shared by the target modules (not part of the public interface)


def permanent(error: str, **fields: Any) -> DeliveryResult:
    """A failure that another attempt cannot fix."""
    return DeliveryResult(FAILED, False, error=error, **fields)


def transient(error: str, **fields: Any) -> DeliveryResult:
    """A failure worth another attempt."""
    return DeliveryResult(FAILED, True, error=error, **fields)


def timed_out(error: str, **fields: Any) -> DeliveryResult:
    """The delivery ran out of time (always worth another attempt)."""
    return DeliveryResult(TIMED_OUT, True, error=error, **fields)


def _budget(target: dict, timeout_cap: float | None) -> tuple[float, str | None]:
    raw = target.get("timeout_seconds")
    if raw is None:
        timeout = DEFAULT_TIMEOUT_SECONDS
    elif isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw <= 0:
        return 0.0, "invalid target: timeout_seconds must be a positive number"
    else:
        timeout = float(raw)
    if timeout_cap is not None:
        timeout = min(timeout, float(timeout_cap))
    return timeout, None


_TARGET_MODULES: dict[str, Any] = {}


def _target_module(kind: str) -> Any:
    """The module delivering ``kind`` targets, imported on first use (each imports this package),
    then kept: an import statement per delivery would contend for the import lock between threads."""
    module = _TARGET_MODULES.get(kind)
    if module is None:
        module = _TARGET_MODULES[kind] = importlib.import_module(f"scheduler.targets.{kind}")
    return module


def _rendered(target: dict, delivery: Delivery) -> dict:
    """A copy of ``target`` whose text body has its placeholders rendered (binary bodies kept)."""
    body = target.get("body")
    if not isinstance(body, str):
        return target
    if target.get("type") == "amqp" and (target.get("body_encoding") or "utf-8").lower() == "base64":
        return target
    return {**target, "body": templates.render(body, delivery)}


def redact(text: str | None, secrets: Iterable[str | None]) -> str | None:
    """``text`` with every occurrence of each secret replaced by ``***`` (longest first)."""
    if not text:
        return text
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


class _Deadlines:
    """One thread that fires every watchdog at its deadline (a timer thread per delivery would
    cost a thread start per delivery). Finished watchdogs are dropped when they reach the top."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, "Watchdog"]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, watchdog: "Watchdog") -> None:
        with self._cond:
            earliest = not self._heap or watchdog.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (watchdog.deadline, next(self._seq), watchdog))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="delivery-watchdog", daemon=True)
                self._thread.start()
            if earliest:  # the thread sleeps until the earliest deadline: wake it only for a new one
                self._cond.notify()

    def _next_due(self) -> "Watchdog":
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay <= 0:
                    return heapq.heappop(self._heap)[2]
                self._cond.wait(delay)

    def _run(self) -> None:
        while True:
            self._next_due()._fire()


_DEADLINES = _Deadlines()


class Watchdog:
    """A wall-clock deadline for one delivery.

    Per-operation socket timeouts do not bound a delivery: a peer that trickles one byte per
    second never trips a 30 s read timeout. At the deadline the watchdog shuts the watched
    sockets down (``shutdown(SHUT_RDWR)`` on the file descriptor, which wakes any blocked read
    or write in the delivering thread with an error) and sets :attr:`fired`. One shared thread
    (``_Deadlines``) serves every watchdog.

    Sockets are watched through getters (``lambda: conn.sock``) because a TLS wrap replaces the
    socket object of a connection after it was registered.
    """

    def __init__(self, budget: float):
        self.budget = budget
        self.deadline = time.monotonic() + max(budget, 0.0)
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._getters: list[Callable[[], Any]] = []

    def __enter__(self) -> "Watchdog":
        _DEADLINES.add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def finished(self) -> bool:
        """Disarmed or already fired: nothing left to do at the deadline."""
        return self._done or self.fired

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def watch(self, getter: Callable[[], Any]) -> None:
        """Shut down the socket ``getter()`` returns when the deadline passes."""
        with self._lock:
            if self._done:
                return
            if self.fired:
                _shutdown(getter)
                return
            self._getters.append(getter)

    def stop(self) -> None:
        """Disarm (the delivery is over); sockets are not touched after this returns."""
        with self._lock:
            self._done = True
            self._getters.clear()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            for getter in self._getters:
                _shutdown(getter)


def _shutdown(getter: Callable[[], Any]) -> None:
    try:
        sock = getter()
    except Exception:
        return
    if sock is None:
        return
    try:
        # The plain socket method, on purpose: ssl.SSLSocket.shutdown would also tear down the
        # TLS state under the feet of the thread that is reading.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, TypeError, ValueError):
        pass


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it: ``reason`` and ``exception`` attributes, exceptions passed as
    arguments (pika, requests), ``__cause__`` and ``__context__``; breadth first, no repeats."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop(0)
        if any(current is known for known in seen):
            continue
        seen.append(current)
        for attribute in ("reason", "exception"):  # urllib3 errors; pika's connector errors
            linked = getattr(current, attribute, None)
            if isinstance(linked, BaseException):
                todo.append(linked)
        todo.extend(arg for arg in getattr(current, "args", ()) if isinstance(arg, BaseException))
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return seen


_local = threading.local()


def current_watchdog() -> Watchdog | None:
    """The watchdog of the delivery running on this thread, if any."""
    return getattr(_local, "watchdog", None)


class running:
    """Context manager: make ``watchdog`` the current one of this thread while it runs."""

    def __init__(self, watchdog: Watchdog):
        self.watchdog = watchdog

    def __enter__(self) -> Watchdog:
        self._previous = current_watchdog()
        _local.watchdog = self.watchdog
        self.watchdog.__enter__()
        return self.watchdog

    def __exit__(self, *exc_info: object) -> None:
        self.watchdog.__exit__(*exc_info)
        _local.watchdog = self._previous
