"""The secret places of a job's target, and what is done at each: sealing, opening for a
delivery, masking, keeping ``"***"``, and comparing a secret sent again with the stored one.

Secret places of a target: http ``auth.password`` (basic), ``auth.token`` (bearer),
``auth.value`` (header auth), a secret header's value, and the password of an AMQP ``url``. The
AMQP URL is stored with its password replaced by the (percent-encoded) token, so it can be
masked without decrypting: ``amqps://user:***@host/vhost``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload
from urllib.parse import quote, unquote, urlsplit

from scheduler.core.constants import SECRET_MASK, is_secret_header
from scheduler.core.errors import MaskedSecretError
from scheduler.secrets.boxes import SecretBox, is_token

_AUTH_SECRET_FIELDS = {"basic": "password", "bearer": "token", "header": "value"}


def _url_password(url: str) -> tuple[str, str, str] | None:
    """(text before the password, the raw percent-encoded password, text after it), or None
    when the URL carries no password."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return None
    start = url.find("//")
    if start < 0 or "@" not in netloc or url[start + 2 : start + 2 + len(netloc)] != netloc:
        return None
    userinfo, _, hostport = netloc.rpartition("@")
    if ":" not in userinfo:
        return None
    user, _, password = userinfo.partition(":")
    head = url[: start + 2] + user + ":"
    return head, password, "@" + hostport + url[start + 2 + len(netloc) :]


def url_with_password_masked(url: str) -> str:
    """``url`` with its password, when it carries one, as ``"***"``: a URL as answered, so that
    a stored URL and one sent back with its password masked compare equal (and differ when any
    other part, the user name included, changed)."""
    parts = _url_password(url)
    return url if parts is None else parts[0] + SECRET_MASK + parts[2]


SecretMapper = Callable[[str, str, str], str]


@overload
def _map_secrets(target: dict[str, Any], fn: SecretMapper, *, deep: bool = True) -> dict[str, Any]: ...


@overload
def _map_secrets(target: None, fn: SecretMapper, *, deep: bool = True) -> None: ...


def _map_secrets(target: dict[str, Any] | None, fn: SecretMapper, *, deep: bool = True) -> dict[str, Any] | None:
    """A deep copy of ``target`` with ``fn(field, value, kind)`` applied to each secret place;
    ``kind`` is ``"value"`` or ``"url_password"`` (the raw, percent-encoded URL segment).
    ``deep=False``: only the objects that hold a secret are copied, the rest is shared with
    ``target`` (for a reader that changes nothing in it)."""
    if target is None:
        return None
    out = copy.deepcopy(target) if deep else dict(target)
    kind = out.get("type")
    if kind in ("http", "amqp"):
        _map_secret_headers(out, fn, deep)
    if kind == "http":
        auth = out.get("auth")
        if isinstance(auth, dict):
            name = _AUTH_SECRET_FIELDS.get(str(auth.get("type")))
            if name and isinstance(auth.get(name), str):
                auth = out["auth"] = auth if deep else dict(auth)
                auth[name] = fn(f"target.auth.{name}", auth[name], "value")
    elif kind == "amqp":
        url = out.get("url")
        if isinstance(url, str):
            pieces = _url_password(url)
            if pieces is not None:
                head, password, tail = pieces
                out["url"] = head + fn("target.url", password, "url_password") + tail
    return out


def _map_secret_headers(out: dict[str, Any], fn: SecretMapper, deep: bool) -> None:
    """``fn`` applied to the value of each header of ``out`` whose name says it is a credential
    (``is_secret_header``: ``Authorization``, ``X-Api-Key``...), as ``target.headers.<name>``."""
    given = out.get("headers")
    if not isinstance(given, dict):
        return
    secret = [name for name in given if is_secret_header(name)]
    if not secret:
        return
    headers: dict[str, Any] = given if deep else dict(given)
    out["headers"] = headers
    for name in secret:
        if isinstance(headers[name], str):
            headers[name] = fn(f"target.headers.{name}", headers[name], "value")


def map_secrets(target: dict[str, Any], fn: SecretMapper) -> dict[str, Any]:
    """A copy of ``target`` with ``fn(field, value, kind)`` applied to each of its secret places
    (``field`` as the API names it: ``target.auth.token``, ``target.url``; ``kind`` ``"value"``,
    or ``"url_password"`` for the raw, percent-encoded password of a URL)."""
    return _map_secrets(target, fn)


def encrypt_target_secrets(target: dict[str, Any], box: SecretBox) -> dict[str, Any]:
    """The target with each secret encrypted. A ``"***"`` is left as it is (see
    ``keep_masked_secrets``); every other value is encrypted, even one that looks like a token."""
    return _map_secrets(target, _sealer(box, {}))


def _sealer(box: SecretBox, kept: dict[str, str]) -> SecretMapper:
    """A secret's sealing: a ``"***"`` left as it is, a value whose token ``kept`` holds at its
    place (``_stored_secrets``) and opens to it kept as stored, any other encrypted anew."""

    def seal(field: str, value: str, kind: str) -> str:
        url = kind == "url_password"  # the URL's raw segment: percent-encoded, as its token is
        if (unquote(value) if url else value) == SECRET_MASK:
            return value
        token = kept.get(f"{field}#{kind}" if url else field)
        if token is not None and _holds(box, unquote(token) if url else token, value):
            return token
        return quote(box.encrypt(value), safe="") if url else box.encrypt(value)

    return seal


