"""The typed views of a target that the delivery reads: ``HttpView`` and ``AmqpView`` (and the
AWS targets' views of :mod:`scheduler.targets.aws_views`).

A target has one schema: the pydantic models of ``scheduler.schema.models`` (``HttpTarget``,
``AmqpTarget``), with which the API validates every target before it is stored. The delivery
reads a stored target (a dict, its secrets decrypted) through these frozen views: the same
fields and defaults (``tests/unit/test_target_views.py`` holds them to the models), built by
:func:`view_of` without pydantic, which an executor would otherwise load for this alone (about
70 ms of its cold start). ``view_of`` refuses what the models would never have let through (a
row written by hand or by an older version) with ``InvalidTarget``: a permanent failure.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from scheduler.core.constants import is_secret_header
from scheduler.core.urls import check_url_syntax
from scheduler.targets.aws_views import AWS_TYPES, AwsView, InvalidAwsTarget, SigV4View, aws_view_of, sigv4_of

#: Default of ``target.timeout_seconds`` (http and amqp).
DEFAULT_TIMEOUT_SECONDS = 30.0
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
#: Methods whose requests carry no body (``models.BODILESS_METHODS``): a server that ignores one
#: reads it as the next request on the connection, and its answer lands on another delivery.
BODILESS_METHODS = ("GET", "HEAD")


class InvalidTarget(ValueError):
    """A target the delivery cannot read; the message never quotes a secret."""


@dataclass(frozen=True)
class HttpView:
    """An http target (``models.HttpTarget``)."""

    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    auth: Mapping[str, Any] | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    success_codes: frozenset[int] | None = None
    follow_redirects: bool = False
    # The headers whose values are secrets (a manual run's credential headers), lower-cased:
    # scrubbed from excerpts and errors, and never sent to another origin.
    secret_headers: frozenset[str] = frozenset()
    type: str = "http"

    @property
    def auth_header(self) -> tuple[str, str] | None:
        """The header ``auth`` sends: ``(name, value)``."""
        return _auth_header(self.auth)

    @property
    def sigv4(self) -> SigV4View | None:
        """The ``sigv4`` auth (the request signed as a role assumed for the owner), if that is it."""
        return sigv4_of(self.auth) if self.auth is not None and self.auth.get("type") == "sigv4" else None

    def secrets(self) -> list[str]:
        """The secret strings of the target, to be scrubbed from errors and excerpts."""
        found: list[str] = []
        if self.auth is not None:
            found.extend(v for k in ("password", "token", "value") if isinstance(v := self.auth.get(k), str) and v)
            name_value = self.auth_header
            if name_value is not None:
                found.extend(credential_parts(*name_value))
        password = _password(self.url)
        if password:
            found.append(password)
        if self.secret_headers:
            found.extend(_secret_values(self.headers, self.secret_headers))
        return found


@dataclass(frozen=True)
class AmqpView:
    """An amqp target (``models.AmqpTarget``)."""

    url: str | None = None
    exchange: str = ""
    routing_key: str = ""
    body: str = ""
    body_encoding: str = "utf-8"
    headers: Mapping[str, Any] = field(default_factory=dict)
    content_type: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    secret_headers: frozenset[str] = frozenset()  # as HttpView's
    type: str = "amqp"

    @property
    def payload(self) -> bytes:
        """The message body as sent: the text in UTF-8, or the base64 body decoded."""
        if self.body_encoding == "base64":
            return base64.b64decode(self.body, validate=True)
        return self.body.encode("utf-8")

    def secrets(self) -> list[str]:
        """The broker URL and its password (plain and percent-decoded), to be scrubbed from errors."""
        found = _secret_values(self.headers, self.secret_headers) if self.secret_headers else []
        if self.url is None:
            return found
        password = _password(self.url)
        return found + [self.url] + ([password, unquote(password)] if password else [])


TargetView = HttpView | AmqpView | AwsView

# Where a target dict names its secret headers (``overrides.apply_overrides`` sets it).
SECRET_HEADER_NAMES = "secret_header_names"


def _secret_values(headers: Mapping[str, Any], secret: frozenset[str]) -> list[str]:
    """The values of the secret headers, with the parts of each a target may echo apart
    (``credential_parts``)."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() in secret and isinstance(value, str) and value:
            found.extend(credential_parts(name, value))
    return found


