"""A target that answers with the parts of the credentials it was sent (as httpbin's ``/cookies``
and ``/basic-auth`` do): no part of a secret header's value is kept in the execution, whether
the target echoes a cookie of a ``Cookie`` header on its own or a ``Basic`` credential decoded.
Through the real server (``scheduler local --auth sigv4``); each case failed before the fix."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.security.conftest import spec, unique


class _Parts(BaseHTTPRequestHandler):
    """Answers 200 with the request's cookies parsed and its Basic credential decoded."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        cookies = dict(
            pair.strip().partition("=")[::2] for pair in (self.headers.get("Cookie") or "").split(";") if pair.strip()
        )
        scheme, _, credential = (self.headers.get("Authorization") or "").partition(" ")
        decoded = base64.b64decode(credential).decode() if scheme == "Basic" else ""
        user, _, password = decoded.partition(":")
        body = json.dumps({"cookies": cookies, "basic": decoded, "user": user, "password": password}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def parts() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Parts)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/echo"
    server.shutdown()
    server.server_close()


def test_a_cookie_echoed_on_its_own_is_masked(alice, parts):
    target = {"type": "http", "url": parts, "headers": {"Cookie": "lang=en; sid=COOKIESIDSECRET02"}}
    excerpt = alice.run_once(spec(unique("cookie"), target))["response_excerpt"]
    assert "COOKIESIDSECRET02" not in excerpt and "COOKIESID" not in excerpt
    assert json.loads(excerpt)["cookies"] == {"lang": "en", "sid": "***"}  # a value under 4 characters is no secret


def test_a_run_now_cookie_echoed_on_its_own_is_masked(alice, parts):
    job = alice.create(spec(unique("cookie-now"), {"type": "http", "url": parts}))
    answer = alice.call("POST", f"/v1/jobs/{job['id']}/run", {"headers": {"Cookie": "sid=OVCOOKIESECRET04; a=b"}})
    assert answer.status == 202, answer.text
    excerpt = alice.executions(job["id"])[0]["response_excerpt"]
    assert "OVCOOKIESECRET04" not in excerpt


def test_a_basic_credential_set_as_a_header_is_masked_decoded(alice, parts):
    credential = base64.b64encode(b"user:BASICPWSECRET05").decode()
    target = {"type": "http", "url": parts, "headers": {"Authorization": f"Basic {credential}"}}
    excerpt = alice.run_once(spec(unique("basic"), target))["response_excerpt"]
    assert "BASICPWSECRET05" not in excerpt
    echoed = json.loads(excerpt)
    assert echoed["password"] == "***" and echoed["basic"] == "***"


def test_a_basic_credential_set_by_header_auth_is_masked_decoded(alice, parts):
    credential = base64.b64encode(b"user:HEADERAUTHPW06").decode()
    auth = {"type": "header", "name": "Authorization", "value": f"Basic {credential}"}
    excerpt = alice.run_once(spec(unique("basic-auth"), {"type": "http", "url": parts, "auth": auth}))[
        "response_excerpt"
    ]
    assert "HEADERAUTHPW06" not in excerpt
