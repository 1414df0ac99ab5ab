"""AMQP 0-9-1 targets (RabbitMQ, Amazon MQ for RabbitMQ): one confirmed publish per delivery.

What a delivery does:

- Picks the broker: ``target.url`` (``amqp://user:pass@host:5672/vhost`` or ``amqps://``), else
  the deployment's ``policy.default_broker_url``. A broker named by the job goes through the
  SSRF guard (:mod:`scheduler.targets.ssrf`: resolved once, every address checked, the
  connection made to a validated address); the deployment's default broker does not. Query
  parameters of the URL are ignored (pika's ``ssl_options`` there could turn verification off
  or read local files). ``amqps`` verifies the certificate against the URL's host name (SNI
  included) with the system trust store.
- Publishes with publisher confirms, ``mandatory=True`` and ``delivery_mode=2`` (persistent);
  ``message_id`` is the idempotency key; the message headers are the job's ``headers`` plus
  the delivery headers of the contract (``Idempotency-Key``, ``X-Scheduler-*``; the contract's
  values win over a job header of the same name, compared without case); ``content_type`` as
  given; ``app_id`` is ``scheduler`` and ``timestamp`` the publish time. A ``base64`` body is
  decoded and sent as bytes, unrendered; a ``utf-8`` body is rendered and encoded.
- Bounds the whole delivery (name resolution, connect, TLS, AMQP handshake, publish, confirm)
  by ``timeout_seconds`` (default 30) or the executor's cap: the handshake by pika's
  ``stack_timeout``, the publish by a :class:`~scheduler.targets.watchdog.Watchdog` that shuts the
  socket down at the deadline.

Outcomes (``docs/delivery.md``): the broker confirmed (ack) -> succeeded; the message was
returned as unroutable (no queue bound) -> failed, retryable (the queue may come back); nack
-> failed, retryable; the exchange does not exist (channel closed 404) -> failed, permanent;
other channel-level refusals (403 access to the exchange, 406 ...) -> permanent; refused
credentials or virtual host -> failed, retryable, with a clear message (credentials are
rotated, and the deployment's broker secret can be refreshed between attempts); broker down,
connection refused or lost, TLS or name resolution errors -> retryable; time up -> timed_out.
Error texts never contain the password or the URL.

Connection reuse: pika's BlockingConnection is not thread-safe, and the executor may deliver
on several threads at once in local mode. Connections are therefore kept in a small
per-broker *checkout pool*: a delivery takes an idle connection out of the pool (under a
lock), uses it alone, and puts it back when it is healthy. No connection is ever used by two
threads at once, publishes to one broker from several threads do not wait for each other,
and the pool is bounded (4 idle connections per broker, as opened: TLS, host, port, user,
password and vhost; 32 brokers at most; idle ones swept). The pool lives at module level,
so warm Lambda invocations reuse their connection. A pooled connection is checked before use
(I/O pumped to notice a close by the broker, idle age, the policy of this delivery), and a
publish that fails on a reused connection because the connection died is retried once on a
fresh one (at-least-once: the first publish may have reached the broker; ``message_id`` lets
consumers deduplicate).
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pika
import pika.exceptions as pex

from scheduler.targets import ssrf
from scheduler.targets.idle import IdlePool
from scheduler.targets.results import (
    SUCCEEDED,
    Delivery,
    Outcome,
    TargetPolicy,
    exception_chain,
    permanent,
    redact,
    timed_out,
    transient,
)
from scheduler.targets.views import AmqpView
from scheduler.targets.watchdog import Watchdog, running

MAX_IDLE_PER_BROKER = 4
#: Brokers (URL, user and vhost) whose idle connections are kept at once: the least recently used
#: one's are closed past it, so that jobs naming many brokers cannot hold connections without end.
MAX_KEPT_BROKERS = 32
#: How long a graceful close waits for the broker's answer before the socket is shut: a broker
#: that stopped answering never holds a delivery's thread.
CLOSE_SECONDS = 1.0
#: How often a checkin looks for idle connections past ``MAX_IDLE_SECONDS`` under every key.
SWEEP_SECONDS = 30.0
#: A pooled connection idle for longer is closed rather than reused (a frozen Lambda
#: misses heartbeats; NAT and load balancers drop idle flows silently).
MAX_IDLE_SECONDS = 300.0
CONNECTION_NAME = "scheduler"

_CONTRACT_HEADERS = (
    "Idempotency-Key",
    "X-Scheduler-Job-Id",
    "X-Scheduler-Execution-Id",
    "X-Scheduler-Scheduled-At",
    "X-Scheduler-Attempt",
)


@dataclass(frozen=True)
class Broker:
    """A parsed broker URL."""

    tls: bool
    host: str
    port: int
    username: str
    password: str
    vhost: str

    @property
    def where(self) -> str:
        """``host:port`` for messages (never the credentials)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class _Invalid(ValueError):
    pass