#: A cookie's value shorter than this is not masked on its own (``theme=dark``'s ``dark`` would
#: mask every "dark" of an answer); the header's whole value and each ``name=value`` still are.
MIN_COOKIE_VALUE_SECRET = 4


def credential_parts(name: str, value: str) -> list[str]:
    """A secret header's value and the parts of it that a target may echo on their own: the
    credential after a scheme (``Bearer X``); a ``Basic`` credential decoded (``user:password``)
    and its password; each cookie of a ``Cookie`` header (``name=value``) and its value."""
    found = [value]
    stripped = value.strip()
    if " " in stripped:
        scheme, credential = stripped.split(" ", 1)
        found.append(credential)
        if scheme.lower() == "basic":
            found.extend(_basic_parts(credential.strip()))
    if name.lower() == "cookie":
        for pair in value.split(";"):
            cookie = pair.strip()
            found.append(cookie)
            _, _, cookie_value = cookie.partition("=")
            if len(cookie_value.strip('"')) >= MIN_COOKIE_VALUE_SECRET:
                found.append(cookie_value.strip('"'))
    return [part for part in found if part]


def _basic_parts(credential: str) -> list[str]:
    """A ``Basic`` credential decoded: ``user:password`` and the password (none if it is not
    base64 of such a pair)."""
    try:
        decoded = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return []
    _, colon, password = decoded.partition(":")
    return [decoded, password] if colon else []


def _secret_header_names(target: Mapping[str, Any]) -> frozenset[str]:
    """The headers whose values are secrets: a manual run's (named by the overrides) and the
    target's own of credential-like names (``is_secret_header``)."""
    names = [name for name in target.get(SECRET_HEADER_NAMES) or () if isinstance(name, str)]
    own = target.get("headers")
    if isinstance(own, Mapping):
        names.extend(name for name in own if isinstance(name, str) and is_secret_header(name))
    return frozenset(name.lower() for name in names)


def view_of(target: Any) -> TargetView:
    """The typed view of a target dict. Raises ``InvalidTarget``."""
    if not isinstance(target, dict):
        raise InvalidTarget("not an object")
    kind = target.get("type")
    if kind not in ("http", "amqp", *AWS_TYPES):
        raise InvalidTarget(f"unknown type {kind!r}" if isinstance(kind, str) else "missing type")
    timeout = _timeout(target.get("timeout_seconds"))
    if kind in AWS_TYPES:
        try:
            return aws_view_of(target, timeout)
        except InvalidAwsTarget as exc:
            raise InvalidTarget(str(exc)) from None
    return _http(target, timeout) if kind == "http" else _amqp(target, timeout)


def _timeout(raw: Any) -> float:
    if raw is None:
        return DEFAULT_TIMEOUT_SECONDS
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw <= 0:
        raise InvalidTarget("timeout_seconds must be a positive number")
    return float(raw)


