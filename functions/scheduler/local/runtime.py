"""Local mode: the API and the runner of the cloud deployment in one process.

A WSGI server (waitress) feeds the api handler API Gateway events through the HTTP adapter, a
loop calls the fan-out, and a thread pool stands in for the asynchronous Lambda invoke of the
executor (claims started, and outcomes recorded, a batch per statement). Postgres is embedded
(pgserver, data kept under ``--data-dir``) unless a database URL is given; migrations are
applied at start; ``serve`` takes a typed ``LocalOptions``. Several processes on one database act as several runners (``--runners``
starts them). Ctrl-C (or SIGTERM, or SIGHUP: the terminal closed) stops the intake, lets running executions finish and records
them, and stops the embedded Postgres (the runner claims only what it can start at once, so no
claim waits in a queue).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scheduler.api.routes import rule
from scheduler.core import constants as c
from scheduler.core.errors import MigrationError
from scheduler.local.background import (
    ALERTS_STOP_SECONDS,
    close_delivery_clients,
    run_runner,
    start_alerts,
    warn_if_the_key_does_not_open,
)
from scheduler.local.embedded import EmbeddedPostgres, prepare_data_dir
from scheduler.local.errors import LocalError, OptionError
from scheduler.local.runners import (
    start_runner_process,
    start_runner_processes,
    stop_runner_processes,
    supervise_runners,
)
from scheduler.local.stopping import Stop, close_api, interrupt_start_on_signals, say, stopping_line
from scheduler.settings import Settings
from scheduler.store import database_urls

logger = logging.getLogger(__name__)

LOCAL_PRINCIPAL = "arn:aws:iam::000000000000:user/local"
DEFAULT_REGION = "us-east-1"
MISSING_EXTRA = "scheduler local needs the 'local' extra: pip install -e '.[local]' (or make dev)"


@dataclass(frozen=True)
class LocalOptions:
    """What ``scheduler local`` runs with (the command line's flags, typed).

    ``database_url``: None for an embedded Postgres under ``data_dir`` (after
    ``$SCHEDULER_DATABASE_URL`` and ``$DATABASE_URL``). ``precision``: None for
    ``$SCHEDULER_PRECISION``, else ``second``. ``guard_targets``: keep the SSRF guard on
    (private and loopback targets refused, as deployed); off by default in local mode.
    ``region``: the region SigV4 signatures must name (``auth="sigv4"``). ``auth``: ``none``,
    ``sigv4``, or None for ``sigv4`` when ``credentials_file`` is given, else ``none``
    (``auth_mode``). ``allow_unauthenticated``: serve ``--auth none`` on an address other than
    loopback (refused otherwise: whoever reaches it could make this machine call its network).
    """

    host: str = "127.0.0.1"
    port: int = 8080
    database_url: str | None = None
    data_dir: str = ".scheduler"
    auth: str | None = None
    credentials_file: str | None = None
    precision: str | None = None
    runners: int = 1
    guard_targets: bool = False
    region: str = DEFAULT_REGION
    allow_unauthenticated: bool = False  # --auth none on an address other than loopback


PrincipalForRequest = Callable[[dict[str, Any]], "str | None"]
AUTH_MODES = ("none", "sigv4")
# The one route that asks no identity, as the event's path names it.
HEALTH_PATH = rule("health")[0]


def auth_mode(options: LocalOptions) -> str:
    """``none`` or ``sigv4``: ``options.auth``, else ``sigv4`` when a credentials file is given
    (it is only ever read to verify signatures), else ``none``. ``OptionError`` for a mode
    that contradicts the credentials: never an open API with a credentials file at hand."""
    mode = options.auth or ("sigv4" if options.credentials_file else "none")
    if mode not in AUTH_MODES:
        raise OptionError(f"--auth must be none or sigv4, not {mode!r}")
    if mode == "none" and options.credentials_file:
        raise OptionError(
            "--credentials is for --auth sigv4 (the access keys whose signatures are verified), "
            "not --auth none: drop --auth none to verify signatures, or drop --credentials to serve unsigned"
        )
    if mode == "sigv4" and not options.credentials_file:
        raise OptionError("--auth sigv4 needs --credentials FILE (the access keys it accepts)")
    if mode == "none" and not options.allow_unauthenticated and not _loopback(options.host):
        raise OptionError(
            f"--host {options.host} is not a loopback address and --auth is none: whoever reaches it could "
            "create jobs that call this machine's and its network's services and read their answers; give "
            "--credentials FILE (--auth sigv4), listen on 127.0.0.1, or say --allow-unauthenticated"
        )
    return mode


def _loopback(host: str) -> bool:
    from scheduler.console.proxy import is_loopback

    return is_loopback(host)


def read_credentials(credentials_file: str) -> dict[str, tuple[str, str]]:
    """The access keys of ``--credentials``; ``OptionError`` naming what is wrong with the file."""
    from scheduler.transport.sigv4 import CredentialsFileError, load_credentials

    try:
        return load_credentials(credentials_file)
    except CredentialsFileError as exc:
        raise OptionError(f"--credentials: {exc}") from None


def health_needs_no_identity(resolve: PrincipalForRequest) -> PrincipalForRequest:
    """``resolve``, except for ``GET /v1/health``, which is answered without asking who calls
    (probes do not sign; the API's handler asks no identity of that route alone)."""

    def resolve_unless_health(environ: dict[str, Any]) -> str | None:
        if str(environ.get("REQUEST_METHOD", "")).upper() == "GET" and environ.get("PATH_INFO") == HEALTH_PATH:
            return None
        return resolve(environ)

    return resolve_unless_health


def local_auth(options: LocalOptions) -> tuple[PrincipalForRequest, str]:
    """Who each request is (health asks no one), and the start-up line's words for it."""
    mode = auth_mode(options)
    if mode == "none":
        resolve, words = principal_resolver("none", None), "auth none: unsigned, every caller is the local principal"
    else:
        credentials = read_credentials(str(options.credentials_file))
        resolve = signature_resolver(credentials, region=options.region)
        keys = f"one of the {len(credentials)} access keys" if len(credentials) > 1 else "the access key"
        words = f"auth sigv4: signed for {options.region} by {keys} of {options.credentials_file}"
    return health_needs_no_identity(resolve), words


def principal_resolver(
    auth: str, credentials_file: str | None, *, region: str | None = DEFAULT_REGION
) -> PrincipalForRequest:
    """Who is calling: one fixed local principal, or the owner of a verified SigV4 signature
    (whose credential scope must name ``region``; None accepts any region). A request
    whose signature does not verify is refused with the reason (``RequestRefused``: 403)."""
    if auth == "none":
        return lambda environ: LOCAL_PRINCIPAL
    if not credentials_file:
        raise OptionError("--auth sigv4 needs --credentials FILE (the access keys it accepts)")
    return signature_resolver(read_credentials(credentials_file), region=region)


def signature_resolver(credentials: dict[str, tuple[str, str]], *, region: str | None) -> PrincipalForRequest:
    """The owner of a request's verified SigV4 signature, by one of ``credentials``; a request
    whose signature does not verify is refused with the reason (``RequestRefused``: 403)."""
    from scheduler.transport.http_adapter import RequestRefused
    from scheduler.transport.sigv4 import SignatureError, verify_wsgi

    def resolve(environ: dict[str, Any]) -> str | None:
        try:
            return verify_wsgi(
                environ, environ.get("scheduler.body", b""), credentials, region=region, security_tokens=False
            )
        except SignatureError as exc:
            logger.info("request refused: %s", exc)
            raise RequestRefused(exc.message) from None

    return resolve


def check_port(host: str, port: int) -> None:
    """``LocalError`` when ``host:port`` cannot be bound (checked before migrating anything)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise LocalError(f"cannot listen on {host}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as waitress binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise bind_error(host, port, exc) from None


def bind_error(host: str, port: int, exc: OSError) -> LocalError:
    """The one line for a port that cannot be bound (in use: another ``scheduler local``?)."""
    busy = exc.errno in (98, 48, 10048)  # EADDRINUSE on Linux, macOS, Windows
    reason = "is in use (another scheduler local?); give --port" if busy else f"cannot be bound: {exc.strerror}"
    return LocalError(f"port {port} on {host} {reason}")


def local_settings(
    options: LocalOptions, data_dir: Path, database_url: str, environ: dict[str, str] | None = None
) -> Settings:
    """The settings of local mode: the environment's (``SCHEDULER_*``), with the options over them."""
    env = os.environ if environ is None else environ
    try:
        base = Settings.from_env(dict(env))
    except ValueError as exc:
        raise LocalError(str(exc)) from None
    _check_target_settings(base)
    return replace(
        base,
        database_url=database_url,
        allow_private_targets=not options.guard_targets,
        precision=options.precision or base.precision,
        local_key_file=env.get(c.ENV_LOCAL_KEY_FILE) or str(data_dir / "secret.key"),
    )


def _check_target_settings(settings: Settings) -> None:
    """The default broker's URL and the SSRF allow-list, checked before anything starts (a bad
    one would otherwise fail every AMQP delivery without a URL, or match nothing, in silence)."""
    from scheduler.core.urls import check_broker_url_syntax
    from scheduler.targets.ssrf import allow_list_problems

    if settings.default_broker_url and (problem := check_broker_url_syntax(settings.default_broker_url)):
        raise LocalError(f"{c.ENV_DEFAULT_BROKER_URL}: {problem}")  # (never the URL: it holds a password)
    if problems := allow_list_problems(settings.target_allow_list):
        raise LocalError(f"{c.ENV_TARGET_ALLOW_LIST}: {'; '.join(problems)}")


def check_key_file(path: str) -> None:
    """The secret key file opened (made when absent) before the database is touched: one that
    cannot be is a ``LocalError`` naming it and how to give another."""
    from scheduler.core.errors import SecretError
    from scheduler.secrets import LocalSecretBox

    try:
        LocalSecretBox(path)
    except (SecretError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LocalError(
            f"cannot use the key file {path}: {reason} (give another --data-dir, or {c.ENV_LOCAL_KEY_FILE})"
        ) from None


def resolve_database_url(given: str | None, environ: dict[str, str] | None = None) -> tuple[str | None, str]:
    """``scheduler.store.database_urls.resolve``, a malformed URL an ``OptionError`` (exit code 2)."""
    try:
        return database_urls.resolve(given, os.environ if environ is None else environ)
    except database_urls.DatabaseUrlError as exc:
        raise OptionError(str(exc)) from None


def migrate_or_explain(migrate: Callable[[str], Any], url: str) -> Any:
    """``migrate(url)``; a database that cannot be reached, or a schema this code cannot
    migrate, is a ``LocalError`` of one line."""
    import psycopg

    try:
        return migrate(url)
    except psycopg.OperationalError as exc:
        raise LocalError(database_urls.unreachable(url, exc)) from None
    except MigrationError as exc:
        raise LocalError(f"cannot migrate the database: {exc}") from None


def _reachable_name(host: str) -> str:
    """The name alerts' links give the console: the bound host, or this machine's name when
    bound to every address (``0.0.0.0`` or ``::`` is no address a recipient can open; the
    console answers to the machine's name then)."""
    from scheduler.console.guard import WILDCARD_HOSTS

    if host in WILDCARD_HOSTS:
        return socket.getfqdn() or "127.0.0.1"
    return host


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def print_start_up(options: LocalOptions, port: int, auth_words: str, storage_words: str) -> None:
    """The start-up lines: the API's URL with its auth mode and the rest of the setup, then the
    console's URL (under ``--auth sigv4``, with how a browser reaches it: its pages cannot sign)."""
    url = base_url(options.host, port)
    runners = (
        f"{options.runners} runner process{'es' if options.runners > 1 else ''}"
        if options.runners
        else "no runner: the API and the alerts only"
    )
    guard = "; SSRF guard on" if options.guard_targets else ""
    print(f"scheduler local: API {url}/v1 ({auth_words}; {storage_words}; {runners}{guard})", flush=True)
    how = (
        f" (its pages cannot sign: open it through scheduler console --endpoint {url} --region {options.region})"
        if auth_mode(options) == "sigv4"
        else ""
    )
    print(f"scheduler local: console {url}/console/{how}. Ctrl-C to stop.", flush=True)


def serve(options: LocalOptions, *, ready: threading.Event | None = None, stop: threading.Event | None = None) -> int:
    """Run until interrupted; ``ready`` is set once the API answers (tests), ``stop`` ends it.
    ``LocalError`` when it cannot start."""
    try:
        from waitress import create_server  # noqa: F401 (the local extra: checked before anything starts)
    except ImportError:
        raise LocalError(MISSING_EXTRA) from None
    from scheduler.wiring import Dependencies

    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        interrupt_start_on_signals()  # until the clean stop's own handlers (Stop.on_signals)
    resolver, auth_words = local_auth(options)
    database_url, source = resolve_database_url(options.database_url)
    check_port(options.host, options.port)
    data_dir = prepare_data_dir(Path(options.data_dir or ".scheduler"))
    settings, embedded = _open_database(options, data_dir, database_url)
    deps = Dependencies(settings, pool_max_size=24)
    try:
        deps.store, deps.secret_box  # built now, before the threads that share them  # noqa: B018
        warn_if_the_key_does_not_open(deps.store, deps.secret_box, settings.local_key_file)
        server = _api_server(options, deps, resolver)
    except BaseException:  # the port taken since check_port (another start at the same time), a signal
        deps.pool.close()
        if embedded is not None:
            embedded.stop()
        raise
    # From here a stop signal is the clean stop (it sets ``stop``; what follows starts, then
    # stops in order): none is left to the start's handlers.
    extra: list[Any] = []
    stopping = Stop(stop, extra, embedded)
    if threading.current_thread() is threading.main_thread():
        stopping.on_signals()
    dispatch = deps.in_process_dispatch() if options.runners else None
    # The links of alerts (every runner process sends them) go to this console.
    console = f"{base_url(_reachable_name(options.host), server.effective_port)}/console/"
    settings = replace(settings, console_url=settings.console_url or console)
    extra.extend(start_runner_processes(settings, options.runners))
    runner_thread = threading.Thread(
        target=run_runner, args=(deps, settings, dispatch, stop), name="fanout", daemon=True
    )
    if dispatch is not None:
        runner_thread.start()
    alerts = start_alerts(deps, stop, settings.console_url)
    api = threading.Thread(target=server.run, name="api", daemon=True)
    api.start()
    where = f"embedded Postgres under {data_dir / 'pgdata'}" if embedded else f"the given database ({source})"
    print_start_up(options, server.effective_port, auth_words, f"{where}; precision {settings.precision}")
    if ready is not None:
        ready.set()
    try:
        supervise_runners(extra, lambda name: start_runner_process(settings, name), stop)
    finally:
        say(stopping_line(dispatch, len(extra)))
        close_api(server, api)
        for process in extra:
            process.terminate()  # SIGTERM: it finishes and records its deliveries under way
        if dispatch is not None:
            runner_thread.join(timeout=10)
            dispatch.close()
        stop_runner_processes(extra)
        stop.set()  # (already set, unless the runners' supervision itself failed)
        alerts.join(timeout=ALERTS_STOP_SECONDS)
        close_delivery_clients()
        deps.pool.close()
        if embedded is not None:
            stopping.postgres_stopping()
            embedded.stop()
        unrecorded = dispatch.unrecorded if dispatch is not None else 0
        say(
            f"scheduler local: stopped; {unrecorded} outcome{'s' if unrecorded > 1 else ''} not recorded (the database "
            "was away): their jobs are delivered again when their leases expire"
            if unrecorded
            else "scheduler local: stopped"
        )
    return 1 if unrecorded else 0


def _open_database(
    options: LocalOptions, data_dir: Path, database_url: str | None
) -> tuple[Settings, EmbeddedPostgres | None]:
    """The settings on the given database, else on an embedded one started under ``data_dir``;
    migrated either way (``LocalError`` when it cannot be)."""
    from scheduler.store.migrations import migrate

    settings = local_settings(options, data_dir, database_url or "")  # a bad setting: said before anything starts
    check_key_file(str(settings.local_key_file))
    embedded = None
    if not database_url:
        try:
            embedded = EmbeddedPostgres(data_dir)
        except ImportError:
            raise LocalError(MISSING_EXTRA) from None
        database_url = embedded.url
        settings = replace(settings, database_url=database_url)
    try:
        migrate_or_explain(migrate, database_url)
    except BaseException:  # not migrated, or interrupted (Ctrl-C, SIGTERM): the Postgres started is stopped
        if embedded is not None:
            embedded.stop()
        raise
    return settings, embedded


def _api_server(options: LocalOptions, deps: Any, resolver: Callable[[dict[str, Any]], str | None]) -> Any:
    """The API and the console behind waitress (the Host/JSON/Origin guard in front)."""
    from waitress import create_server

    from scheduler.api.app import per_thread_handler
    from scheduler.console import local_app
    from scheduler.transport.http_adapter import MAX_REQUEST_BODY_BYTES, envelope_server_errors, make_wsgi_app

    # Requests run at once on waitress' 8 threads (a resolver each; the pool has 24 connections):
    # a slow one, a preview planning calendars for seconds, holds up no other.
    handler = per_thread_handler(lambda: deps.store, lambda: deps.secret_box, deps.settings)
    wsgi = local_app(make_wsgi_app(handler, resolver), host=options.host)
    # Waitress buffers a body before the app sees it: past its limit it answers 413 itself (the
    # envelope, see envelope_server_errors) without reading on. Its count includes the framing
    # of a chunked body, hence a little slack; the adapter checks the exact limit.
    try:
        server = create_server(
            wsgi,
            host=options.host,
            port=options.port,
            threads=8,
            ident="scheduler-local",
            max_request_body_size=MAX_REQUEST_BODY_BYTES + 64 * 1024,
        )
    except OSError as exc:
        raise bind_error(options.host, options.port, exc) from None
    return envelope_server_errors(server)
