"""SigV4 verification for local mode: who signed this request?

In AWS, API Gateway (IAM auth) checks the caller's signature and hands the principal to the api
Lambda. ``scheduler local --auth sigv4`` does the same on a laptop: the CLI signs its requests
exactly as it does against AWS (botocore's ``SigV4Auth``, service ``execute-api``), and the
local server verifies them here against a small credentials file, so that several local users
(access keys) get several principals and see only their own jobs.

The canonical request is rebuilt the way botocore builds it:

- the method, upper case;
- the path as sent on the wire (percent-encoded), dot segments and repeated slashes removed,
  then URI-encoded once more (``quote(path, safe="/~")``: the double encoding of every AWS
  service but S3);
- the query string as sent, its ``key=value`` pairs sorted (botocore signs the query of its
  URL as is; a query that another SigV4 client normalized, ``%20`` rather than ``+`` and so on,
  is accepted too);
- the signed headers (``SignedHeaders`` of the ``Authorization`` header), names lower case,
  values trimmed and inner whitespace collapsed, repeated headers joined with ``,``;
- the hex SHA-256 of the body (or the ``X-Amz-Content-SHA256`` header, which must then be the
  hash of the body).

The signature is recomputed with the stored secret and compared in constant time
(``hmac.compare_digest``). ``X-Amz-Date`` (or ``Date``) must be within ``max_skew`` seconds of
now and on the day of the credential scope; ``host`` and the date header must be signed; an
``X-Amz-Security-Token`` must be signed when present. A request with more than one
``Authorization`` header is refused. The local server (``verify_wsgi`` from ``scheduler local``)
also refuses temporary credentials, which only STS could check, and a credential scope naming
another region than its own (``scheduler local --region``, default us-east-1).
Presigned URLs (the signature in the query string) are not supported.

Credentials file (``load_credentials``), JSON::

    {
      "AKIDEXAMPLE": {"secret_access_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                      "principal": "arn:aws:iam::000000000000:user/alice"},
      "AKIDBOB":     {"secret_access_key": "...", "principal": "arn:aws:iam::000000000000:user/bob"}
    }

or INI, one section per key: either named by the access key id::

    [AKIDEXAMPLE]
    secret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY
    principal = arn:aws:iam::000000000000:user/alice

or in the layout of ``~/.aws/credentials`` (any section name, ``aws_access_key_id`` and
``aws_secret_access_key``), so that an AWS credentials file can be used as is::

    [alice]
    aws_access_key_id = AKIDEXAMPLE
    aws_secret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY
    principal = arn:aws:iam::000000000000:user/alice

Without ``principal``, the principal is ``arn:aws:iam::000000000000:user/<section name>`` (for
JSON, ``.../user/<access key id>``).
"""

from __future__ import annotations

import configparser
import datetime as dt
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
DEFAULT_SERVICE = "execute-api"
DEFAULT_MAX_SKEW = 300
DEFAULT_ACCOUNT = "000000000000"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_AMZ_DATE_RE = re.compile(r"^\d{8}T\d{6}Z\Z")
_HEX_SIGNATURE = re.compile(r"^[0-9a-f]{64}\Z")

Credentials = dict[str, tuple[str, str]]


class SignatureError(Exception):
    """The request is not signed, or not signed correctly, by a known access key."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class CredentialsFileError(ValueError):
    """The credentials file cannot be read or does not have the documented format."""


# -- credentials -------------------------------------------------------------------------------


def default_principal(name: str) -> str:
    """The principal of a key that names none: a local IAM user called ``name``."""
    return f"arn:aws:iam::{DEFAULT_ACCOUNT}:user/{name}"


def _entry(akid: Any, secret: Any, principal: Any, where: str) -> tuple[str, str, str | None]:
    if not isinstance(akid, str) or not akid.strip():
        raise CredentialsFileError(f"{where}: the access key id is missing")
    if not isinstance(secret, str) or not secret:
        raise CredentialsFileError(f"{where}: secret_access_key is missing")
    if principal is not None and (not isinstance(principal, str) or not principal.strip()):
        raise CredentialsFileError(f"{where}: principal must be a non-empty string")
    return akid.strip(), secret, principal.strip() if principal else None


def parse_credentials(text: str) -> Credentials:
    """The credentials of a credentials file's text (JSON or INI, see the module docstring)."""
    out: Credentials = {}

    def add(akid: str, secret: str, principal: str, where: str) -> None:
        if akid in out:
            raise CredentialsFileError(f"{where}: access key id {akid} appears twice")
        out[akid] = (secret, principal)

    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CredentialsFileError(f"not valid JSON: {exc}") from None
        for akid, value in data.items():
            if not isinstance(value, Mapping):
                raise CredentialsFileError(f"{akid}: must be an object with secret_access_key and principal")
            secret = value.get("secret_access_key", value.get("aws_secret_access_key"))
            akid, secret, principal = _entry(akid, secret, value.get("principal"), str(akid))
            add(akid, secret, principal or default_principal(akid), akid)
        return out

    parser = configparser.ConfigParser(interpolation=None, default_section="\x00none")
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise CredentialsFileError(f"neither JSON nor INI: {exc}") from None
    for section in parser.sections():
        values = parser[section]
        akid = values.get("aws_access_key_id") or (section if "secret_access_key" in values else None)
        if akid is None:
            raise CredentialsFileError(f"[{section}]: needs aws_access_key_id (or name the section after the key)")
        secret = values.get("secret_access_key") or values.get("aws_secret_access_key")
        akid, secret, principal = _entry(akid, secret, values.get("principal"), f"[{section}]")
        add(akid, secret, principal or default_principal(section), f"[{section}]")
    return out


