"""The LocalStack variant's API checks SigV4 itself: events as LocalStack's API Gateway builds them
from requests botocore signed, for each URL form the gateway answers at."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from scheduler.api.app import _located, make_app, precheck
from scheduler.api.gateway_auth import canonical_query, identifier_for, signed_paths, verify_event, with_principal
from scheduler.settings import Settings
from scheduler.transport.sigv4 import SignatureError

API_ID, STAGE = "abc123", "prod"
CREDENTIALS = {
    "test": ("test", "arn:aws:iam::000000000000:user/test"),
    "test2": ("test2", "arn:aws:iam::000000000000:user/test2"),
}
URLS = {
    "path-style": f"http://127.0.0.1:4566/_aws/execute-api/{API_ID}/{STAGE}",
    "host-style": f"http://{API_ID}.execute-api.localhost.localstack.cloud:4566/{STAGE}",
    "legacy": f"http://127.0.0.1:4566/restapis/{API_ID}/{STAGE}/_user_request_",
}


def gateway_event(
    method: str,
    url: str,
    *,
    key: str = "test",
    secret: str = "test",
    body: bytes | None = None,
    content_type: str = "application/json",
):
    """What LocalStack's API Gateway hands the function for a request botocore signed for ``url``."""
    request = AWSRequest(method=method, url=url, data=body or b"", headers={"Content-Type": content_type})
    SigV4Auth(Credentials(key, secret), "execute-api", "us-east-1").add_auth(request)
    parts = urlsplit(url)
    path = "/" + parts.path.split(f"/{STAGE}/", 1)[1].removeprefix("_user_request_/")
    query = parse_qsl(parts.query, keep_blank_values=True)
    multi: dict[str, list[str]] = {}
    for name, value in query:
        multi.setdefault(name, []).append(value)
    headers = {("Authorization" if k.lower() == "authorization" else k): v for k, v in request.headers.items()}
    headers["Host"] = parts.netloc
    return {
        "httpMethod": method,
        "path": path,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} or None,
        "multiValueQueryStringParameters": multi or None,
        "body": body.decode() if body else None,
        "isBase64Encoded": False,
        "requestContext": {
            "apiId": API_ID,
            "stage": STAGE,
            "path": f"/{STAGE}{path}",
            "identity": {"userArn": None, "caller": None, "sourceIp": "127.0.0.1"},
        },
    }


@pytest.mark.parametrize("form", URLS)
def test_each_url_form_of_the_gateway_verifies(form):
    event = gateway_event("GET", f"{URLS[form]}/v1/jobs?limit=5&state=active")
    assert verify_event(event, CREDENTIALS, region="us-east-1") == "arn:aws:iam::000000000000:user/test"


def test_two_keys_are_two_principals_and_a_wrong_secret_is_refused():
    url = f"{URLS['path-style']}/v1/jobs"
    assert verify_event(gateway_event("GET", url, key="test2", secret="test2"), CREDENTIALS, region=None).endswith(
        "/test2"
    )
    with pytest.raises(SignatureError, match="does not match"):
        verify_event(gateway_event("GET", url, key="test2", secret="guess"), CREDENTIALS, region=None)
    with pytest.raises(SignatureError, match="unknown access key"):
        verify_event(gateway_event("GET", url, key="stranger", secret="x"), CREDENTIALS, region=None)


def test_a_changed_body_or_query_is_refused():
    url = f"{URLS['path-style']}/v1/jobs?limit=5"
    event = gateway_event("POST", url, body=b'{"name": "a"}')
    assert verify_event(event, CREDENTIALS, region="us-east-1")
    with pytest.raises(SignatureError):
        verify_event({**event, "body": '{"name": "b"}'}, CREDENTIALS, region="us-east-1")
    tampered = {
        **event,
        "queryStringParameters": {"limit": "500"},
        "multiValueQueryStringParameters": {"limit": ["500"]},
    }
    with pytest.raises(SignatureError):
        verify_event(tampered, CREDENTIALS, region="us-east-1")


def test_the_region_of_the_scope_must_be_the_function_s():
    event = gateway_event("GET", f"{URLS['path-style']}/v1/jobs")
    with pytest.raises(SignatureError, match="region"):
        verify_event(event, CREDENTIALS, region="eu-west-1")


def test_the_query_is_encoded_as_sigv4_canonicalizes_it():
    event = {"multiValueQueryStringParameters": {"name_prefix": ["a b/c"], "tag": ["x", "a"]}}
    assert canonical_query(event) == "name_prefix=a%20b%2Fc&tag=a&tag=x"
    assert canonical_query({"queryStringParameters": {"k": "é"}}) == "k=%C3%A9"
    assert canonical_query({}) == ""