def _http(target: dict, timeout: float) -> HttpView:
    url = target.get("url")
    problem = check_url_syntax(url)
    if problem or not isinstance(url, str):
        raise InvalidTarget(problem or "url is missing")
    method = target.get("method") or "POST"
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        raise InvalidTarget(f"method must be one of {', '.join(HTTP_METHODS)}")
    headers = target.get("headers") or {}
    if not isinstance(headers, dict):
        raise InvalidTarget("headers must be an object")
    clean: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or value is None or isinstance(value, (dict, list)):
            raise InvalidTarget("headers must map names to text values")
        clean[name] = value if isinstance(value, str) else str(value)
    body = target.get("body")
    if body is not None and not isinstance(body, str):
        raise InvalidTarget("body must be text")
    if body is not None and method.upper() in BODILESS_METHODS:  # a row stored before the API refused it
        if body:
            raise InvalidTarget(f"body: a {method.upper()} request carries no body")
        body = None  # an empty one sends nothing
    codes = target.get("success_codes")
    if codes is not None:
        if not isinstance(codes, (list, tuple)) or not all(
            isinstance(c, int) and not isinstance(c, bool) and 100 <= c <= 599 for c in codes
        ):
            raise InvalidTarget("success_codes must be a list of HTTP status codes")
        codes = frozenset(codes)
    auth = target.get("auth")
    _auth_header(auth)  # refuses a malformed one now
    return HttpView(
        url=url,
        method=method.upper(),
        headers=clean,
        body=body,
        auth=auth,
        timeout_seconds=timeout,
        success_codes=codes,
        follow_redirects=bool(target.get("follow_redirects", False)),
        secret_headers=_secret_header_names(target),
    )


def _auth_header(auth: Any) -> tuple[str, str] | None:
    if auth is None:
        return None
    if not isinstance(auth, Mapping):
        raise InvalidTarget("auth must be an object")
    kind = auth.get("type")
    if kind == "basic":
        username, password = auth.get("username"), auth.get("password")
        if not isinstance(username, str) or not isinstance(password, str) or ":" in username:
            raise InvalidTarget("basic auth needs a username (without ':') and a password")
        token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        return "Authorization", f"Basic {token}"
    if kind == "bearer":
        bearer = auth.get("token")
        if not isinstance(bearer, str) or not bearer:
            raise InvalidTarget("bearer auth needs a token")
        return "Authorization", f"Bearer {bearer}"
    if kind == "header":
        name, value = auth.get("name"), auth.get("value")
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise InvalidTarget("header auth needs a name and a value")
        return name, value
    if kind == "sigv4":  # no header of its own: the request is signed as a whole
        try:
            sigv4_of(auth)
        except InvalidAwsTarget as exc:
            raise InvalidTarget(str(exc)) from None
        return None
    raise InvalidTarget("auth type must be basic, bearer, header or sigv4")


def _amqp(target: dict, timeout: float) -> AmqpView:
    url = target.get("url") or None
    if url is not None and not isinstance(url, str):
        raise InvalidTarget("url must be text")
    exchange = target.get("exchange", "")
    if exchange is None:
        exchange = ""
    if not isinstance(exchange, str) or len(exchange.encode("utf-8")) > 255:
        raise InvalidTarget("exchange must be text of at most 255 bytes")
    routing_key = target.get("routing_key", "")
    if routing_key is None:
        routing_key = ""
    if not isinstance(routing_key, str) or len(routing_key.encode("utf-8")) > 255:
        raise InvalidTarget("routing_key must be text of at most 255 bytes")
    encoding = target.get("body_encoding") or "utf-8"
    encoding = encoding.lower() if isinstance(encoding, str) else encoding
    body = target.get("body")
    if body is None:
        body = ""
    if not isinstance(body, str):
        raise InvalidTarget("body must be text")
    if encoding == "base64":
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidTarget("body is not valid base64") from None
    elif encoding != "utf-8":
        raise InvalidTarget("body_encoding must be utf-8 or base64")
    headers = target.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(k, str) for k in headers):
        raise InvalidTarget("headers must be an object")
    if not all(_encodable(v) for v in headers.values()):
        raise InvalidTarget("header values must be text, numbers, booleans, null, lists or objects")
    content_type = target.get("content_type")
    if content_type is not None and not isinstance(content_type, str):
        raise InvalidTarget("content_type must be text")
    return AmqpView(
        url=url,
        exchange=exchange,
        routing_key=routing_key,
        body=body,
        body_encoding=encoding,
        headers=headers,
        content_type=content_type or None,
        timeout_seconds=timeout,
        secret_headers=_secret_header_names(target),
    )


def _encodable(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_encodable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _encodable(v) for k, v in value.items())
    return False


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None
