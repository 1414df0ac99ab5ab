"""The ``SecretBox`` port, its tokens and the local key file's box.

A token is a self-describing string ``enc:v1:<base64url>``. Its payload starts with one byte
naming the scheme: ``L`` (local key file: nonce, ciphertext), ``K`` (KMS envelope: the
encrypted data key, nonce, ciphertext), ``S`` (KMS envelope with the plaintext's salted keyed
hash: a random 16-byte salt and the 32-byte HMAC a KMS HMAC key made of the salt and the
plaintext, then as ``K``; ``kms``) or ``M`` (sealed before ``S``: the HMAC of the plaintext
alone, no salt, then as ``K``; still opened and compared). All use AES-256-GCM with a random
96-bit nonce; the token's header (with the salt and the HMAC) is authenticated as associated
data, so any change to a token is detected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from scheduler.core.errors import SecretError

TOKEN_PREFIX = "enc:v1:"
DEFAULT_LOCAL_KEY_FILE = ".scheduler/secret.key"

_LOCAL = b"L"
_KMS = b"K"
_KMS_MAC = b"M"
_KMS_SALTED_MAC = b"S"
_MAC_BYTES = 32
_SALT_BYTES = 16
_MAC_ALGORITHM = "HMAC_SHA_256"
# What the KMS HMAC key is asked to sign: a digest of the secret under this label (a message of
# at most 4,096 bytes, whatever the secret's length).
_MAC_LABEL = b"scheduler-target-secret:"
_NONCE_BYTES = 12
_KEY_BYTES = 32
_KMS_CONTEXT = {"purpose": "scheduler-target-secret"}


@runtime_checkable
class SecretBox(Protocol):
    """Encrypts and decrypts the secrets of job targets."""

    def encrypt(self, plaintext: str) -> str:
        """A token (``enc:v1:...``) holding ``plaintext``; a fresh random nonce every call."""
        ...

    def decrypt(self, token: str) -> str:
        """The plaintext of a token made by ``encrypt``. Raises ``SecretError`` when the token
        is malformed, was tampered with, or belongs to another key."""
        ...


def is_token(value: Any) -> bool:
    """Whether ``value`` looks like a token of a secret box."""
    return isinstance(value, str) and value.startswith(TOKEN_PREFIX)


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise SecretError("malformed secret token") from None


def _payload(token: str) -> bytes:
    if not is_token(token):
        raise SecretError("not a secret token")
    raw = _b64decode(token[len(TOKEN_PREFIX) :])
    if not raw:
        raise SecretError("malformed secret token")
    return raw


# cryptography loads when a secret is first sealed or opened: most API requests and cold starts
# (the cursor key is an HMAC) need none.


def _seal(key: bytes, header: bytes, plaintext: str) -> str:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, plaintext.encode("utf-8"), TOKEN_PREFIX.encode() + header)
    return TOKEN_PREFIX + _b64encode(header + nonce + sealed)


def _open(key: bytes, header: bytes, rest: bytes) -> str:
    if len(rest) < _NONCE_BYTES + 16:
        raise SecretError("malformed secret token")
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce, sealed = rest[:_NONCE_BYTES], rest[_NONCE_BYTES:]
    try:
        return AESGCM(key).decrypt(nonce, sealed, TOKEN_PREFIX.encode() + header).decode("utf-8")
    except (InvalidTag, UnicodeDecodeError):
        raise SecretError("secret token failed authentication (tampered, or another key)") from None


class LocalSecretBox:
    """AES-256-GCM with a key kept in a local file (local mode and tests).

    It opens what it seals, in the API too: a secret sent again is compared with the stored one
    (``compares_stored``, ``holds``).

    The file holds 32 random bytes; it is created with mode 0600 when absent.
    """

    compares_stored = True

    def __init__(self, key_file_path: str | os.PathLike[str]):
        self.path = Path(key_file_path)
        self._key = self._load_or_create(self.path)

    @staticmethod
    def _load_or_create(path: Path) -> bytes:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # Written whole under another name, then linked into place (which fails if the file
            # exists): a reader never sees a partial key, and a process killed while writing
            # leaves no empty key file behind that would refuse every later start.
            fd, draft = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(os.urandom(_KEY_BYTES))
                    f.flush()
                    os.fsync(f.fileno())
                os.link(draft, path)
            except FileExistsError:  # another process created it meanwhile: theirs is the key
                pass
            finally:
                os.unlink(draft)
        key = path.read_bytes()
        if len(key) != _KEY_BYTES:
            raise SecretError(f"the key file {path} must hold exactly {_KEY_BYTES} bytes")
        return key

    def encrypt(self, plaintext: str) -> str:
        """See ``SecretBox.encrypt``."""
        return _seal(self._key, _LOCAL, plaintext)

    def decrypt(self, token: str) -> str:
        """See ``SecretBox.decrypt``."""
        raw = _payload(token)
        if raw[:1] != _LOCAL:
            raise SecretError("this token was not made by a local key file")
        return _open(self._key, _LOCAL, raw[1:])

    def holds(self, token: str, plaintext: str) -> bool:
        """Whether ``token`` opens to ``plaintext`` (compared in constant time)."""
        return hmac.compare_digest(self.decrypt(token).encode(), plaintext.encode())

    def derive_key(self, purpose: str) -> bytes:
        """A stable 32-byte key for another purpose (e.g. cursor signatures), derived from the
        file key so one secret per install is enough."""
        return hmac.new(self._key, b"scheduler-derive:" + purpose.encode("utf-8"), hashlib.sha256).digest()