def parse_broker_url(url: str) -> Broker:
    """Parse ``amqp[s]://[user[:pass]@]host[:port][/vhost]`` (pika's conventions: no path or
    ``/`` is the vhost ``/``; ``%2F`` decodes). Raises ``ValueError`` with a message that never
    quotes the URL."""
    problem = ssrf.check_broker_url_syntax(url)
    if problem:
        raise _Invalid(problem)
    parts = urlsplit(url)
    tls = parts.scheme.lower() == "amqps"
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return Broker(
        tls=tls,
        host=parts.hostname or "",
        port=parts.port or (5671 if tls else 5672),
        username=unquote(parts.username) if parts.username is not None else "guest",
        password=unquote(parts.password) if parts.password is not None else "guest",
        vhost=unquote(path) if path else "/",
    )


# ------------------------------------------------------------------------- connection pool


class PooledConnection:
    """One BlockingConnection and its confirm-mode channel; used by one thread at a time."""

    def __init__(self, connection: pika.BlockingConnection, broker: Broker, address: str):
        self.connection = connection
        self.broker = broker
        self.address = address  # the IP actually connected (checked again on reuse)
        self.channel: Any = None
        self.last_used = time.monotonic()

    def socket(self) -> socket.socket | None:
        """The TCP socket under pika (for the watchdog), if still there."""
        transport = getattr(getattr(self.connection, "_impl", None), "_transport", None)
        return getattr(transport, "_sock", None)

    def ensure_channel(self) -> Any:
        """The channel in confirm mode, reopened if the broker closed the previous one."""
        if self.channel is None or not self.channel.is_open:
            self.channel = self.connection.channel()
            self.channel.confirm_delivery()
        return self.channel

    def alive(self) -> bool:
        """Pump pending I/O (a close or EOF from the broker) and say whether it is still open."""
        if not self.connection.is_open:
            return False
        try:
            self.connection.process_data_events(time_limit=0)
        except Exception:
            return False
        return self.connection.is_open

    def close(self, graceful: bool = True) -> None:
        """Close; ``graceful=False`` shuts the socket first so a dead peer cannot block us. A
        graceful close waits at most ``CLOSE_SECONDS`` for the broker's answer, then shuts it."""
        if not graceful:
            self._shut()
        deadline = threading.Timer(CLOSE_SECONDS, self._shut) if graceful else None
        if deadline is not None:
            deadline.daemon = True
            deadline.start()
        try:
            if self.connection.is_open:
                self.connection.close()
        except Exception:
            pass
        finally:
            if deadline is not None:
                deadline.cancel()

    def _shut(self) -> None:
        sock = self.socket()
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass


_PoolKey = tuple[bool, str, int, str, str, str]


def _let_go(pooled: PooledConnection) -> None:
    """Close a connection the pool drops (one too many for its broker, a broker let go, shutdown)
    on a thread of its own: each close waits up to ``CLOSE_SECONDS``, and a delivery that checked
    one in, which may drop several, has its outcome already."""
    threading.Thread(target=pooled.close, name="amqp-close", daemon=True).start()


_idle: IdlePool[PooledConnection] = IdlePool(_let_go, per_key=MAX_IDLE_PER_BROKER, keys=MAX_KEPT_BROKERS)
_last_sweep = [time.monotonic()]