def load_credentials(path: str | Path) -> Credentials:
    """``{access_key_id: (secret_access_key, principal)}`` of a JSON or INI credentials file.

    Raises ``CredentialsFileError`` (a ``ValueError``) when the file cannot be read or parsed,
    or holds no key at all.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CredentialsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    credentials = parse_credentials(text)
    if not credentials:
        raise CredentialsFileError(f"{path}: no access keys")
    return credentials


# -- canonical request -------------------------------------------------------------------------


def remove_dot_segments(path: str) -> str:
    """RFC 3986 dot-segment removal, repeated slashes collapsed (botocore's ``normalize_url_path``)."""
    if not path:
        return "/"
    out: list[str] = []
    for segment in path.split("/"):
        if segment and segment != ".":
            if segment == "..":
                if out:
                    out.pop()
            else:
                out.append(segment)
    first = "/" if path[0] == "/" else ""
    last = "/" if path[-1] == "/" and out else ""
    return first + "/".join(out) + last


def canonical_uri(path: str) -> str:
    """The canonical URI of a path as sent on the wire (percent-encoded), as botocore signs it."""
    return quote(remove_dot_segments(path), safe="/~")


def canonical_query_botocore(query_string: str) -> str:
    """The query as botocore signs it: the pairs of the URL's query as they are, sorted."""
    if not query_string:
        return ""
    pairs = []
    for pair in query_string.split("&"):
        key, _, value = pair.partition("=")
        pairs.append((key, value))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def canonical_query_normalized(query_string: str) -> str:
    """The query as the SigV4 specification defines it: each key and value decoded, then encoded
    with only the unreserved characters left as they are; sorted by key, then value."""
    if not query_string:
        return ""
    pairs = []
    for pair in query_string.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        pairs.append((quote(unquote(key), safe="-_.~"), quote(unquote(value), safe="-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _header_lists(headers: Mapping[str, Any] | Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, list[str]] = {}
    for name, value in items:
        values = value if isinstance(value, (list, tuple)) else [value]
        out.setdefault(str(name).strip().lower(), []).extend(str(v) for v in values)
    return out


def canonical_headers(headers: dict[str, list[str]], signed: list[str]) -> str:
    """``name:value`` lines of the signed headers (whitespace trimmed, repeats joined with ``,``)."""
    lines = []
    for name in signed:
        value = ",".join(" ".join(v.split()) for v in headers[name])
        lines.append(f"{name}:{value}")
    return "\n".join(lines)


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The SigV4 signing key of a secret, a day (``YYYYMMDD``), a region and a service."""
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def string_to_sign(timestamp: str, scope: str, canonical_request: str) -> str:
    """The string to sign of a canonical request."""
    digest = hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()
    return "\n".join([ALGORITHM, timestamp, scope, digest])


# -- verification ------------------------------------------------------------------------------


def parse_authorization(value: str) -> dict[str, str]:
    """The parts of a SigV4 ``Authorization`` header: ``Credential``, ``SignedHeaders``, ``Signature``."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError(f"unsupported authorization scheme (expected {ALGORITHM})")
    if ALGORITHM in rest:  # two Authorization headers, joined with "," by the server
        raise SignatureError("the request has more than one Authorization header")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, val = item.strip().partition("=")
        if not sep:
            continue
        if key.strip() in parts:
            raise SignatureError(f"the authorization header names {key.strip()} twice")
        parts[key.strip()] = val.strip()
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if not parts.get(k)]
    if missing:
        raise SignatureError(f"authorization header is missing {', '.join(missing)}")
    return parts


def _request_time(headers: dict[str, list[str]]) -> tuple[str, dt.datetime]:
    """The signing timestamp (``YYYYMMDDTHHMMSSZ``) of ``X-Amz-Date``, else of ``Date``."""
    if "x-amz-date" in headers:
        stamp = headers["x-amz-date"][-1].strip()
        if not _AMZ_DATE_RE.match(stamp):
            raise SignatureError("X-Amz-Date is not a YYYYMMDDTHHMMSSZ timestamp")
        try:
            when = dt.datetime.strptime(stamp, _AMZ_DATE).replace(tzinfo=dt.UTC)
        except ValueError:
            raise SignatureError("X-Amz-Date is not a valid timestamp") from None
        return stamp, when
    if "date" in headers:
        try:
            when = parsedate_to_datetime(headers["date"][-1])
        except (TypeError, ValueError):
            raise SignatureError("Date is not a valid HTTP date") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        when = when.astimezone(dt.UTC)
        return when.strftime(_AMZ_DATE), when
    raise SignatureError("the request has no X-Amz-Date header")


def _now(now: dt.datetime | float | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC)
    if isinstance(now, (int, float)):
        return dt.datetime.fromtimestamp(now, dt.UTC)
    return now if now.tzinfo else now.replace(tzinfo=dt.UTC)


def verify_request(
    method: str,
    path: str,
    query_string: str,
    headers: Mapping[str, Any] | Iterable[tuple[str, str]],
    body: bytes | str | None,
    credentials: Mapping[str, tuple[str, str]],
    *,
    region: str | None = None,
    service: str = DEFAULT_SERVICE,
    now: dt.datetime | float | None = None,
    max_skew: float = DEFAULT_MAX_SKEW,
    security_tokens: bool = True,
) -> str:
    """The principal whose access key signed this request, or ``SignatureError``.

    ``path`` and ``query_string`` are those of the request line, as sent (percent-encoded, no
    ``?``); ``headers`` a mapping or ``(name, value)`` pairs (names in any case; repeated
    headers as pairs or lists); ``body`` the raw body. ``credentials`` is what
    ``load_credentials`` returns. ``region``: the only region accepted in the credential scope
    (None: any). ``now``: a datetime or epoch seconds (default: the clock). ``security_tokens``:
    whether a request with an ``X-Amz-Security-Token`` (signed) may pass; the local server,
    which cannot ask STS whether the token is valid, refuses them.
    """
    header_map = _header_lists(headers)
    parts = _authorization(header_map, security_tokens)
    scope_parts = parts["Credential"].split("/")
    akid, scope_date, scope_region, scope_service = _credential_scope(scope_parts, service, region)
    entry = credentials.get(akid)
    if entry is None:
        raise SignatureError(f"unknown access key id {akid!r}")
    secret, principal = entry
    timestamp = _checked_time(header_map, scope_date, now, max_skew)
    signed = _checked_signed_headers(parts["SignedHeaders"], header_map)
    signature = parts["Signature"].lower()
    if not _HEX_SIGNATURE.match(signature):
        raise SignatureError("the signature is not 64 hex digits")
    raw_body = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    body_hash = hashlib.sha256(raw_body).hexdigest()
    if "x-amz-content-sha256" in header_map:
        declared = header_map["x-amz-content-sha256"][-1].strip()
        if declared != body_hash:
            raise SignatureError("x-amz-content-sha256 is not the hash of the body")
    key = signing_key(secret, scope_date, scope_region, scope_service)
    scope = "/".join(scope_parts[1:])
    head = canonical_headers(header_map, signed)
    queries = [canonical_query_botocore(query_string or "")]
    normalized = canonical_query_normalized(query_string or "")
    if normalized != queries[0]:
        queries.append(normalized)
    matched = False
    for query in queries:
        canonical = "\n".join(
            [method.upper(), canonical_uri(path or "/"), query, head + "\n", ";".join(signed), body_hash]
        )
        expected = hmac.new(
            key, string_to_sign(timestamp, scope, canonical).encode("utf-8"), hashlib.sha256
        ).hexdigest()
        matched |= hmac.compare_digest(expected, signature)
    if not matched:
        raise SignatureError("the signature does not match (wrong secret, or the request was changed)")
    return principal


def _authorization(header_map: dict[str, list[str]], security_tokens: bool) -> dict[str, str]:
    """The one ``Authorization`` header's parts (``SignatureError`` for none, several, or a
    security token where none may be checked)."""
    auth_values = header_map.get("authorization")
    if not auth_values:
        raise SignatureError("the request is not signed (no Authorization header)")
    if len(auth_values) > 1:
        raise SignatureError("the request has more than one Authorization header")
    if "x-amz-security-token" in header_map and not security_tokens:
        # Temporary credentials are checked by STS, which this verifier cannot ask.
        raise SignatureError(
            "temporary credentials (X-Amz-Security-Token) cannot be verified here: "
            "sign with an access key of the credentials file"
        )
    return parse_authorization(auth_values[-1])


def _credential_scope(scope_parts: list[str], service: str, region: str | None) -> tuple[str, str, str, str]:
    """The access key, date, region and service of the credential scope, checked."""
    if len(scope_parts) != 5 or scope_parts[4] != "aws4_request":
        raise SignatureError("malformed credential scope (expected KEY/DATE/REGION/SERVICE/aws4_request)")
    akid, scope_date, scope_region, scope_service, _ = scope_parts
    if scope_service != service:
        raise SignatureError(f"credential scope names service {scope_service!r}, expected {service!r}")
    if region is not None and scope_region != region:
        raise SignatureError(f"credential scope names region {scope_region!r}, expected {region!r}")
    return akid, scope_date, scope_region, scope_service


def _checked_time(
    header_map: dict[str, list[str]], scope_date: str, now: dt.datetime | float | None, max_skew: float
) -> str:
    """The request's signing time, on the scope's date and within ``max_skew`` of now."""
    timestamp, when = _request_time(header_map)
    if timestamp[:8] != scope_date:
        raise SignatureError("the credential scope date is not the date of the request")
    skew = abs((_now(now) - when).total_seconds())
    if skew > max_skew:
        raise SignatureError(
            f"the request time is {int(skew)} s away from the server's clock (at most {int(max_skew)} s allowed)"
        )
    return timestamp


def _checked_signed_headers(value: str, header_map: dict[str, list[str]]) -> list[str]:
    """``SignedHeaders``: lower case, sorted, unique, naming the host, the date and any security
    token, and each present in the request."""
    signed = value.split(";")
    if any(not name or name != name.lower() for name in signed) or signed != sorted(set(signed)):
        raise SignatureError("SignedHeaders must be lower case, sorted and unique")
    if "host" not in signed:
        raise SignatureError("the host header must be signed")
    if "x-amz-date" in header_map and "x-amz-date" not in signed:
        raise SignatureError("the x-amz-date header must be signed")
    if "x-amz-date" not in header_map and "date" not in signed:
        raise SignatureError("the date header must be signed")
    if "x-amz-security-token" in header_map and "x-amz-security-token" not in signed:
        raise SignatureError("the x-amz-security-token header must be signed")
    absent = [name for name in signed if name not in header_map]
    if absent:
        raise SignatureError(f"signed header(s) missing from the request: {', '.join(absent)}")
    return signed


# -- WSGI --------------------------------------------------------------------------------------

# What a URL path may hold without encoding (requests' ``requote_uri``, less ``%``, ``?``, ``#``).
_PATH_SAFE = "/!$&'()*+,:;=@[]~"


def wsgi_headers(environ: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The request headers of a WSGI environ (``HTTP_*``, ``CONTENT_TYPE``, ``CONTENT_LENGTH``)."""
    out = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            out.append((key[5:].replace("_", "-").lower(), str(value)))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value not in (None, ""):
            out.append((key.replace("_", "-").lower(), str(value)))
    return out


def wsgi_raw_path(environ: Mapping[str, Any]) -> str:
    """The path as sent: from ``REQUEST_URI``/``RAW_URI`` when the server gives it (waitress,
    gunicorn), else ``PATH_INFO`` encoded again."""
    raw = environ.get("REQUEST_URI") or environ.get("RAW_URI")
    if raw:
        raw = str(raw)
        if "://" in raw.split("?", 1)[0]:  # absolute form: http://host/path
            raw = "/" + raw.split("://", 1)[1].partition("/")[2]
        return raw.split("?", 1)[0].split("#", 1)[0] or "/"
    path = str(environ.get("SCRIPT_NAME") or "") + str(environ.get("PATH_INFO") or "")
    return quote(path.encode("latin-1", "replace"), safe=_PATH_SAFE) or "/"


def verify_wsgi(
    environ: Mapping[str, Any], body: bytes, credentials: Mapping[str, tuple[str, str]], **kwargs: Any
) -> str:
    """``verify_request`` of a WSGI request whose body was already read (``body``)."""
    return verify_request(
        str(environ.get("REQUEST_METHOD") or "GET"),
        wsgi_raw_path(environ),
        str(environ.get("QUERY_STRING") or ""),
        wsgi_headers(environ),
        body,
        credentials,
        **kwargs,
    )


__all__ = [
    "CredentialsFileError",
    "SignatureError",
    "canonical_uri",
    "default_principal",
    "load_credentials",
    "parse_authorization",
    "parse_credentials",
    "verify_request",
    "verify_wsgi",
    "wsgi_headers",
    "wsgi_raw_path",
]
