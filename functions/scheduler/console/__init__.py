"""The web console: static pages over the public API, served by the app itself.

``console_app(app)`` serves the console's files under ``/console/`` (``GET /`` and ``/console``
redirect there) and hands every other request to ``app`` (the API). The pages call the API's
``/v1`` routes from the browser, so they see exactly what any other client sees. The files are
plain ES modules and CSS; the two libraries they use are vendored under ``assets/vendor/`` (see
the README there): no build step, no asset from another host.

``local_app(app, host=...)`` is what ``scheduler local`` serves: the console and the API behind
the local server's safety checks (``scheduler.console.guard``). ``scheduler console`` serves the
same pages in front of a deployed API (``scheduler.console.proxy``).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from scheduler.console.guard import guard

ASSETS = Path(__file__).resolve().parent / "assets"
PREFIX = "/console/"
_TYPES = {
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".md": "text/plain",
    ".txt": "text/plain",
}
# Only files from this folder, and nothing but what the pages load: no script from elsewhere,
# no framing (clickjacking), no inline script.
SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
        ),
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-cache"),
]


def asset_path(relative: str) -> Path | None:
    """The file of an asset path (``app.js``, ``vendor/uPlot.min.css``), or None when there is
    none (or the path leaves the assets folder)."""
    if not relative or relative.endswith("/"):
        relative += "index.html"
    if "\\" in relative or "\x00" in relative:
        return None
    candidate = (ASSETS / relative).resolve()
    if ASSETS not in candidate.parents or not candidate.is_file():
        return None
    return candidate


def _send(
    start_response: Callable, status: str, headers: list[tuple[str, str]], body: bytes, method: str
) -> list[bytes]:
    start_response(status, headers + [("Content-Length", str(len(body)))])
    return [] if method == "HEAD" else [body]


def console_app(app: Callable) -> Callable:
    """``app`` with the console in front: ``/console/...`` served from the assets, ``/`` and
    ``/console`` redirected to ``/console/``, everything else passed to ``app``."""

    def serve(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        if path in ("/", "/console") and method in ("GET", "HEAD"):
            return _send(
                start_response,
                "302 Found",
                [("Location", PREFIX), ("Content-Type", "text/plain")] + SECURITY_HEADERS,
                b"see /console/\n",
                method,
            )
        if not path.startswith(PREFIX):
            return app(environ, start_response)
        if method not in ("GET", "HEAD"):
            return _send(
                start_response,
                "405 Method Not Allowed",
                [("Allow", "GET, HEAD"), ("Content-Type", "text/plain")] + SECURITY_HEADERS,
                b"the console's files are read-only\n",
                method,
            )
        file = asset_path(path[len(PREFIX) :])
        if file is None:
            return _send(
                start_response,
                "404 Not Found",
                [("Content-Type", "text/plain; charset=utf-8")] + SECURITY_HEADERS,
                b"no such file in the console\n",
                method,
            )
        kind = _TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/"):
            kind += "; charset=utf-8"
        return _send(start_response, "200 OK", [("Content-Type", kind)] + SECURITY_HEADERS, file.read_bytes(), method)

    return serve


def local_app(app: Callable, *, host: str) -> Callable:
    """What a server on the user's machine bound to ``host`` serves: the console and ``app``,
    behind the Host, content-type and Origin checks."""
    return guard(console_app(app), bound_host=host)


__all__ = ["ASSETS", "console_app", "local_app"]
