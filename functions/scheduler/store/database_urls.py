"""Database URLs as ``scheduler local`` and ``scheduler migrate`` take them: where one comes
from (``--database-url``, ``$SCHEDULER_DATABASE_URL``, ``$DATABASE_URL``), what is wrong with a
malformed one, and what to say of one that cannot be reached, in words that never repeat the
URL (it may hold a password)."""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from scheduler.core import constants as c

POSTGRES_SCHEMES = ("postgresql", "postgres")
URL_SHAPE = "postgresql://[user[:password]@]host[:port]/dbname or 'host=H port=P dbname=D'"


class DatabaseUrlError(ValueError):
    """A malformed database URL: the message names where it came from and what is wrong."""


def problem(url: str) -> str | None:
    """What is wrong with a database URL, in words that never repeat it; None when libpq can
    read it (whether the database answers is another matter)."""
    if not url.strip():
        return "is empty"
    if "://" in url:
        scheme = url.split("://", 1)[0]
        if scheme.lower() not in POSTGRES_SCHEMES:
            return f"has the scheme {scheme[:20]!r}, not postgresql:// (expected {URL_SHAPE})"
        wrong_port = _port_problem(url)
        if wrong_port:
            return wrong_port
    elif "=" not in url:
        return f"is neither a postgresql:// URL nor key=value settings (expected {URL_SHAPE})"
    try:
        conninfo_to_dict(url)
    except psycopg.Error as exc:
        return f"cannot be read: {_without(url, exc)}"
    return None


def _port_problem(url: str) -> str | None:
    """What ``urlsplit`` finds wrong with the URL's host and port (libpq would only say it at connect)."""
    from urllib.parse import urlsplit

    try:
        urlsplit(url).port  # noqa: B018 - raises on a malformed port or IPv6 host
    except ValueError as exc:
        if "Invalid IPv6 URL" in str(exc):
            return "cannot be read: an IPv6 host's '[' is not closed by ']'"
        return "has a port that is not a number from 0 to 65535"
    return None


def _without(url: str, exc: Exception) -> str:
    """The error's text on one line, the URL in it replaced by ``<url>``."""
    return " ".join(str(exc).split()).replace(url, "<url>")[:300]


def resolve(given: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The database URL and where it comes from (``--database-url``, ``$SCHEDULER_DATABASE_URL``,
    ``$DATABASE_URL``), or ``(None, "")`` for none at all. ``DatabaseUrlError`` naming that
    source when the URL is malformed; an empty ``--database-url`` is one (it does not fall back
    to the environment, which may name another database)."""
    url: str | None
    if given is not None:
        source, url = "--database-url", given
    else:
        named = [(f"${name}", environ.get(name)) for name in (c.ENV_DATABASE_URL, "DATABASE_URL")]
        source, url = next(((name, value) for name, value in named if value), ("", None))
    if url is None:
        return None, ""
    wrong = problem(url)
    if wrong:
        raise DatabaseUrlError(f"{source} {wrong}")
    return url, source


def unreachable(url: str, exc: Exception) -> str:
    """One line on a database that cannot be reached: its host and port, never its password."""
    try:
        settings = conninfo_to_dict(url)
        where = f"{settings.get('host') or 'localhost'}:{settings.get('port') or 5432}"
    except psycopg.Error:
        where = "the given URL"
    return f"cannot reach the database at {where}: {_without(url, exc)}"
