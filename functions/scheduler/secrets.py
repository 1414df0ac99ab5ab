"""Secrets at rest: the ``SecretBox`` port, its KMS and local-key-file implementations, and the
helpers that find the secret places of a job's target.

A token is a self-describing string ``enc:v1:<base64url>``. Its payload starts with one byte
naming the scheme: ``L`` (local key file: nonce, ciphertext) or ``K`` (KMS envelope: the
encrypted data key, nonce, ciphertext). Both use AES-256-GCM with a random 96-bit nonce; the
token's header is authenticated as associated data, so any change to a token is detected.

Secret places of a target: http ``auth.password`` (basic), ``auth.token`` (bearer),
``auth.value`` (header auth), and the password of an AMQP ``url``. The AMQP URL is stored with
its password replaced by the (percent-encoded) token, so it can be masked without decrypting:
``amqps://user:***@host/vhost``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import hmac
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, overload, runtime_checkable
from urllib.parse import quote, unquote, urlsplit

from scheduler.core.constants import SECRET_MASK, is_secret_header
from scheduler.core.errors import MaskedSecretError, SecretError

TOKEN_PREFIX = "enc:v1:"
DEFAULT_LOCAL_KEY_FILE = ".scheduler/secret.key"

_LOCAL = b"L"
_KMS = b"K"
_NONCE_BYTES = 12
_KEY_BYTES = 32
_KMS_CONTEXT = {"purpose": "scheduler-target-secret"}
_AUTH_SECRET_FIELDS = {"basic": "password", "bearer": "token", "header": "value"}


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
    (``opens_stored``).

    The file holds 32 random bytes; it is created with mode 0600 when absent.
    """

    opens_stored = True

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

    def derive_key(self, purpose: str) -> bytes:
        """A stable 32-byte key for another purpose (e.g. cursor signatures), derived from the
        file key so one secret per install is enough."""
        return hmac.new(self._key, b"scheduler-derive:" + purpose.encode("utf-8"), hashlib.sha256).digest()


class KmsSecretBox:
    """Envelope encryption with AWS KMS.

    A deployment's API may only seal (``kms:GenerateDataKey``); only its executor may open
    (``kms:Decrypt``), so a secret sent again is not compared with the stored one
    (``opens_stored`` False: no KMS call refused at every edit).

    One data key is generated per box (per Lambda container) on the first ``encrypt``; its
    plaintext stays in memory only and its KMS-encrypted form travels inside every token. A
    token is decrypted by asking KMS to decrypt its data key once per distinct encrypted data
    key (cached), then AES-GCM locally.
    """

    opens_stored = False

    def __init__(self, kms_client: Any, key_id: str, *, cache_size: int = 256):
        self.kms = kms_client
        self.key_id = key_id
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
                self._remember(answer["CiphertextBlob"], answer["Plaintext"])
            return self._data_key

    def _remember(self, encrypted: bytes, plaintext: bytes) -> None:
        self._cache[encrypted] = plaintext
        self._cache.move_to_end(encrypted)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _key_for(self, encrypted: bytes) -> bytes:
        with self._lock:
            key = self._cache.get(encrypted)
            if key is not None:
                self._cache.move_to_end(encrypted)
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
            self._remember(encrypted, key)
        return key

    def encrypt(self, plaintext: str) -> str:
        """See ``SecretBox.encrypt``."""
        key, encrypted = self._current_key()
        if len(encrypted) > 0xFFFF:
            raise SecretError("encrypted data key too long")
        header = _KMS + len(encrypted).to_bytes(2, "big") + encrypted
        return _seal(key, header, plaintext)

    def decrypt(self, token: str) -> str:
        """See ``SecretBox.decrypt``."""
        raw = _payload(token)
        if raw[:1] != _KMS or len(raw) < 3:
            raise SecretError("this token was not made by KMS envelope encryption")
        size = int.from_bytes(raw[1:3], "big")
        encrypted = raw[3 : 3 + size]
        if len(encrypted) != size:
            raise SecretError("malformed secret token")
        header = raw[: 3 + size]
        return _open(self._key_for(encrypted), header, raw[3 + size :])


def make_secret_box(settings: Any, *, kms_client: Any = None) -> SecretBox:
    """KMS envelope encryption when ``settings.kms_key_id`` is set, else a local key file
    (``settings.local_key_file`` or ``.scheduler/secret.key``)."""
    if getattr(settings, "kms_key_id", None):
        if kms_client is None:
            import boto3
            from botocore.config import Config

            # Short timeouts: a stalled KMS call must not outlast the executor's lease.
            kms_client = boto3.client(
                "kms", config=Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
            )
        return KmsSecretBox(kms_client, settings.kms_key_id)
    return LocalSecretBox(getattr(settings, "local_key_file", None) or DEFAULT_LOCAL_KEY_FILE)


# -- the secret places of a target -------------------------------------------------------------


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
        if token is not None and _opens_to(box, unquote(token) if url else token, value):
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
    where ``box`` can open the stored one (``opens_stored``: local mode; not a deployment's API)."""
    comparable = getattr(box, "opens_stored", False) and stored is not None and _origin(target) == _origin(stored)
    kept = _stored_secrets(stored) if comparable else {}
    return keep_masked_secrets(_map_secrets(target, _sealer(box, kept)), stored)


def _opens_to(box: SecretBox, token: str, plaintext: str) -> bool:
    """Whether ``token`` is a secret of ``box`` whose plaintext is ``plaintext`` (in constant time)."""
    if not is_token(token):
        return False
    try:
        return hmac.compare_digest(box.decrypt(token).encode(), plaintext.encode())
    except Exception:  # a key that cannot open it, KMS unreachable: sealed anew, as before
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
