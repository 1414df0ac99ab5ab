"""The HTTP sessions of the delivery: connection pools whose every connection goes through the
SSRF guard (``scheduler.targets.ssrf``) and under the current delivery's watchdog.

One ``requests.Session`` per distinct ``TargetPolicy`` (in practice one per process) lives at
module level and keeps connections alive across warm invocations; the policy is bound to its
connection pools, so a connection opened under a lax policy is never reused under a strict one.
It keeps no cookies and ignores proxies and ``.netrc`` from the environment.
"""

from __future__ import annotations

import http.cookiejar
import socket
import threading
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from scheduler.targets import ssrf
from scheduler.targets.delivery import TargetPolicy
from scheduler.targets.watchdog import current_watchdog

USER_AGENT = "scheduler/0.1 (job scheduler delivery)"


class _GuardMixin:
    """Connect through the SSRF guard and put the socket under the current watchdog."""

    policy: TargetPolicy = TargetPolicy()

    def _new_conn(self) -> socket.socket:  # overrides urllib3.connection.HTTPConnection
        watchdog = current_watchdog()
        timeout = self.timeout if isinstance(self.timeout, (int, float)) else 30.0
        if watchdog is not None:
            timeout = min(timeout, watchdog.remaining())
            watchdog.watch(lambda: self.sock)
        try:
            sock = ssrf.connect(
                self._dns_host,
                self.port,
                self.policy,
                timeout=timeout,
                socket_options=self.socket_options,
                source_address=self.source_address,
            )
        except ssrf.TargetNotAllowed:
            raise
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
        return sock

    def request(self, *args: Any, **kwargs: Any) -> Any:  # urllib3's signature, passed through
        watchdog = current_watchdog()
        if watchdog is not None:
            watchdog.watch(lambda: self.sock)
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _GuardedHTTPConnection(_GuardMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardMixin, HTTPSConnection):
    pass


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose connections go through the SSRF guard of ``policy``."""

    def __init__(self, policy: TargetPolicy, **kwargs: Any):
        self.policy = policy
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        """Install pool classes whose connections are bound to this adapter's policy."""
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        policy = self.policy
        http_conn = type("GuardedHTTPConnection", (_GuardedHTTPConnection,), {"policy": policy})
        https_conn = type("GuardedHTTPSConnection", (_GuardedHTTPSConnection,), {"policy": policy})
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
            "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
        }

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        """Proxies are never used: they would hide the destination from the guard."""
        raise requests.exceptions.InvalidProxyURL("proxies are not supported for targets")


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


# Connections kept alive per target host: as many as local mode's executors deliver at once, so
# a burst to one host reuses its connections instead of opening (and checking) new ones.
KEEP_ALIVE_PER_HOST = 64

_sessions: dict[TargetPolicy, requests.Session] = {}
_sessions_lock = threading.Lock()


def session_for(policy: TargetPolicy) -> requests.Session:
    """The module-level session of ``policy`` (created once, reused by warm invocations).

    Sessions are keyed by what the guard looks at (``allow_private``, ``allow_list``), so
    two equal policies share one session and its kept-alive connections.
    """
    policy = TargetPolicy(allow_private=bool(policy.allow_private), allow_list=tuple(policy.allow_list or ()))
    with _sessions_lock:
        session = _sessions.get(policy)
        if session is None:
            if len(_sessions) >= 8:  # policies come from settings: more than a few is a test
                _close_sessions_locked()
            session = requests.Session()
            session.trust_env = False
            session.cookies.set_policy(_NoCookies())
            session.headers = CaseInsensitiveDict(
                {"User-Agent": USER_AGENT, "Accept": "*/*", "Accept-Encoding": "identity"}
            )
            adapter = GuardedAdapter(policy, pool_connections=32, pool_maxsize=KEEP_ALIVE_PER_HOST)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            _sessions[policy] = session
        return session


def close_sessions() -> None:
    """Close every module-level session (tests; local mode at shutdown)."""
    with _sessions_lock:
        _close_sessions_locked()


def _close_sessions_locked() -> None:
    for session in _sessions.values():
        session.close()
    _sessions.clear()
