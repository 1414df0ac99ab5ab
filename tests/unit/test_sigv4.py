"""SigV4 verification of local mode: requests signed by botocore's ``SigV4Auth`` (the code the CLI
signs with) verify, and every change to them, or a wrong key, secret or clock, is refused."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from scheduler.client import SchedulerClient
from scheduler.transport.sigv4 import (
    CredentialsFileError,
    SignatureError,
    canonical_query_botocore,
    canonical_query_normalized,
    load_credentials,
    parse_credentials,
    verify_request,
    verify_wsgi,
)

ALICE = "arn:aws:iam::000000000000:user/alice"
BOB = "arn:aws:iam::111111111111:role/bob"
CREDS = {
    "AKIDALICE": ("alice-secret/with+chars", ALICE),
    "AKIDBOB": ("bob-secret", BOB),
}
REGION = "eu-west-1"


def sign(
    method: str,
    url: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    key: str = "AKIDALICE",
    secret: str | None = None,
    token: str | None = None,
    region: str = REGION,
    service: str = "execute-api",
) -> dict:
    """Sign with botocore and return what the server would see: method, raw path, query, headers, body."""
    secret = secret if secret is not None else CREDS.get(key, ("x", ""))[0]
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    SigV4Auth(Credentials(key, secret, token), service, region).add_auth(request)
    parts = urlsplit(url)
    wire = dict(request.headers.items())
    wire.setdefault("Host", parts.netloc)  # what the HTTP client adds
    return {"method": method, "path": parts.path, "query_string": parts.query, "headers": wire, "body": body}


def verify(req: dict, credentials=CREDS, **kwargs) -> str:
    return verify_request(
        req["method"], req["path"], req["query_string"], req["headers"], req["body"], credentials, **kwargs
    )


URL = "http://127.0.0.1:8080/v1/jobs"


# -- accepted ----------------------------------------------------------------------------------


def test_signed_get_with_query_gives_the_principal():
    req = sign("GET", URL + "?state=active&limit=10&name_prefix=nightly-")
    assert verify(req, region=REGION) == ALICE


def test_signed_post_with_body_and_content_type():
    body = json.dumps({"name": "n", "schedule": "0 3 * * *"}).encode()
    req = sign("POST", URL, body, {"Content-Type": "application/json", "If-Match": '"3"'})
    assert verify(req) == ALICE


def test_two_access_keys_give_two_principals():
    assert verify(sign("GET", URL, key="AKIDALICE")) == ALICE
    assert verify(sign("GET", URL, key="AKIDBOB")) == BOB


def test_unsigned_headers_added_later_do_not_matter():
    req = sign("GET", URL)
    req["headers"].update({"User-Agent": "curl/8", "Accept-Encoding": "gzip", "Connection": "close"})
    assert verify(req) == ALICE


def test_header_names_in_any_case_and_as_pairs():
    req = sign("PATCH", URL + "/1", b"{}", {"Content-Type": "application/json"})
    pairs = [(k.upper(), v) for k, v in req["headers"].items()]
    assert verify_request("PATCH", req["path"], req["query_string"], pairs, b"{}", CREDS) == ALICE


def test_security_token_signed_is_accepted():
    req = sign("GET", URL, token="session-token-value")
    assert "X-Amz-Security-Token" in req["headers"]
    assert "x-amz-security-token" in req["headers"]["Authorization"]
    assert verify(req) == ALICE


def test_security_token_is_refused_where_it_cannot_be_checked():
    # Local mode cannot ask STS about temporary credentials: refused, not taken on trust.
    refused(sign("GET", URL, token="session-token-value"), "X-Amz-Security-Token", security_tokens=False)


def test_two_authorization_headers_are_refused():
    req = sign("GET", URL)
    pairs = list(req["headers"].items()) + [("Authorization", req["headers"]["Authorization"])]
    with pytest.raises(SignatureError, match="more than one Authorization"):
        verify_request("GET", req["path"], req["query_string"], pairs, b"", CREDS)
    joined = {
        **req["headers"],
        "Authorization": req["headers"]["Authorization"] + ", " + req["headers"]["Authorization"],
    }  # as a server joins repeated headers
    refused({**req, "headers": joined}, "more than one Authorization")


def test_percent_encoded_path_and_unsorted_query():
    req = sign("GET", "http://localhost:9000/prod/v1/jobs/a%20b%C3%A9/executions?status=failed&limit=5&cursor=a%2Bb")
    assert verify(req) == ALICE


def test_default_port_host_and_https():
    req = sign("DELETE", "https://abc.execute-api.eu-west-1.amazonaws.com/prod/v1/jobs/x")
    assert req["headers"]["Host"] == "abc.execute-api.eu-west-1.amazonaws.com"
    req["headers"]["Host"] = "abc.execute-api.eu-west-1.amazonaws.com"
    assert verify(req) == ALICE


def test_date_header_instead_of_x_amz_date():
    req = sign("GET", URL, headers={"Date": "Mon, 01 Jan 2024 00:00:00 GMT"})
    assert "X-Amz-Date" not in req["headers"]
    assert verify(req) == ALICE


def test_within_skew_is_accepted():
    req = sign("GET", URL)
    assert verify(req, now=time.time() + 200) == ALICE
    assert verify(req, now=time.time() - 200) == ALICE


def test_query_canonical_forms():
    assert canonical_query_botocore("b=2&a=1&a=0") == "a=0&a=1&b=2"
    assert canonical_query_normalized("q=a+b&p=x%2fy&r=~") == "p=x%2Fy&q=a%2Bb&r=~"
    assert canonical_query_normalized("q=a%20b") == "q=a%20b"


def test_spec_normalized_query_is_accepted():
    """A client that signs the specification's canonical query but sends it unencoded
    (``~`` as ``%7E``) is accepted too."""
    req = sign("GET", URL + "?name_prefix=a~b")
    req["query_string"] = "name_prefix=a%7Eb"
    assert verify(req) == ALICE


# -- refused -----------------------------------------------------------------------------------


def refused(req: dict, match: str, credentials=CREDS, **kwargs) -> None:
    with pytest.raises(SignatureError, match=match):
        verify(req, credentials, **kwargs)


def test_tampered_body_is_refused():
    req = sign("POST", URL, b'{"name": "a"}', {"Content-Type": "application/json"})
    req["body"] = b'{"name": "b"}'
    refused(req, "does not match")


def test_tampered_path_is_refused():
    req = sign("DELETE", URL + "/11111111-1111-1111-1111-111111111111")
    req["path"] = "/v1/jobs/22222222-2222-2222-2222-222222222222"
    refused(req, "does not match")


def test_tampered_method_is_refused():
    req = sign("GET", URL + "/x")
    req["method"] = "DELETE"
    refused(req, "does not match")


@pytest.mark.parametrize("query", ["state=paused", "state=active&limit=10", ""])
def test_tampered_query_is_refused(query):
    req = sign("GET", URL + "?state=active")
    req["query_string"] = query
    refused(req, "does not match")


def test_tampered_signed_header_is_refused():
    req = sign("PUT", URL + "/x", b"{}", {"Content-Type": "application/json", "If-Match": '"3"'})
    req["headers"]["If-Match"] = '"4"'
    refused(req, "does not match")


def test_missing_signed_header_is_refused():
    req = sign("PUT", URL + "/x", b"{}", {"If-Match": '"3"'})
    del req["headers"]["If-Match"]
    refused(req, "missing from the request: if-match")


def test_other_host_is_refused():
    req = sign("GET", URL)
    req["headers"]["Host"] = "127.0.0.1:9999"
    refused(req, "does not match")


def test_unknown_access_key_is_refused():
    refused(sign("GET", URL, key="AKIDMALLORY", secret="whatever"), "unknown access key id 'AKIDMALLORY'")


def test_wrong_secret_is_refused():
    refused(sign("GET", URL, key="AKIDALICE", secret="not-alice-secret"), "does not match")


@pytest.mark.parametrize("offset", [301, -301, 3600])
def test_request_outside_the_skew_is_refused(offset):
    refused(sign("GET", URL), "away from the server's clock", now=time.time() + offset)


def test_tampered_date_is_refused():
    req = sign("GET", URL)
    stamp = req["headers"]["X-Amz-Date"]
    req["headers"]["X-Amz-Date"] = stamp[:-3] + ("00Z" if stamp[-3:] != "00Z" else "01Z")
    refused(req, "does not match")


def test_other_region_or_service_is_refused():
    refused(sign("GET", URL, region="us-east-1"), "region 'us-east-1'", region=REGION)
    refused(sign("GET", URL, service="s3"), "service 's3'")


def test_unsigned_security_token_is_refused():
    req = sign("GET", URL)
    req["headers"]["X-Amz-Security-Token"] = "slipped-in"
    refused(req, "x-amz-security-token header must be signed")


def test_tampered_security_token_is_refused():
    req = sign("GET", URL, token="token-1")
    req["headers"]["X-Amz-Security-Token"] = "token-2"
    refused(req, "does not match")


def test_unsigned_request_is_refused():
    refused(
        {"method": "GET", "path": "/v1/jobs", "query_string": "", "headers": {"Host": "h"}, "body": b""}, "not signed"
    )


@pytest.mark.parametrize(
    "auth, match",
    [
        ("Basic dXNlcjpwYXNz", "unsupported authorization scheme"),
        ("AWS4-HMAC-SHA256 Credential=AKIDALICE/20240101/eu-west-1/execute-api/aws4_request", "missing"),
        ("AWS4-HMAC-SHA256 Credential=AKIDALICE/x, SignedHeaders=host, Signature=" + "0" * 64, "malformed credential"),
    ],
)
def test_malformed_authorization_is_refused(auth, match):
    req = sign("GET", URL)
    req["headers"]["Authorization"] = auth
    refused(req, match)


def test_host_must_be_signed():
    req = sign("GET", URL)
    auth = req["headers"]["Authorization"].replace("SignedHeaders=host;x-amz-date", "SignedHeaders=x-amz-date")
    req["headers"]["Authorization"] = auth
    refused(req, "host header must be signed")


def test_content_sha256_header_must_match_the_body():
    body = b'{"a": 1}'
    req = sign("POST", URL, body, {"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    assert verify(req) == ALICE
    req["body"] = b'{"a": 2}'
    refused(req, "x-amz-content-sha256 is not the hash of the body")


# -- credentials files -------------------------------------------------------------------------


def test_load_json_credentials(tmp_path):
    path = tmp_path / "credentials.json"
    path.write_text(
        json.dumps(
            {
                "AKIDEXAMPLE": {"secret_access_key": "s1", "principal": "arn:aws:iam::000000000000:user/alice"},
                "AKIDOTHER": {"secret_access_key": "s2"},
            }
        )
    )
    assert load_credentials(path) == {
        "AKIDEXAMPLE": ("s1", "arn:aws:iam::000000000000:user/alice"),
        "AKIDOTHER": ("s2", "arn:aws:iam::000000000000:user/AKIDOTHER"),
    }


def test_load_ini_credentials_both_layouts(tmp_path):
    path = tmp_path / "credentials"
    path.write_text(
        "[AKIDEXAMPLE]\nsecret_access_key = s1\nprincipal = arn:aws:iam::000000000000:user/alice\n\n"
        "[bob]\naws_access_key_id = AKIDBOB\naws_secret_access_key = s2%x\n"
    )
    assert load_credentials(str(path)) == {
        "AKIDEXAMPLE": ("s1", "arn:aws:iam::000000000000:user/alice"),
        "AKIDBOB": ("s2%x", "arn:aws:iam::000000000000:user/bob"),
    }


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"AKID": {"principal": "p"}}', "secret_access_key is missing"),
        ('{"AKID": "secret"}', "must be an object"),
        ("{not json", "not valid JSON"),
        ("[profile]\nregion = eu-west-1\n", "needs aws_access_key_id"),
        ("just some text", "neither JSON nor INI"),
        (
            "[a]\naws_access_key_id = K\naws_secret_access_key = s\n[b]\naws_access_key_id = K\n"
            "aws_secret_access_key = t\n",
            "appears twice",
        ),
    ],
)
def test_bad_credentials_files(text, match):
    with pytest.raises(CredentialsFileError, match=match):
        parse_credentials(text)


def test_missing_or_empty_credentials_file(tmp_path):
    with pytest.raises(CredentialsFileError, match="cannot read"):
        load_credentials(tmp_path / "absent.json")
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(CredentialsFileError, match="no access keys"):
        load_credentials(tmp_path / "empty.json")


# -- over the wire: the CLI's client against a verifying server --------------------------------


class _VerifyingHandler(BaseHTTPRequestHandler):
    """Verifies each request with ``verify_wsgi`` (through a WSGI-like environ) and answers the
    principal, or 403 with the error envelope."""

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        environ = {"REQUEST_METHOD": self.command, "REQUEST_URI": self.path, "PATH_INFO": path, "QUERY_STRING": query}
        for name, value in self.headers.items():
            key = name.upper().replace("-", "_")
            environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key] = value
        try:
            principal = verify_wsgi(environ, body, self.server.credentials, region=REGION)  # type: ignore[attr-defined]
            # a listing for a GET, a job (its name: the caller) for a write
            job = {"id": "x", "name": principal}
            status, answer = 200, ({"jobs": [job], "next_cursor": None} if self.command == "GET" else job)
        except SignatureError as exc:
            status, answer = 403, {"error": {"code": "forbidden", "message": exc.message, "details": []}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def verifying_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _VerifyingHandler)
    server.credentials = CREDS  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_client_requests_verify_over_http(verifying_server):
    alice = SchedulerClient(
        verifying_server + "/stage",
        sigv4=True,
        region=REGION,
        credentials=Credentials("AKIDALICE", CREDS["AKIDALICE"][0], "tok"),
    )
    page = alice.list_jobs(name_prefix="a b~c/d+é", state="active", limit=5)
    assert page["jobs"][0]["name"] == ALICE
    assert alice.patch_job("11111111-1111-1111-1111-111111111111", {"description": "é"}, if_match=3)
    bob = SchedulerClient(
        verifying_server, sigv4=True, region=REGION, credentials=Credentials("AKIDBOB", CREDS["AKIDBOB"][0])
    )
    assert bob.create_job({"name": "x"})["name"] == BOB


def test_client_with_wrong_secret_is_refused_over_http(verifying_server):
    from scheduler.client import ApiCallFailed

    client = SchedulerClient(verifying_server, sigv4=True, region=REGION, credentials=Credentials("AKIDALICE", "wrong"))
    with pytest.raises(ApiCallFailed) as info:
        client.list_jobs()
    assert info.value.status == 403 and "does not match" in info.value.message
