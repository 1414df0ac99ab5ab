"""The token of ``scheduler console``: whoever can reach the proxy can spend the user's AWS
identity through it, so beyond loopback (and wherever the user asks for it) every request
must carry the token.

The token is ``$SCHEDULER_CONSOLE_TOKEN`` when set, else a random one (``new_token``); it is
never taken from the command line, where any user of the machine can read it. The start-up
line prints the console's URL with the token, ``/console/?token=T``:

- A browser user opens that URL once. The answer sets a cookie (``HttpOnly``,
  ``SameSite=Strict``, ``Path=/``) whose value is derived from the token (an HMAC of it: the
  token itself is in no answer) and redirects to ``/console/``, so the token leaves the address
  bar and the history; the pages and their ``/v1`` calls carry the cookie from then on. The
  cookie's name is derived from the token too, so consoles on several ports of one host (which
  share cookies) do not overwrite each other's.
- A program sends ``Authorization: Bearer T`` (never forwarded to the API).

A ``token`` query parameter is always a sign-in: it is never forwarded (the API's URLs, and
their logs, never see it). Every comparison is in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, quote

from scheduler.core.constants import ANSWER_HEADERS

ENV_TOKEN = "SCHEDULER_CONSOLE_TOKEN"
MIN_TOKEN_LENGTH = 16
QUERY_PARAMETER = "token"
SIGNED_IN_PATH = "/console/"
_REALM = 'Bearer realm="scheduler console"'


def new_token() -> str:
    """A random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_problem(token: str) -> str | None:
    """What makes ``token`` unfit (too short to resist guessing, or not printable ASCII); None if nothing."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"is shorter than {MIN_TOKEN_LENGTH} characters"
    if not (token.isascii() and token.isprintable()) or " " in token:
        return "must be printable ASCII without spaces"
    return None


def _derived(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def _same(offered: str, expected: str) -> bool:
    return hmac.compare_digest(offered.encode("utf-8", "surrogateescape"), expected.encode())


def _answer(start_response: Callable, status: str, headers: list[tuple[str, str]], body: bytes) -> list[bytes]:
    start_response(
        status,
        headers + [*ANSWER_HEADERS.items(), ("Referrer-Policy", "no-referrer"), ("Content-Length", str(len(body)))],
    )
    return [body]


class TokenGate:
    """WSGI middleware: only requests that carry the token (its cookie, or a bearer header)
    reach the app; ``?token=T`` signs a browser in."""

    def __init__(self, token: str):
        self._token = token
        self.cookie_name = "scheduler_console_" + _derived(token, "cookie name")[:12]
        self._cookie_value = _derived(token, "cookie value")

    def login_url(self, console_url: str) -> str:
        """The URL the start-up line prints: the console's, with the token to sign in."""
        return f"{console_url}?{QUERY_PARAMETER}={quote(self._token, safe='')}"

    def admits(self, environ: dict[str, Any]) -> bool:
        """Whether the request carries the token: ``Authorization: Bearer T`` or the sign-in cookie."""
        scheme, _, credentials = str(environ.get("HTTP_AUTHORIZATION") or "").partition(" ")
        if scheme.lower() == "bearer" and _same(credentials.strip(), self._token):
            return True
        return any(_same(value, self._cookie_value) for value in self._cookies(environ))

    def _cookies(self, environ: dict[str, Any]) -> list[str]:
        values = []
        for part in str(environ.get("HTTP_COOKIE") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie_name:
                values.append(value)
        return values

    def __call__(self, app: Callable) -> Callable:
        """``app`` behind the gate."""

        def gated(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
            offered = [v for k, v in parse_qsl(str(environ.get("QUERY_STRING") or "")) if k == QUERY_PARAMETER]
            if offered:
                return self._sign_in(offered, start_response)
            if self.admits(environ):
                return app(environ, start_response)
            return _refuse(start_response, "this console needs its token: open the URL it printed at start")

        return gated

    def _sign_in(self, offered: list[str], start_response: Callable) -> list[bytes]:
        if len(offered) != 1 or not _same(offered[0], self._token):
            return _refuse(start_response, "the token is not this console's: open the URL it printed at start")
        cookie = f"{self.cookie_name}={self._cookie_value}; Path=/; HttpOnly; SameSite=Strict"
        headers = [("Location", SIGNED_IN_PATH), ("Set-Cookie", cookie), ("Content-Type", "text/plain")]
        return _answer(start_response, "303 See Other", headers, b"signed in: see /console/\n")


def _refuse(start_response: Callable, message: str) -> list[bytes]:
    body = json.dumps({"error": {"code": "unauthorized", "message": message, "details": []}}).encode()
    headers = [("Content-Type", "application/json"), ("WWW-Authenticate", _REALM)]
    return _answer(start_response, "401 Unauthorized", headers, body)


__all__ = ["ENV_TOKEN", "TokenGate", "new_token", "token_problem"]
