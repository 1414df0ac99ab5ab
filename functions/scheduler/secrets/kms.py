"""KMS envelope encryption (``KmsSecretBox``), with each secret's HMAC when the deployment
gives its API a KMS HMAC key; and ``make_secret_box``, the box a process's settings ask for.

The HMAC lets a deployment's API, which may seal but not open, tell whether a secret sent again
is the one stored: it asks KMS for the HMAC of the stored token's salt and the value sent
(``kms:GenerateMac``) and compares. The key never leaves KMS, so a reader of the database cannot
test guesses against a stored HMAC; and each secret is sealed with a salt of its own, so two
stored HMACs of one value differ: the database does not show which secrets are equal, within an
owner or across owners. (Tokens of scheme ``M``, sealed before the salt, hash the value alone:
equal values have equal HMACs until they are sent again or rotated.)
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
from collections import OrderedDict
from typing import Any

from scheduler.core.errors import SecretError
from scheduler.secrets.boxes import (
    _KMS,
    _KMS_CONTEXT,
    _KMS_MAC,
    _KMS_SALTED_MAC,
    _MAC_ALGORITHM,
    _MAC_BYTES,
    _MAC_LABEL,
    _SALT_BYTES,
    DEFAULT_LOCAL_KEY_FILE,
    LocalSecretBox,
    SecretBox,
    _open,
    _payload,
    _seal,
)

logger = logging.getLogger(__name__)


class KmsSecretBox:
    """Envelope encryption with AWS KMS.

    A deployment's API may only seal (``kms:GenerateDataKey``); only its executor may open
    (``kms:Decrypt``). With ``mac_key_id`` (a KMS HMAC key the API may sign with,
    ``kms:GenerateMac``) each token carries a random salt and the HMAC of the salt and its
    plaintext (scheme ``S``), and a secret sent again is compared by its HMAC under the stored
    token's salt (``compares_stored``, ``holds``); without it, it is not (no KMS call refused at
    every edit), and each is sealed anew.

    One data key is generated per box (per Lambda container) on the first ``encrypt``; its
    plaintext stays in memory only and its KMS-encrypted form travels inside every token. A
    token is decrypted by asking KMS to decrypt its data key once per distinct encrypted data
    key (cached), then AES-GCM locally.
    """

    def __init__(self, kms_client: Any, key_id: str, *, mac_key_id: str | None = None, cache_size: int = 256):
        self.kms = kms_client
        self.key_id = key_id
        self.mac_key_id = mac_key_id
        self.compares_stored = mac_key_id is not None
        self._macs: OrderedDict[bytes, bytes] = OrderedDict()  # by the labelled digest of salt and secret
        self._lock = threading.Lock()
        self._data_key: tuple[bytes, bytes] | None = None  # (plaintext, encrypted)
        self._cache: OrderedDict[bytes, bytes] = OrderedDict()
        self._cache_size = cache_size

    def _current_key(self) -> tuple[bytes, bytes]:
        with self._lock:
            if self._data_key is None:
                answer = self.kms.generate_data_key(
                    KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=_KMS_CONTEXT
                )
                self._data_key = (answer["Plaintext"], answer["CiphertextBlob"])
                self._remember(self._cache, answer["CiphertextBlob"], answer["Plaintext"])
            return self._data_key

    def _recall(self, cache: OrderedDict[bytes, bytes], key: bytes) -> bytes | None:
        """Under the lock: what ``cache`` (the data keys' or the HMACs') holds for ``key``, kept
        as the most recently used."""
        value = cache.get(key)
        if value is not None:
            cache.move_to_end(key)
        return value

    def _remember(self, cache: OrderedDict[bytes, bytes], key: bytes, value: bytes) -> None:
        """Under the lock: ``value`` kept for ``key``, the least recently used let go past the size."""
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._cache_size:
            cache.popitem(last=False)

    def _key_for(self, encrypted: bytes) -> bytes:
        with self._lock:
            key = self._recall(self._cache, encrypted)
        if key is not None:
            return key
        try:
            answer = self.kms.decrypt(CiphertextBlob=encrypted, KeyId=self.key_id, EncryptionContext=_KMS_CONTEXT)
        except Exception as exc:  # botocore ClientError: InvalidCiphertextException and friends
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in ("InvalidCiphertextException", "IncorrectKeyException", "AccessDeniedException"):
                raise SecretError(f"KMS cannot decrypt the token's data key ({code})") from None
            raise
        key = answer["Plaintext"]
        with self._lock:
            self._remember(self._cache, encrypted, key)
        return key

    def _mac(self, plaintext: str, salt: bytes) -> bytes:
        """The KMS HMAC of ``salt`` and ``plaintext`` (one ``GenerateMac`` per distinct pair,
        remembered: a token compared again in this container costs no call). An empty salt is
        scheme ``M``'s HMAC of the value alone."""
        assert self.mac_key_id is not None
        digest = hashlib.sha256(_MAC_LABEL + salt + plaintext.encode("utf-8")).digest()
        with self._lock:
            mac = self._recall(self._macs, digest)
        if mac is None:
            answer = self.kms.generate_mac(KeyId=self.mac_key_id, MacAlgorithm=_MAC_ALGORITHM, Message=digest)
            mac = bytes(answer["Mac"])
            if len(mac) != _MAC_BYTES:
                raise SecretError(f"the KMS key {self.mac_key_id} made a MAC of {len(mac)} bytes, not {_MAC_BYTES}")
            with self._lock:
                self._remember(self._macs, digest, mac)
        return mac

    def encrypt(self, plaintext: str) -> str:
        """See ``SecretBox.encrypt``."""
        key, encrypted = self._current_key()
        if len(encrypted) > 0xFFFF:
            raise SecretError("encrypted data key too long")
        scheme = _KMS if self.mac_key_id is None else self._mac_scheme(plaintext)
        header = scheme + len(encrypted).to_bytes(2, "big") + encrypted
        return _seal(key, header, plaintext)

    def _mac_scheme(self, plaintext: str) -> bytes:
        """``S``, a new random salt and the HMAC of both; ``K`` alone when KMS does not make it (a
        role without ``kms:GenerateMac``, an outage of that call): the secret is sealed all the
        same, and only its comparison when sent again is lost."""
        salt = os.urandom(_SALT_BYTES)
        try:
            return _KMS_SALTED_MAC + salt + self._mac(plaintext, salt)
        except Exception as exc:  # botocore's ClientError and friends
            code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
            logger.warning("KMS made no HMAC of a secret (%s): sealed without one", code)
            return _KMS

    def decrypt(self, token: str) -> str:
        """See ``SecretBox.decrypt``."""
        raw = _payload(token)
        start = _kms_data_key_at(raw)
        size = int.from_bytes(raw[start : start + 2], "big")
        encrypted = raw[start + 2 : start + 2 + size]
        if len(encrypted) != size:
            raise SecretError("malformed secret token")
        header = raw[: start + 2 + size]
        return _open(self._key_for(encrypted), header, raw[start + 2 + size :])

    def holds(self, token: str, plaintext: str) -> bool:
        """Whether ``token`` holds ``plaintext``, told without opening it: by the HMAC it carries,
        made again under its salt (a token sealed without one, or without this box's HMAC key, is
        never said to)."""
        raw = _payload(token)
        salt_bytes = {_KMS_SALTED_MAC: _SALT_BYTES, _KMS_MAC: 0}.get(raw[:1])
        if self.mac_key_id is None or salt_bytes is None or len(raw) < 1 + salt_bytes + _MAC_BYTES:
            return False
        salt, mac = raw[1 : 1 + salt_bytes], raw[1 + salt_bytes : 1 + salt_bytes + _MAC_BYTES]
        return hmac.compare_digest(mac, self._mac(plaintext, salt))