def _pool_key(broker: Broker) -> _PoolKey:
    """A broker's connections are shared by what they were opened with (host, port, TLS, user,
    password, vhost), however its URL spelled them (a query, the case of the host)."""
    return broker.tls, broker.host.lower(), broker.port, broker.username, broker.password, broker.vhost


def _checkout(key: _PoolKey) -> PooledConnection | None:
    return _idle.take(key)


def _checkin(key: _PoolKey, pooled: PooledConnection) -> None:
    if not pooled.connection.is_open:
        pooled.close(graceful=False)
        return
    pooled.last_used = now = time.monotonic()
    _idle.give(key, pooled)
    if now - _last_sweep[0] > SWEEP_SECONDS:
        _last_sweep[0] = now
        for stale in _idle.sweep(lambda p: now - p.last_used > MAX_IDLE_SECONDS or not p.connection.is_open):
            stale.close(graceful=False)


def idle_connections(url: str) -> list[PooledConnection]:
    """The idle pooled connections of a broker URL (a copy; for tests and diagnostics)."""
    return _idle.kept(_pool_key(parse_broker_url(url)))


def close_all() -> None:
    """Close every pooled connection (tests; local mode at shutdown), all at once: done when
    they are closed, or ``CLOSE_SECONDS`` (and a little) have passed (their sockets then shut)."""
    closing = [threading.Thread(target=p.close, daemon=True) for p in _idle.sweep(lambda p: True)]
    for thread in closing:
        thread.start()
    deadline = time.monotonic() + CLOSE_SECONDS + 0.5
    for thread in closing:
        thread.join(max(0.0, deadline - time.monotonic()))


def _reusable(pooled: PooledConnection, policy: TargetPolicy, guarded: bool) -> bool:
    """Whether a pooled connection may serve this delivery. ``guarded``: this delivery's broker
    is subject to the SSRF guard (whatever the delivery that opened the connection was)."""
    if time.monotonic() - pooled.last_used > MAX_IDLE_SECONDS:
        return False
    if guarded:
        try:
            ssrf.check_addresses(pooled.broker.host, [pooled.address], policy)
        except ssrf.TargetNotAllowed:
            return False  # opened under a laxer policy: reconnect (and be refused) instead
    return pooled.alive()


def _ssl_options(broker: Broker) -> pika.SSLOptions | None:
    if not broker.tls:
        return None
    context = ssl.create_default_context()  # CERT_REQUIRED, check_hostname, system CAs
    return pika.SSLOptions(context, server_hostname=broker.host)


def _open(
    broker: Broker, guarded: bool, policy: TargetPolicy, watchdog: Watchdog, owner: str | None
) -> PooledConnection:
    """A new connection to a validated address of ``broker`` within the watchdog's time (its
    name looked up as a lookup of ``owner``, the job's owner)."""
    infos = ssrf.resolve_checked(broker.host, broker.port, policy, watchdog.remaining(), guard=guarded, owner=owner)
    error: Exception | None = None
    for info in infos:
        address = info[4][0]
        remaining = watchdog.remaining()
        if remaining <= 0:
            raise TimeoutError("no time left to connect to the broker")
        params = pika.ConnectionParameters(
            host=address,
            port=broker.port,
            virtual_host=broker.vhost,
            credentials=pika.PlainCredentials(broker.username, broker.password),
            ssl_options=_ssl_options(broker),
            connection_attempts=1,
            retry_delay=0,
            socket_timeout=max(remaining, 0.001),
            stack_timeout=max(remaining, 0.001),
            client_properties={"connection_name": CONNECTION_NAME},
        )
        try:
            return PooledConnection(pika.BlockingConnection(params), broker, address)
        except (pex.ProbableAuthenticationError, pex.AuthenticationError, pex.ProbableAccessDeniedError):
            raise  # another address of the same broker will say the same
        except pex.AMQPConnectionError as exc:
            error = exc
    assert error is not None
    raise error


# ------------------------------------------------------------------------------------ target


