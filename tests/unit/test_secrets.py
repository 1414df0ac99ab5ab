"""The secret box port: local key file and KMS envelope encryption, and the target helpers."""

from __future__ import annotations

import base64
import os
import stat

import boto3
import pytest
from moto import mock_aws

from scheduler.core.constants import SECRET_MASK
from scheduler.core.errors import MaskedSecretError
from scheduler.secrets import (
    KmsSecretBox,
    LocalSecretBox,
    SecretBox,
    SecretError,
    decrypt_target_secrets,
    encrypt_target_secrets,
    is_token,
    keep_masked_secrets,
    make_secret_box,
    mask_target_secrets,
)
from scheduler.secrets.boxes import TOKEN_PREFIX, _b64encode, _payload
from scheduler.settings import Settings


def _flip(token: str, index: int = -5) -> str:
    prefix, blob = token[:7], token[7:]
    raw = bytearray(base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)))
    raw[index] ^= 0x01
    return prefix + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@pytest.fixture
def local_box(tmp_path) -> LocalSecretBox:
    return LocalSecretBox(tmp_path / "keys" / "secret.key")


class _CountingKms:
    """Wraps a KMS client and counts the calls."""

    def __init__(self, client):
        self.client = client
        self.calls: list[str] = []

    def generate_data_key(self, **kwargs):
        self.calls.append("GenerateDataKey")
        return self.client.generate_data_key(**kwargs)

    def decrypt(self, **kwargs):
        self.calls.append("Decrypt")
        return self.client.decrypt(**kwargs)

    def generate_mac(self, **kwargs):
        self.calls.append("GenerateMac")
        return self.client.generate_mac(**kwargs)


@pytest.fixture
def kms():
    with mock_aws():
        client = boto3.client("kms", region_name="eu-central-1")
        key_id = client.create_key(Description="scheduler secrets")["KeyMetadata"]["KeyId"]
        yield _CountingKms(client), key_id, client


@pytest.fixture
def mac_key(kms):
    """A KMS HMAC key beside the envelope key (the API's ``kms:GenerateMac``)."""
    _, _, client = kms
    return client.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]["KeyId"]


def test_local_round_trip_and_key_file(tmp_path, local_box):
    token = local_box.encrypt("s3cr3t-päss")
    assert is_token(token) and token.startswith("enc:v1:") and "s3cr3t" not in token
    assert local_box.decrypt(token) == "s3cr3t-päss"
    assert local_box.encrypt("x") != local_box.encrypt("x")  # a fresh nonce each time
    mode = stat.S_IMODE(os.stat(local_box.path).st_mode)
    assert mode == 0o600 and local_box.path.stat().st_size == 32
    again = LocalSecretBox(local_box.path)  # the same file: the same key
    assert again.decrypt(token) == "s3cr3t-päss"
    assert isinstance(local_box, SecretBox)


def test_local_tamper_and_wrong_key_detected(tmp_path, local_box):
    token = local_box.encrypt("secret")
    for bad in (_flip(token), _flip(token, 1), _flip(token, 14), token[:-2], "enc:v1:", "enc:v1:!!!", "plain"):
        with pytest.raises(SecretError):
            local_box.decrypt(bad)
    other = LocalSecretBox(tmp_path / "other.key")
    with pytest.raises(SecretError):
        other.decrypt(token)


def test_local_key_file_must_hold_a_key(tmp_path):
    bad = tmp_path / "short.key"
    bad.write_bytes(b"short")
    with pytest.raises(SecretError):
        LocalSecretBox(bad)