def _kms_data_key_at(raw: bytes) -> int:
    """Where a KMS token's data key (its 2-byte length first) begins in its payload."""
    start = {_KMS: 1, _KMS_MAC: 1 + _MAC_BYTES, _KMS_SALTED_MAC: 1 + _SALT_BYTES + _MAC_BYTES}.get(raw[:1])
    if start is None:
        raise SecretError("this token was not made by KMS envelope encryption")
    if len(raw) < start + 2:
        raise SecretError("malformed secret token")
    return start


def make_secret_box(settings: Any, *, kms_client: Any = None) -> SecretBox:
    """KMS envelope encryption when ``settings.kms_key_id`` is set (with the secrets' HMACs
    when ``settings.kms_mac_key_id`` is), else a local key file (``settings.local_key_file`` or
    ``.scheduler/secret.key``)."""
    if getattr(settings, "kms_key_id", None):
        if kms_client is None:
            import boto3
            from botocore.config import Config

            # Short timeouts: a stalled KMS call must not outlast the executor's lease.
            kms_client = boto3.client(
                "kms", config=Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
            )
        return KmsSecretBox(kms_client, settings.kms_key_id, mac_key_id=getattr(settings, "kms_mac_key_id", None))
    return LocalSecretBox(getattr(settings, "local_key_file", None) or DEFAULT_LOCAL_KEY_FILE)
