"""A target's own headers of credential-like names (``Authorization``, ``X-Api-Key``, a cookie, a
token...) are secrets, as a manual run's already were: sealed when stored, ``"***"`` in every
answer and change log, kept when ``"***"`` is sent back, opened for the delivery only, scrubbed
from the answer's excerpt. Through the API's handler on real Postgres, and a delivery to a real
loopback server."""

from __future__ import annotations

from scheduler.secrets import decrypt_target_secrets, encrypt_target_secrets, is_token
from scheduler.targets.router import deliver
from tests.integration.test_api import ALICE, api, box, job_body  # noqa: F401 - fixtures
from tests.integration.test_http_target import LOCAL, make_delivery, server  # noqa: F401 - fixtures

HEADERS = {"Authorization": "Bearer hdr-secret-Qx7", "X-Api-Key": "key-secret-Zz9", "X-Team": "billing"}


def target(url: str = "https://example.com/hook", **extra):
    return {"type": "http", "url": url, "headers": dict(HEADERS), **extra}


def test_credential_headers_are_sealed_masked_and_kept(api, pool):
    created = api("POST", "/v1/jobs", job_body("hdr", target=target()))
    assert created.status == 201, created.body
    job = created.body
    assert job["target"]["headers"] == {"Authorization": "***", "X-Api-Key": "***", "X-Team": "billing"}
    with pool.connection() as conn:
        stored = conn.execute("SELECT target FROM job_specs WHERE id = %s", (job["id"],)).fetchone()["target"]
    assert is_token(stored["headers"]["Authorization"]) and is_token(stored["headers"]["X-Api-Key"])
    assert stored["headers"]["X-Team"] == "billing"
    # "***" sent back keeps each; a new value replaces it; the log says only that it changed.
    kept = {"Authorization": "***", "X-Api-Key": "***", "X-Team": "ops"}
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"target": {"headers": kept}}).status == 200
    with pool.connection() as conn:
        again = conn.execute("SELECT target FROM job_specs WHERE id = %s", (job["id"],)).fetchone()["target"]
    assert again["headers"]["Authorization"] == stored["headers"]["Authorization"]
    changed = {**kept, "X-Api-Key": "key-secret-new"}
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"target": {"headers": changed}}).status == 200
    log = api("GET", f"/v1/jobs/{job['id']}/changes").body["changes"]
    assert log[0]["diff"] == {"target.headers.X-Api-Key": {"from": "***", "to": "***", "secret": True}}
    assert log[1]["diff"] == {"target.headers.X-Team": {"from": "billing", "to": "ops"}}
    # A "***" with nothing stored at that name is refused, not sent as three stars.
    missing = api("PATCH", f"/v1/jobs/{job['id']}", {"target": {"headers": {**changed, "X-Token": "***"}}})
    assert missing.status == 400 and missing.fields == ["target.headers.X-Token"], missing.body
    for secret in ("hdr-secret-Qx7", "key-secret-Zz9", "key-secret-new", "enc:v1:"):
        assert secret not in api.all_text()


def test_an_alert_targets_credential_headers_are_secrets_too(api):
    rule = {"on": "failure", "target": target()}
    created = api("POST", "/v1/jobs", job_body("hdr-alert", alerts=[rule]))
    assert created.status == 201, created.body
    assert created.body["alerts"][0]["target"]["headers"]["X-Api-Key"] == "***"
    assert "key-secret-Zz9" not in api.all_text()


def test_the_delivery_sends_them_opened_and_scrubs_them_from_the_excerpt(server, box):
    sealed = encrypt_target_secrets(target(server.url("/echo")), box)
    assert is_token(sealed["headers"]["X-Api-Key"])
    result = deliver(decrypt_target_secrets(sealed, box), make_delivery(), LOCAL)
    assert result.succeeded, result.error
    [hit] = server.hits("/echo")
    assert hit["headers"]["X-Api-Key"] == "key-secret-Zz9"
    assert hit["headers"]["Authorization"] == "Bearer hdr-secret-Qx7"
    # The target echoed them: the execution's excerpt keeps neither.
    assert "key-secret-Zz9" not in result.response_excerpt and "hdr-secret-Qx7" not in result.response_excerpt
    assert "billing" in result.response_excerpt


def test_an_alert_whose_secrets_another_key_sealed_fails_for_good_not_over_and_over(db_url, tmp_path):
    """Local mode started with another key file: an alert's target with a secret it cannot open
    is an alert that failed (not retried), where it had raised and been sent again at every lease."""
    from datetime import UTC, datetime

    from scheduler.core.domain import Delivery
    from scheduler.secrets import LocalSecretBox
    from scheduler.settings import Settings
    from scheduler.wiring import Dependencies

    sealed = encrypt_target_secrets(target(), LocalSecretBox(tmp_path / "first.key"))
    deps = Dependencies(Settings(database_url=db_url, local_key_file=str(tmp_path / "second.key")))
    try:
        alerts = deps.alerts()
        outcome = alerts.send(sealed, Delivery("j", "e", datetime(2026, 12, 6, tzinfo=UTC), 1))
        assert (outcome.status, outcome.retryable) == ("failed", False)
        assert outcome.error == "the alert target's secrets cannot be decrypted"
    finally:
        deps.pool.close()