def test_signed_paths_name_every_form():
    event = {"path": "/v1/jobs", "requestContext": {"apiId": API_ID, "stage": STAGE, "path": "/prod/v1/jobs"}}
    assert signed_paths(event) == [
        "/prod/v1/jobs",
        f"/_aws/execute-api/{API_ID}/prod/v1/jobs",
        f"/restapis/{API_ID}/prod/_user_request_/v1/jobs",
    ]


def test_the_verified_principal_replaces_any_identity_the_event_carries():
    event = {"requestContext": {"identity": {"userArn": "arn:aws:iam::1:user/forged", "sourceIp": "1.2.3.4"}}}
    replaced = with_principal(event, "arn:aws:iam::000000000000:user/test")
    assert replaced["requestContext"]["identity"] == {
        "userArn": "arn:aws:iam::000000000000:user/test",
        "caller": "arn:aws:iam::000000000000:user/test",
        "sourceIp": "1.2.3.4",
    }
    assert event["requestContext"]["identity"]["userArn"] == "arn:aws:iam::1:user/forged"  # a copy


def test_only_a_deployment_with_access_keys_checks_signatures():
    assert identifier_for(Settings()) is None
    document = json.dumps({"test": {"secret_access_key": "test"}})
    assert identifier_for(Settings(api_credentials=document)) is not None


def _app():
    identify = identifier_for(Settings(api_credentials=json.dumps({"test": {"secret_access_key": "test"}})))

    def no_store():
        raise AssertionError("a refused request reaches no store")

    return make_app(no_store, no_store, Settings(cursor_secret="k" * 32), identify=identify)


def test_the_api_refuses_an_unsigned_request_with_the_reason_and_answers_health():
    app = _app()
    unsigned = gateway_event("GET", f"{URLS['path-style']}/v1/jobs")
    del unsigned["headers"]["Authorization"]
    unsigned["multiValueHeaders"].pop("Authorization")
    answer = app.resolve(unsigned, None)
    assert answer["statusCode"] == 403
    assert "not signed" in json.loads(answer["body"])["error"]["message"]
    health = {
        **unsigned,
        "path": "/v1/health",
        "requestContext": {**unsigned["requestContext"], "path": "/prod/v1/health"},
    }
    assert app.resolve(health, None)["statusCode"] == 200


@pytest.mark.parametrize(
    ("method", "content_type", "body"),
    [
        ("GET", "application/json; charset=utf-8", None),
        ("POST", "Application/JSON", b"{}"),
        ("PATCH", "application/merge-patch+json", b"{}"),
        ("GET", "text/plain", None),
    ],
)
def test_a_signature_is_checked_on_the_headers_as_signed(method, content_type, body):
    """The content type is normalized for the routes after the signature is checked: it was
    checked on the normalized one, and a request signed with any other was refused (403)."""
    identify = identifier_for(Settings(api_credentials=json.dumps({"test": {"secret_access_key": "test"}})))
    path = "/v1/jobs/00000000-0000-4000-8000-000000000000" if method == "PATCH" else "/v1/jobs"
    event = gateway_event(method, f"{URLS['path-style']}{path}", body=body, content_type=content_type)
    checked = precheck(event, identify)
    assert checked["requestContext"]["identity"]["userArn"] == "arn:aws:iam::000000000000:user/test"


def test_a_percent_encoded_path_is_routed_as_decoded_and_located_under_the_stage():
    """API Gateway passes the path as sent: a calendar named ``hol:x`` (``hol%3Ax`` from the SDK)
    was no such resource deployed. A Location answered carries the stage."""
    identify = identifier_for(Settings(api_credentials=json.dumps({"test": {"secret_access_key": "test"}})))
    event = gateway_event("GET", f"{URLS['path-style']}/v1/calendars/hol%3Ax")
    assert precheck(event, identify)["path"] == "/v1/calendars/hol:x"
    answer = {
        "statusCode": 201,
        "multiValueHeaders": {"Location": ["/v1/jobs/1"]},
        "headers": {"Location": "/v1/jobs/1"},
    }
    created = gateway_event("POST", f"{URLS['path-style']}/v1/jobs", body=b"{}")
    located = _located(answer, created)
    assert located["multiValueHeaders"]["Location"] == ["/prod/v1/jobs/1"]
    assert located["headers"]["Location"] == "/prod/v1/jobs/1"
    local = {**created, "requestContext": {}}
    assert _located({"headers": {"Location": "/v1/jobs/1"}}, local)["headers"]["Location"] == "/v1/jobs/1"
