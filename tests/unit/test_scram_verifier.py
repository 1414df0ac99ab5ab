"""The SCRAM-SHA-256 verifier the migrate function sends instead of the application login's
password (``scheduler.store.migrations.scram_verifier``).

The known vector is RFC 7677's example exchange (user "user", password "pencil", salt
``W22ZaJ0SNY7soEsUEjb6gQ==``, 4096 iterations): the verifier holds no password, so the test does
what a server does with it. It checks the RFC's client proof against StoredKey and computes the
RFC's server signature from ServerKey; both come out right only if the keys are the RFC's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import pytest

from scheduler.core.errors import MigrationError
from scheduler.store.migrations import SCRAM_ITERATIONS, scram_verifier

RFC_SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
RFC_AUTH_MESSAGE = (
    "n=user,r=rOprNGfwEbeRWgbNEkqO,"
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
)
RFC_CLIENT_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
VERIFIER = re.compile(r"SCRAM-SHA-256\$(\d+):([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)")


def parts(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    found = VERIFIER.fullmatch(verifier)
    assert found, verifier
    iterations, *encoded = found.groups()
    salt, stored_key, server_key = (base64.b64decode(part, validate=True) for part in encoded)
    return int(iterations), salt, stored_key, server_key


def test_the_verifier_of_rfc_7677s_example_accepts_its_proof_and_signs_as_its_server():
    iterations, salt, stored_key, server_key = parts(scram_verifier("pencil", salt=base64.b64decode(RFC_SALT)))
    assert (iterations, base64.b64encode(salt).decode()) == (4096, RFC_SALT)
    # The server's check of the client: ClientKey = proof XOR HMAC(StoredKey, AuthMessage), and
    # SHA-256(ClientKey) must be StoredKey.
    signature = hmac.digest(stored_key, RFC_AUTH_MESSAGE.encode(), "sha256")
    client_key = bytes(a ^ b for a, b in zip(base64.b64decode(RFC_CLIENT_PROOF), signature, strict=True))
    assert hashlib.sha256(client_key).digest() == stored_key
    server_signature = hmac.digest(server_key, RFC_AUTH_MESSAGE.encode(), "sha256")
    assert base64.b64encode(server_signature).decode() == RFC_SERVER_SIGNATURE


def test_the_verifier_has_postgres_form_and_a_new_random_salt_each_time():
    first, second = scram_verifier("secret"), scram_verifier("secret")
    assert first != second
    for verifier in (first, second):
        iterations, salt, stored_key, server_key = parts(verifier)
        assert iterations == SCRAM_ITERATIONS == 4096
        assert len(salt) == 16 and len(stored_key) == len(server_key) == 32
        assert "secret" not in verifier
    _, salt, _, _ = parts(first)
    assert scram_verifier("secret", salt=salt) == first
    assert scram_verifier("other", salt=salt) != first


def test_a_password_that_is_not_ascii_is_refused():
    # The server and libpq SASLprep a non-ASCII password before hashing it; this code does not.
    with pytest.raises(MigrationError, match="ASCII"):
        scram_verifier("pässword")
