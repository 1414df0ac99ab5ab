"""Secrets at rest: the ``SecretBox`` port and its tokens (``boxes``: the local key file's box),
KMS envelope encryption (``kms``), and the secret places of a job's target (``places``)."""

from scheduler.core.errors import SecretError
from scheduler.secrets.boxes import DEFAULT_LOCAL_KEY_FILE, TOKEN_PREFIX, LocalSecretBox, SecretBox, is_token
from scheduler.secrets.kms import KmsSecretBox, make_secret_box
from scheduler.secrets.places import (
    decrypt_target_secrets,
    encrypt_target_secrets,
    keep_masked_secrets,
    map_secrets,
    mask_target_secrets,
    seal_target_secrets,
    stored_rule,
    url_with_password_masked,
)

__all__ = [
    "DEFAULT_LOCAL_KEY_FILE",
    "TOKEN_PREFIX",
    "KmsSecretBox",
    "LocalSecretBox",
    "SecretBox",
    "SecretError",
    "decrypt_target_secrets",
    "encrypt_target_secrets",
    "is_token",
    "keep_masked_secrets",
    "make_secret_box",
    "map_secrets",
    "mask_target_secrets",
    "seal_target_secrets",
    "stored_rule",
    "url_with_password_masked",
]