def message_headers(job_headers: dict, delivery: Delivery) -> dict[str, Any]:
    """The job's headers merged with the delivery headers (which win, compared without case)."""
    contract = delivery.headers()
    names = {name.lower() for name in contract}
    merged = {k: v for k, v in job_headers.items() if k.lower() not in names}
    merged.update(contract)
    return merged


def deliver_amqp(target: AmqpView, delivery: Delivery, policy: TargetPolicy, *, budget: float) -> Outcome:
    """Publish ``delivery`` to the amqp ``target`` (utf-8 body already rendered) within
    ``budget`` seconds. Never raises. See the module documentation for the semantics."""
    secrets = target.secrets()
    try:
        result = _deliver(target, delivery, policy, budget)
    except Exception as exc:
        result = transient(f"unexpected error during the AMQP delivery: {type(exc).__name__}")
    if result.error and secrets:
        result = Outcome(result.status, result.retryable, error=redact(result.error, secrets))
    return result


def _broker_of(spec: AmqpView, policy: TargetPolicy, owner: str | None) -> tuple[Broker, bool] | Outcome:
    """The broker a delivery goes to and whether it is guarded (one the job named, subject to the
    SSRF guard; the deployment's is not), or the permanent failure of a target that has none."""
    url = spec.url
    guarded = url is not None and url != policy.default_broker_url
    url = url or policy.default_broker_url
    if not url:
        return permanent("invalid target: no broker url, and the deployment has no default broker")
    if not guarded and not policy.default_broker_open_to(owner):
        return permanent(
            "invalid target: the deployment's broker is not open to this job's owner; give the broker's url"
        )
    try:
        return parse_broker_url(url), guarded
    except _Invalid as exc:
        return permanent(f"invalid target: {exc}")


def _deliver(spec: AmqpView, delivery: Delivery, policy: TargetPolicy, budget: float) -> Outcome:
    found = _broker_of(spec, policy, delivery.owner)
    if isinstance(found, Outcome):
        return found
    broker, guarded = found
    payload = spec.payload

    properties = pika.BasicProperties(
        content_type=spec.content_type,
        delivery_mode=pika.DeliveryMode.Persistent,
        message_id=delivery.idempotency_key,
        headers=message_headers(dict(spec.headers), delivery),
        timestamp=int(time.time()),
        app_id=CONNECTION_NAME,
    )

    published: list[bool] = []  # a publish began (else the time went in connecting)

    def publish(pooled: PooledConnection) -> None:
        watchdog.watch(pooled.socket)
        channel = pooled.ensure_channel()
        published.append(True)
        channel.basic_publish(spec.exchange, spec.routing_key, payload, properties=properties, mandatory=True)

    watchdog = Watchdog(budget)
    key = _pool_key(broker)
    pooled: PooledConnection | None = None
    with running(watchdog):
        try:
            pooled = _checkout(key)
            while pooled is not None and not _reusable(pooled, policy, guarded):
                pooled.close(graceful=False)
                pooled = _checkout(key)
            reused = pooled is not None
            if pooled is None:
                pooled = _open(broker, guarded, policy, watchdog, delivery.owner)
            try:
                publish(pooled)
            except (pex.AMQPConnectionError, pex.ChannelWrongStateError, OSError):
                if not reused or watchdog.fired:
                    raise
                pooled.close(graceful=False)  # died while pooled: once more, on a fresh one
                pooled = None
                pooled = _open(broker, guarded, policy, watchdog, delivery.owner)
                publish(pooled)
            _release(key, pooled, watchdog)
            return Outcome(SUCCEEDED, False)
        except (pex.UnroutableError, pex.NackError, pex.ChannelClosedByBroker) as exc:
            if pooled is not None:
                _release(key, pooled, watchdog)  # the connection is fine; a closed channel is reopened
            if watchdog.fired:
                return _stalled(broker, budget, bool(published))
            return _channel_failure(exc, spec)
        except ssrf.TargetNotAllowed as exc:
            return permanent(str(exc))
        except Exception as exc:
            if pooled is not None:
                pooled.close(graceful=False)
            if watchdog.fired:
                return _stalled(broker, budget, bool(published))
            return _connection_failure(exc, broker, budget)