def test_local_key_file_is_made_whole_and_once_by_processes_starting_together(tmp_path):
    """Made under another name and linked into place: racing makers agree on one key, a reader
    never sees a part of it, and no draft is left behind."""
    from concurrent.futures import ProcessPoolExecutor

    path = tmp_path / "race" / "secret.key"
    with ProcessPoolExecutor(4) as pool:
        keys = list(pool.map(_key_of, [str(path)] * 8))
    assert len(set(keys)) == 1 and len(keys[0]) == 32
    assert [p.name for p in path.parent.iterdir()] == ["secret.key"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def _key_of(path: str) -> bytes:
    return LocalSecretBox(path).derive_key("race")


def test_kms_envelope_caches_the_data_key(kms):
    counting, key_id, _ = kms
    box = KmsSecretBox(counting, key_id)
    tokens = [box.encrypt(f"secret-{i}") for i in range(20)]
    assert counting.calls == ["GenerateDataKey"]
    assert [box.decrypt(t) for t in tokens] == [f"secret-{i}" for i in range(20)]
    assert counting.calls == ["GenerateDataKey"]  # own data key: no Decrypt call at all

    # Another container: one Decrypt per distinct encrypted data key, then cached.
    counting.calls.clear()
    other = KmsSecretBox(counting, key_id)
    assert [other.decrypt(t) for t in tokens] == [f"secret-{i}" for i in range(20)]
    assert counting.calls == ["Decrypt"]


def test_kms_tamper_detected_and_boxes_not_mixed(kms, local_box):
    counting, key_id, _ = kms
    box = KmsSecretBox(counting, key_id)
    token = box.encrypt("secret")
    with pytest.raises(SecretError):
        box.decrypt(_flip(token))
    with pytest.raises(SecretError):
        box.decrypt(_flip(token, 5))  # inside the encrypted data key
    with pytest.raises(SecretError):
        local_box.decrypt(token)
    with pytest.raises(SecretError):
        box.decrypt(local_box.encrypt("secret"))


def test_make_secret_box(tmp_path, kms):
    _, key_id, client = kms
    assert isinstance(make_secret_box(Settings(kms_key_id=key_id), kms_client=client), KmsSecretBox)
    with_mac = make_secret_box(Settings(kms_key_id=key_id, kms_mac_key_id="mac-key"), kms_client=client)
    assert isinstance(with_mac, KmsSecretBox) and with_mac.mac_key_id == "mac-key" and with_mac.compares_stored
    read = Settings.from_env({"SCHEDULER_KMS_KEY_ID": key_id, "SCHEDULER_KMS_MAC_KEY_ID": "mac-key"})
    assert (read.kms_key_id, read.kms_mac_key_id) == (key_id, "mac-key")
    local = make_secret_box(Settings(local_key_file=str(tmp_path / "k")))
    assert isinstance(local, LocalSecretBox) and (tmp_path / "k").exists()


HTTP_TARGET = {
    "type": "http",
    "url": "https://example.com/hook",
    "method": "POST",
    "headers": {},
    "auth": {"type": "basic", "username": "u", "password": "pw-basic"},
}


@pytest.mark.parametrize(
    "auth,field",
    [
        ({"type": "basic", "username": "u", "password": "pw-basic"}, "password"),
        ({"type": "bearer", "token": "tok-bearer"}, "token"),
        ({"type": "header", "name": "X-Api-Key", "value": "key-header"}, "value"),
    ],
)
def test_http_auth_secrets(local_box, auth, field):
    target = {**HTTP_TARGET, "auth": auth}
    sealed = encrypt_target_secrets(target, local_box)
    assert is_token(sealed["auth"][field]) and target["auth"][field] == auth[field]  # input untouched
    assert mask_target_secrets(sealed)["auth"][field] == SECRET_MASK
    assert decrypt_target_secrets(sealed, local_box) == target
    # "***" keeps the stored one; a new value replaces it.
    kept = keep_masked_secrets(encrypt_target_secrets(mask_target_secrets(sealed), local_box), sealed)
    assert kept["auth"][field] == sealed["auth"][field]
    changed = keep_masked_secrets(encrypt_target_secrets({**target, "auth": {**auth, field: "new"}}, local_box), sealed)
    assert decrypt_target_secrets(changed, local_box)["auth"][field] == "new"


def test_amqp_url_password(local_box):
    target = {"type": "amqp", "url": "amqps://user:p%40ss:w0rd@broker.example.com:5671/vhost", "exchange": "x"}
    sealed = encrypt_target_secrets(target, local_box)
    assert "p%40ss" not in sealed["url"] and sealed["url"].startswith("amqps://user:enc%3Av1%3A")
    assert sealed["url"].endswith("@broker.example.com:5671/vhost")
    assert mask_target_secrets(sealed)["url"] == "amqps://user:***@broker.example.com:5671/vhost"
    assert decrypt_target_secrets(sealed, local_box) == target
    # A *** password keeps the stored password when the origin stays (the vhost may change) ...
    new = {**target, "url": "amqps://user:***@BROKER.example.com/vh2"}
    kept = keep_masked_secrets(encrypt_target_secrets(new, local_box), sealed)
    assert decrypt_target_secrets(kept, local_box)["url"] == "amqps://user:p%40ss:w0rd@BROKER.example.com/vh2"
    # ... but never follows the URL to another host, port or scheme.
    for moved in (
        "amqps://user:***@other.example.com/vhost",
        "amqps://user:***@broker.example.com:5672/vhost",
        "amqp://user:***@broker.example.com:5671/vhost",
    ):
        with pytest.raises(MaskedSecretError, match="another scheme, host or port") as err:
            keep_masked_secrets(encrypt_target_secrets({**target, "url": moved}, local_box), sealed)
        assert err.value.field == "target.url"
    # URLs without a password are left alone.
    for url in ("amqp://broker/", "amqps://user@broker/vh", None):
        t = {"type": "amqp", "url": url}
        assert encrypt_target_secrets(t, local_box) == t == mask_target_secrets(t)


def test_masked_secret_without_stored_one(local_box):
    with pytest.raises(MaskedSecretError) as err:
        keep_masked_secrets(
            encrypt_target_secrets({**HTTP_TARGET, "auth": {"type": "bearer", "token": "***"}}, local_box), None
        )
    assert err.value.field == "target.auth.token"
    stored = encrypt_target_secrets(HTTP_TARGET, local_box)  # basic: a password, no token
    with pytest.raises(MaskedSecretError):
        keep_masked_secrets({**HTTP_TARGET, "auth": {"type": "bearer", "token": "***"}}, stored)
    with pytest.raises(MaskedSecretError) as err:
        keep_masked_secrets({"type": "amqp", "url": "amqp://u:***@h/"}, stored)
    assert err.value.field == "target.url"


def test_a_sent_token_is_encrypted_like_any_value(local_box):
    """A client cannot smuggle a token (another job's secret) in: it is encrypted as plaintext."""
    stolen = local_box.encrypt("someone-elses")
    sealed = encrypt_target_secrets({**HTTP_TARGET, "auth": {"type": "bearer", "token": stolen}}, local_box)
    assert decrypt_target_secrets(sealed, local_box)["auth"]["token"] == stolen


def test_a_secret_sent_again_is_compared_where_the_box_opens_what_is_stored(kms, local_box):
    """Local mode's box opens what it sealed, so a plaintext secret equal to the stored one keeps
    the stored token (nothing changes); a deployment's API may only seal (the executor alone
    opens), so its box does not compare, and asks KMS nothing to open."""
    from scheduler.secrets import seal_target_secrets

    target = {"type": "http", "url": "https://hooks.example.com/a", "auth": {"type": "bearer", "token": "tok-Zz81"}}
    stored = seal_target_secrets(target, local_box, None)
    assert seal_target_secrets(target, local_box, stored) == stored
    counting, key_id, _ = kms
    box = KmsSecretBox(counting, key_id)
    stored = seal_target_secrets(target, box, None)
    counting.calls.clear()
    again = seal_target_secrets(target, box, stored)
    assert again["auth"]["token"] != stored["auth"]["token"] and "Decrypt" not in counting.calls


def test_a_deployment_s_api_with_an_hmac_key_compares_a_secret_sent_again_without_opening_it(kms, mac_key):
    """Each token carries its plaintext's HMAC (KMS ``GenerateMac``): the same secret sent again
    keeps its stored token (no new version), another value is sealed anew, and nothing is
    opened (the API has no ``kms:Decrypt``); the executor's box, without the HMAC key, opens it."""
    from scheduler.secrets import seal_target_secrets

    counting, key_id, client = kms
    api_box = KmsSecretBox(counting, key_id, mac_key_id=mac_key)
    target = {"type": "http", "url": "https://hooks.example.com/a", "auth": {"type": "bearer", "token": "tok-Zz81"}}
    stored = seal_target_secrets(target, api_box, None)
    assert seal_target_secrets(target, KmsSecretBox(counting, key_id, mac_key_id=mac_key), stored) == stored
    rotated = {**target, "auth": {"type": "bearer", "token": "tok-Zz82"}}
    assert seal_target_secrets(rotated, api_box, stored)["auth"]["token"] != stored["auth"]["token"]
    assert "Decrypt" not in counting.calls
    # Another container of the API: one GenerateMac per value it compares, then remembered.
    counting.calls.clear()
    other = KmsSecretBox(counting, key_id, mac_key_id=mac_key)
    for _ in range(3):
        assert seal_target_secrets(target, other, stored) == stored
    assert counting.calls == ["GenerateMac"]
    executor_box = KmsSecretBox(client, key_id)
    assert decrypt_target_secrets(stored, executor_box)["auth"]["token"] == "tok-Zz81"


def test_a_token_sealed_without_an_hmac_is_sealed_anew_and_a_changed_hmac_fails_to_open(kms, mac_key):
    counting, key_id, client = kms
    plain_box = KmsSecretBox(counting, key_id)
    api_box = KmsSecretBox(counting, key_id, mac_key_id=mac_key)
    old = plain_box.encrypt("s3cret")
    assert not api_box.holds(old, "s3cret")  # from before the HMAC key: not comparable
    token = api_box.encrypt("s3cret")
    assert api_box.holds(token, "s3cret") and not api_box.holds(token, "s3cret!")
    assert not plain_box.holds(token, "s3cret")  # a box without the key never says it does
    # The HMAC is authenticated with the token: one changed makes the token fail to open.
    raw = bytearray(_payload(token))
    raw[5] ^= 1
    with pytest.raises(SecretError):
        KmsSecretBox(client, key_id).decrypt(TOKEN_PREFIX + _b64encode(bytes(raw)))


def test_each_secret_has_a_salt_of_its_own_so_stored_hmacs_do_not_show_equal_secrets(kms, mac_key):
    """Two seals of one value (two jobs', or two owners') carry different salts and different
    HMACs: a reader of the database cannot tell that they are equal; each still compares with
    the value sent again, by the HMAC made under its own salt."""
    counting, key_id, client = kms
    api_box = KmsSecretBox(counting, key_id, mac_key_id=mac_key)
    first, second = api_box.encrypt("shared-s3cret"), api_box.encrypt("shared-s3cret")
    raw_first, raw_second = _payload(first), _payload(second)
    assert raw_first[:1] == raw_second[:1] == b"S"
    assert raw_first[1:17] != raw_second[1:17] and raw_first[17:49] != raw_second[17:49]  # salts, HMACs
    other = KmsSecretBox(counting, key_id, mac_key_id=mac_key)  # another container compares
    assert other.holds(first, "shared-s3cret") and other.holds(second, "shared-s3cret")
    assert not other.holds(first, "shared-s3cret!")
    assert KmsSecretBox(client, key_id).decrypt(second) == "shared-s3cret"


def test_a_token_of_scheme_m_sealed_before_the_salt_is_still_compared_and_opened(kms, mac_key):
    """Tokens sealed by the previous version (``M``: the HMAC of the value alone) keep their
    comparison, so sending them again unchanged still writes nothing, and the executor opens them."""
    from scheduler.secrets.boxes import _KMS_MAC, _seal

    counting, key_id, client = kms
    api_box = KmsSecretBox(counting, key_id, mac_key_id=mac_key)
    key, encrypted = api_box._current_key()
    header = _KMS_MAC + api_box._mac("old-s3cret", b"") + len(encrypted).to_bytes(2, "big") + encrypted
    old = _seal(key, header, "old-s3cret")
    assert api_box.holds(old, "old-s3cret") and not api_box.holds(old, "new-s3cret")
    assert KmsSecretBox(client, key_id).decrypt(old) == "old-s3cret"


def test_a_secret_is_sealed_without_its_hmac_when_kms_makes_none(kms, caplog):
    """A role without ``kms:GenerateMac`` (or that call's outage) loses the comparison only: the
    secret is sealed, without an HMAC, and the box says so once per seal."""
    counting, key_id, client = kms
    box = KmsSecretBox(counting, key_id, mac_key_id="alias/no-such-key")
    token = box.encrypt("s3cret")
    assert _payload(token)[:1] == b"K" and KmsSecretBox(client, key_id).decrypt(token) == "s3cret"
    assert "KMS made no HMAC of a secret (NotFoundException)" in caplog.text