def decrypt_target_secrets(target: dict[str, Any], box: SecretBox) -> dict[str, Any]:
    """The target with its secrets in plaintext, for the delivery only (never log or store it).
    What holds no secret is shared with ``target`` (read it, do not change it): a deep copy at
    every delivery was a twentieth of local mode's CPU."""

    def dec(field: str, value: str, kind: str) -> str:
        if kind == "url_password":
            token = unquote(value)
            return box.decrypt(token) if is_token(token) else value
        return box.decrypt(value) if is_token(value) else value

    return _map_secrets(target, dec, deep=False)


def mask_target_secrets(target: dict[str, Any]) -> dict[str, Any]:
    """The target as answered: each secret shown as ``"***"``."""
    return _map_secrets(target, lambda field, value, kind: SECRET_MASK)


def _stored_secrets(target: dict[str, Any] | None) -> dict[str, str]:
    found: dict[str, str] = {}

    def grab(field: str, value: str, kind: str) -> str:
        found[f"{field}#{kind}" if kind == "url_password" else field] = value
        return value

    _map_secrets(target, grab)
    return found


def keep_masked_secrets(new_target: dict[str, Any], stored_target: dict[str, Any] | None) -> dict[str, Any]:
    """``new_target`` with each ``"***"`` replaced by the stored encrypted secret at the same
    place (an AMQP URL whose password is ``***`` keeps the stored password). Raises
    ``MaskedSecretError`` when there is nothing stored there."""
    stored = _stored_secrets(stored_target)
    moved = stored_target is not None and _origin(new_target) != _origin(stored_target)

    def keep(field: str, value: str, kind: str) -> str:
        if kind == "url_password":
            if unquote(value) != SECRET_MASK:
                return value
            kept = stored.get(f"{field}#{kind}")
        else:
            if value != SECRET_MASK:
                return value
            kept = stored.get(field)
        if kept is None:
            raise MaskedSecretError(field)
        if moved:  # a secret never follows its target to another scheme, host or port
            raise MaskedSecretError(
                field,
                'is masked ("***") but the target\'s url moved to another scheme, '
                "host or port: send the secret again for the new one",
            )
        return kept

    return _map_secrets(new_target, keep)


def seal_target_secrets(target: dict[str, Any], box: SecretBox, stored: dict[str, Any] | None) -> dict[str, Any]:
    """A target sent for an existing one (``stored``), as it is to be stored: each secret
    encrypted, each ``"***"`` the stored one (``keep_masked_secrets``), and a secret sent again
    with the value stored at the same place (same scheme, host and port) kept as it was stored,
    so that sending a job again unchanged changes nothing (no new version, no change-log entry),
    where ``box`` can compare it with the stored one (``compares_stored``: local mode's, which
    opens it; a deployment's API with its KMS HMAC key, which compares their HMACs)."""
    comparable = getattr(box, "compares_stored", False) and stored is not None and _origin(target) == _origin(stored)
    kept = _stored_secrets(stored) if comparable else {}
    return keep_masked_secrets(_map_secrets(target, _sealer(box, kept)), stored)


def _holds(box: SecretBox, token: str, plaintext: str) -> bool:
    """Whether ``token`` is a secret of ``box`` whose plaintext is ``plaintext`` (its ``holds``:
    in constant time)."""
    holds = getattr(box, "holds", None)
    if holds is None or not is_token(token):
        return False
    try:
        return bool(holds(token, plaintext))
    except Exception:  # a key that cannot open or sign it, KMS unreachable: sealed anew, as before
        return False


_DEFAULT_PORTS = {"http": 80, "https": 443, "amqp": 5672, "amqps": 5671}


def _origin(target: dict[str, Any] | None) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of a target's url; None without one (an AMQP target on the
    deployment's broker)."""
    url = (target or {}).get("url")
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower().rstrip("."), parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return ("?", url, None)


def stored_rule(alert: Mapping[str, Any], i: int, before: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The stored rule whose secrets a rule's ``"***"`` keeps: the one at its place when its
    target is the same (type and URL), else the only stored rule with that target (and the same
    ``on`` when several share it); None when none is the same rule."""

    def target_of(rule: Mapping[str, Any]) -> tuple[Any, Any]:
        target = rule.get("target") or {}
        url = target.get("url")
        if isinstance(url, str):  # a broker's password: stored sealed, sent back as "***"
            url = url_with_password_masked(url)
        return target.get("type"), url

    wanted = target_of(alert)
    if i < len(before) and target_of(before[i]) == wanted:
        return before[i]
    same = [rule for rule in before if target_of(rule) == wanted]
    if len(same) > 1:
        same = [rule for rule in same if rule.get("on") == alert.get("on")]
    return same[0] if len(same) == 1 else None