def _stalled(broker: Broker, budget: float, published: bool) -> Outcome:
    """The delivery's time ran out: waiting for the publish's confirmation, or before anything
    was published (connecting, the handshake, opening the channel)."""
    if published:
        return timed_out(f"no confirmation from the broker at {broker.where} within {budget:g}s")
    return timed_out(f"no answer from the broker at {broker.where} within {budget:g}s (nothing was published)")


def _release(key: _PoolKey, pooled: PooledConnection, watchdog: Watchdog) -> None:
    """Back to the pool, once this delivery's watchdog can no longer touch the socket."""
    watchdog.stop()
    if watchdog.fired:
        pooled.close(graceful=False)
    else:
        _checkin(key, pooled)


def _channel_failure(exc: Exception, spec: AmqpView) -> Outcome:
    exchange = spec.exchange
    shown = f"'{exchange}'" if exchange else "'' (the default exchange)"
    if isinstance(exc, pex.UnroutableError):
        return transient(
            f"message unroutable: no queue is bound to exchange {shown} for routing key '{spec.routing_key}'"
        )
    if isinstance(exc, pex.NackError):
        return transient("the broker refused the message (nack)")
    code, text = exc.reply_code, exc.reply_text  # type: ignore[attr-defined]
    if code == 404 and "exchange" in text:
        return permanent(f"exchange {shown} does not exist")
    if code == 403:
        return permanent(f"broker denied access: {text}")
    return permanent(f"broker refused the message: ({code}) {text}")


def _connection_failure(exc: Exception, broker: Broker, budget: float) -> Outcome:
    chain = exception_chain(exc)
    where = broker.where
    if isinstance(exc, (pex.ShortStringTooLong, pex.UnsupportedAMQPFieldException)):
        # The message cannot be put in a frame (a header name over 255 bytes, say, in a target
        # stored before the API refused it): no attempt can send it.
        return permanent(f"the message cannot be encoded for AMQP: {type(exc).__name__}")
    if any(isinstance(e, (pex.ProbableAuthenticationError, pex.AuthenticationError)) for e in chain) or any(
        isinstance(e, pex.ConnectionClosedByBroker) and e.reply_code == 403 for e in chain
    ):
        return transient(f"broker at {where} refused the credentials of user '{broker.username}'")
    if any(isinstance(e, pex.ProbableAccessDeniedError) for e in chain):
        return transient(f"broker at {where} refused access to virtual host '{broker.vhost}'")
    if any(isinstance(e, socket.gaierror) for e in chain):
        return transient(f"could not resolve broker host {broker.host}")
    if any(isinstance(e, (TimeoutError, socket.timeout)) or "Timeout" in type(e).__name__ for e in chain):
        return timed_out(f"could not connect to the broker at {where} within {budget:g}s")
    verify = next((e for e in chain if isinstance(e, ssl.SSLCertVerificationError)), None)
    if verify is not None:
        detail = getattr(verify, "verify_message", None) or "certificate verify failed"
        return transient(f"TLS certificate of the broker at {where} not accepted: {detail}")
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    if tls is not None:
        return transient(f"TLS error with the broker at {where}: {getattr(tls, 'reason', None) or 'handshake failed'}")
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return transient(f"could not connect to the broker at {where}: connection refused")
    closed = next((e for e in chain if isinstance(e, pex.ConnectionClosedByBroker)), None)
    if closed is not None:
        return transient(f"broker at {where} closed the connection: ({closed.reply_code}) {closed.reply_text}")
    if any(isinstance(e, pex.StreamLostError) for e in chain):
        return transient(f"connection to the broker at {where} was lost")
    os_error = next((e for e in chain if isinstance(e, OSError) and e.errno), None)
    if os_error is not None:
        return transient(f"network error with the broker at {where}: {os_error.strerror}")
    return transient(f"AMQP delivery to the broker at {where} failed: {type(exc).__name__}")
