"""Opaque, tamper-safe keyset cursors.

A cursor is ``<base64url(JSON position)>.<base64url(HMAC-SHA256)>``. The signature covers the
position and the query it belongs to (the list, its filters and the caller), so a cursor that
was edited, or replayed against another list, filter or principal, is refused (400, field
``cursor``). The position itself is not secret: it is the page's last name (jobs), last
sequence number and start instant (a job's executions: the instant lets the store read only the
days up to it), or last start instant and id (executions across jobs).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
from typing import Any

from scheduler.core.errors import InvalidCursor
from scheduler.secrets import SecretBox

logger = logging.getLogger(__name__)

MAX_CURSOR_LENGTH = 1024
_MAC_BYTES = 32


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        raise InvalidCursor("malformed cursor")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidCursor("malformed cursor") from None


class CursorCodec:
    """Signs and checks cursors with one HMAC key."""

    def __init__(self, key: bytes):
        if len(key) < 16:
            raise ValueError("the cursor key needs at least 16 bytes")
        self._key = key

    def _mac(self, scope: str, body: bytes) -> bytes:
        return hmac.new(self._key, scope.encode("utf-8", "surrogatepass") + b"\n" + body, hashlib.sha256).digest()

    def encode(self, scope: str, position: dict[str, Any]) -> str:
        """A cursor for ``position`` valid only for ``scope`` (see ``scope_of``)."""
        body = json.dumps(position, separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode("ascii")
        return f"{_b64(body)}.{_b64(self._mac(scope, body))}"

    def decode(self, cursor: str, scope: str) -> dict[str, Any]:
        """The position of a cursor made by ``encode`` for the same scope; ``InvalidCursor`` else."""
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_LENGTH or cursor.count(".") != 1:
            raise InvalidCursor("malformed cursor")
        body_text, mac_text = cursor.split(".")
        body, mac = _unb64(body_text), _unb64(mac_text)
        if len(mac) != _MAC_BYTES or not hmac.compare_digest(mac, self._mac(scope, body)):
            raise InvalidCursor("the cursor is not valid for this query")
        try:
            position = json.loads(body)
        except ValueError:
            raise InvalidCursor("malformed cursor") from None
        if not isinstance(position, dict):
            raise InvalidCursor("malformed cursor")
        return position


def scope_of(kind: str, owner: str, **filters: Any) -> str:
    """The query a cursor belongs to: the list, the caller and the filters (not the limit)."""
    return json.dumps([kind, owner, sorted((k, v) for k, v in filters.items())], ensure_ascii=True)


def cursor_key(settings: Any, box: SecretBox | None = None) -> bytes:
    """The HMAC key of cursors: ``settings.cursor_secret`` when set; else derived from the
    secret box's key when it has a stable one (the local key file); else a random key of this
    process (cursors then only work within one container: set ``SCHEDULER_CURSOR_SECRET``)."""
    secret = getattr(settings, "cursor_secret", None)
    if secret:
        return hashlib.sha256(b"scheduler-cursor:" + secret.encode("utf-8")).digest()
    derive = getattr(box, "derive_key", None)
    if callable(derive):
        return derive("cursor")
    logger.warning("no cursor secret configured; cursors are valid in this process only")
    return os.urandom(32)
