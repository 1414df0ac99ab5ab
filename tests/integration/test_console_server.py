"""The console's files and the local server's safety checks, through a real waitress server on
loopback (the API behind them is a recording stand-in: what matters is what reaches it)."""

from __future__ import annotations

import json
import threading

import pytest
import requests
from waitress import create_server

from scheduler.console import local_app
from scheduler.console.guard import HostPolicy
from scheduler.console.proxy import stop_server


class RecordingApi:
    """A WSGI app standing in for the API: answers 200 and records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bytes]] = []

    def __call__(self, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        self.calls.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], body))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"ok": true}']


@pytest.fixture
def served():
    api = RecordingApi()
    server = create_server(local_app(api, host="127.0.0.1"), host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}", server.effective_port, api
    stop_server(server, thread)


def _field(answer: requests.Response) -> str:
    return answer.json()["error"]["details"][0]["field"]


def test_root_and_console_redirect_to_the_console(served):
    base, _, api = served
    for path in ("/", "/console"):
        answer = requests.get(base + path, allow_redirects=False, timeout=5)
        assert answer.status_code == 302 and answer.headers["Location"] == "/console/"
    page = requests.get(base + "/", timeout=5)
    assert page.status_code == 200 and page.url.endswith("/console/")
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="app.js">' in page.text
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert api.calls == []


def test_assets_are_served_with_their_types_and_nothing_outside(served):
    base, _, api = served
    for path, kind in (
        ("app.js", "text/javascript"),
        ("style.css", "text/css"),
        ("vendor/htm-preact-standalone.mjs", "text/javascript"),
        ("vendor/uPlot.iife.min.js", "text/javascript"),
    ):
        answer = requests.get(f"{base}/console/{path}", timeout=5)
        assert answer.status_code == 200 and answer.headers["Content-Type"].startswith(kind), path
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert requests.head(f"{base}/console/app.js", timeout=5).text == ""
    for path in ("/console/missing.js", "/console/%2e%2e/__init__.py", "/console/..%2f__init__.py", "/console/vendor/"):
        assert requests.get(base + path, timeout=5).status_code == 404, path
    assert requests.post(f"{base}/console/app.js", json={}, timeout=5).status_code == 405
    assert api.calls == []


def test_the_pages_load_no_asset_from_another_host(served):
    base, _, _ = served
    for path in ("", "app.js", "lib.js", "pages.js", "form.js", "style.css"):
        text = requests.get(f"{base}/console/{path}", timeout=5).text
        assert "http://" not in text and "https://" not in text.replace("https://example.com", ""), path


def test_api_calls_pass_through(served):
    base, port, api = served
    assert requests.get(base + "/v1/health", timeout=5).status_code == 200
    assert requests.post(base + "/v1/jobs", json={"name": "x"}, timeout=5).status_code == 200
    assert (
        requests.post(
            base + "/v1/jobs",
            data=b'{"name": "y"}',
            timeout=5,
            headers={"Content-Type": "application/merge-patch+json"},
        ).status_code
        == 200
    )
    # A write without a body or content type (pause, run): JSON is not at stake.
    assert requests.post(base + "/v1/jobs/1/run", timeout=5).status_code == 200
    assert (
        requests.post(base + "/v1/jobs", json={}, timeout=5, headers={"Origin": f"http://127.0.0.1:{port}"}).status_code
        == 200
    )
    assert [c[:2] for c in api.calls] == [
        ("GET", "/v1/health"),
        ("POST", "/v1/jobs"),
        ("POST", "/v1/jobs"),
        ("POST", "/v1/jobs/1/run"),
        ("POST", "/v1/jobs"),
    ]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "LOCALHOST.", "app.localhost", "[::1]", "127.0.0.2"])
def test_loopback_host_names_are_served(served, host):
    base, port, api = served
    answer = requests.get(base + "/v1/health", headers={"Host": f"{host}:{port}"}, timeout=5)
    assert answer.status_code == 200 and len(api.calls) == 1


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "10.0.0.5", ""])
def test_other_host_names_are_refused_dns_rebinding(served, host):
    base, port, api = served
    for method in ("GET", "POST"):
        answer = requests.request(
            method,
            base + "/v1/jobs",
            json={} if method == "POST" else None,
            headers={"Host": f"{host}:{port}" if host else ""},
            timeout=5,
        )
        assert answer.status_code == 403 and _field(answer) == "Host"
    page = requests.get(base + "/console/", headers={"Host": f"{host}:{port}"}, timeout=5)
    assert page.status_code == 403
    assert api.calls == []


@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/xml",
    ],
)
def test_writes_that_are_not_json_are_refused(served, content_type):
    base, _, api = served
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        answer = requests.request(
            method, base + "/v1/jobs/1", data=b'{"name": "x"}', timeout=5, headers={"Content-Type": content_type}
        )
        assert answer.status_code == 415 and _field(answer) == "Content-Type"
        assert answer.json()["error"]["code"] == "unsupported_media_type"
    assert api.calls == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://localhost:1"},
        {"Sec-Fetch-Site": "cross-site"},
    ],
)
def test_cross_site_writes_are_refused(served, headers):
    base, _, api = served
    for path in ("/v1/jobs", "/v1/jobs/1/run"):
        answer = requests.post(base + path, json={}, headers=headers, timeout=5)
        assert answer.status_code == 403 and _field(answer) in ("Origin", "Sec-Fetch-Site")
        assert json.loads(answer.text)["error"]["code"] == "forbidden"
    # reading is not a write (and without CORS headers, another site cannot read the answer)
    assert requests.get(base + "/v1/jobs", headers=headers, timeout=5).status_code == 200
    assert api.calls == [("GET", "/v1/jobs", b"")]


def test_a_wildcard_bind_serves_addresses_but_not_foreign_names():
    policy = HostPolicy("0.0.0.0")
    assert policy.allows("192.168.1.20:8080") and policy.allows("[fe80::1]:8080") and policy.allows("localhost")
    assert not policy.allows("evil.example:8080") and not policy.allows(None)
    bound = HostPolicy("192.168.1.20")
    assert bound.allows("192.168.1.20:8080") and bound.allows("127.0.0.1")
    assert not bound.allows("192.168.1.21:8080") and not bound.allows("evil.example")


@pytest.mark.parametrize(
    "header", ["127.0.0.1:8080@evil.example", "localhost:80/evil.example", "127.0.0.1:8o80", "[::1]@evil.example"]
)
def test_a_host_header_that_is_not_a_host_and_port_is_refused(header):
    """The port of a ``Host`` header is digits: anything after a loopback name is not dropped."""
    for bound in ("127.0.0.1", "0.0.0.0"):
        assert not HostPolicy(bound).allows(header)
    assert HostPolicy("127.0.0.1").allows("127.0.0.1:8080") and HostPolicy("127.0.0.1").allows("[::1]:8080")


def test_scheduler_local_serves_the_console_behind_the_guard(db_url, tmp_path):
    from tests.support import LocalScheduler

    local = LocalScheduler(db_url, str(tmp_path / "data"))
    try:
        root = requests.get(local.url + "/", allow_redirects=False, timeout=10)
        assert root.status_code == 302 and root.headers["Location"] == "/console/"
        assert requests.get(local.url + "/console/", timeout=10).status_code == 200
        port = local.url.rsplit(":", 1)[1]
        rebound = requests.get(local.url + "/v1/jobs", headers={"Host": f"evil.example:{port}"}, timeout=10)
        assert rebound.status_code == 403 and _field(rebound) == "Host"
        form = requests.post(local.url + "/v1/jobs", data={"name": "x"}, timeout=10)
        assert form.status_code == 415 and _field(form) == "Content-Type"
        cross = requests.post(
            local.url + "/v1/jobs", json={"name": "x"}, timeout=10, headers={"Origin": "http://evil.example"}
        )
        assert cross.status_code == 403 and _field(cross) == "Origin"
        assert requests.get(local.url + "/v1/jobs", timeout=10).json()["jobs"] == []
    finally:
        assert local.stop() == 0, "".join(local.lines)
