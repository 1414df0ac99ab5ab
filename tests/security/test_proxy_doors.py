"""Issue 31, item 8: the doors of `scheduler console --endpoint URL`, the signing proxy.

- ``Origin`` / ``Sec-Fetch-Site`` are checked on every method: another site cannot spend the
  user's identity (nor the stage's shared throttle) on reads either.
- Only the API's methods on the API's routes are forwarded (``OPTIONS``, ``PROPFIND``...: 405).
- The body is capped at the API's 1 MiB before it is read (413), as in `scheduler local`.
- Bound beyond loopback it needs a token; with one, every request needs it, and a browser user
  gets it into a cookie by opening the URL printed at start once.

Through real servers on loopback: the proxy (waitress) in front of a recording stand-in for the
API (to see what reaches it), or of the security suite's `scheduler local --auth sigv4` (to see
the console work); and the `scheduler console` command as a process. Each failed before the fix.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.browser.test_console import TIMEOUT_MS, browser  # noqa: F401 - the Chromium fixture
from tests.security.conftest import KEYS, REGION, spec, unique
from tests.support import ROOT, RecordingServer, poll

MiB = 1024 * 1024
EXIT_USAGE = 2
TOKEN = "a-console-token-of-the-test-0123456789"


# -- what reaches the API -----------------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """Records every request, whatever its method, and answers 200 with an empty job list."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[[], None]:
        if name.startswith("do_"):
            return self._record
        raise AttributeError(name)

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.calls.append((self.command, self.path, len(body)))
        answer = b'{"jobs": [], "next_cursor": null}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture
def recorder() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    server.lock, server.calls = threading.Lock(), []
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


# -- the proxy ------------------------------------------------------------------------------------


def _aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Alice's access key as the only credentials of the usual chain."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "SCHEDULER_CONSOLE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEYS["alice"][0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEYS["alice"][1])


class Console:
    """A running `scheduler console`: ``base`` its root URL, ``url`` the one it printed."""

    def __init__(self, url: str):
        self.url = url
        parts = urlsplit(url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.port = parts.port

    def raw(
        self, method: str, path: str, headers: list[tuple[str, str]] = (), body: bytes | None = None, **kw: Any
    ) -> tuple[int, dict[str, str], str]:
        """One request as sent (``http.client``: any method, any header), its status, headers and text."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=kw.get("timeout", 10))
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", f"127.0.0.1:{self.port}")
            for name, value in headers:
                conn.putheader(name, value)
            if body is not None and not any(n.lower() == "content-length" for n, _ in headers):
                conn.putheader("Content-Length", str(len(body)))
            try:
                conn.endheaders(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered before the body was all sent
            answer = conn.getresponse()
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
        finally:
            conn.close()


@pytest.fixture
def console(monkeypatch, tmp_path) -> Iterator[Callable[..., Console]]:
    """Starts ``run_console`` for an endpoint on a free loopback port (stopped afterwards)."""
    from scheduler.console.proxy import run_console

    _aws_env(monkeypatch, tmp_path)
    started: list[tuple[threading.Event, threading.Thread, list[int]]] = []

    def start(endpoint: str, **kwargs: Any) -> Console:
        urls: list[str] = []
        ready, stop, code = threading.Event(), threading.Event(), []
        run = lambda: code.append(  # noqa: E731
            run_console(
                endpoint=endpoint,
                port=0,
                region=REGION,
                stop=stop,
                ready=lambda url: (urls.append(url), ready.set()),
                **kwargs,
            )
        )
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert ready.wait(10), f"the console did not start: {code}"
        started.append((stop, thread, code))
        return Console(urls[0])

    yield start
    for stop, thread, code in started:
        stop.set()
        thread.join(10)
        assert code == [0]


def _paths(recorder: ThreadingHTTPServer) -> list[tuple[str, str]]:
    """The method and path (without the query) of each request the API received."""
    return [(method, path.split("?")[0]) for method, path, _ in recorder.calls]


def _error(text: str) -> dict[str, Any]:
    body = json.loads(text)
    assert set(body) == {"error"}, text
    return body["error"]


# -- Origin and Sec-Fetch-Site on every method ------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        [("Origin", "https://evil.example")],
        [("Origin", "null")],
        [("Origin", "http://127.0.0.1:1")],  # another port is another origin
        [("Sec-Fetch-Site", "cross-site")],
        [("Sec-Fetch-Site", "same-site")],  # a page on another port of this host, say
    ],
    ids=["other-site", "null", "other-port", "cross-site", "same-site"],
)
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/executions?status=failed", "/v1/health"])
def test_8_reads_from_another_site_are_refused_and_not_forwarded(console, recorder, headers, path):
    proxy = console(recorder.url)
    status, answer_headers, text = proxy.raw("GET", path, headers)
    assert status == 403, text
    assert _error(text)["details"][0]["field"] in ("Origin", "Sec-Fetch-Site")
    assert answer_headers["cache-control"] == "no-store" and answer_headers["x-content-type-options"] == "nosniff"
    assert recorder.calls == []


def test_8_the_consoles_own_calls_still_pass(console, recorder):
    proxy = console(recorder.url)
    same = [("Origin", proxy.base), ("Sec-Fetch-Site", "same-origin")]
    assert proxy.raw("GET", "/v1/jobs", same)[0] == 200
    assert proxy.raw("GET", "/v1/jobs", [("Sec-Fetch-Site", "none")])[0] == 200  # typed in the address bar
    assert proxy.raw("GET", "/v1/jobs")[0] == 200  # not a browser: no such headers
    assert proxy.raw("POST", "/v1/jobs", [*same, ("Content-Type", "application/json")], b"{}")[0] == 200
    assert proxy.raw("GET", "/console/", [("Sec-Fetch-Site", "none")])[0] == 200
    assert [call[:2] for call in recorder.calls] == [("GET", "/v1/jobs")] * 3 + [("POST", "/v1/jobs")]


# -- only the API's methods -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("OPTIONS", "/v1/jobs", 405),
        ("PROPFIND", "/v1/jobs", 405),
        ("TRACE", "/v1/jobs", 405),
        ("HEAD", "/v1/jobs", 405),
        ("PUT", "/v1/jobs", 405),
        ("DELETE", "/v1/executions", 405),
        ("GET", "/v1/jobs/abc/pause", 405),
        ("GET", "/v1/nothing-here", 404),
        ("PROPFIND", "/v1/", 404),
    ],
)
def test_8_only_the_apis_methods_and_routes_are_forwarded(console, recorder, method, path, status):
    proxy = console(recorder.url)
    answer_status, headers, text = proxy.raw(method, path, [("Sec-Fetch-Site", "same-origin")])
    assert answer_status == status, text
    if status == 405:
        allowed = headers["allow"].split(", ")
        assert allowed and method not in allowed and set(allowed) <= {"GET", "POST", "PUT", "PATCH", "DELETE"}
    assert recorder.calls == []


# -- the body cap, before reading -----------------------------------------------------------------


def test_8_a_huge_declared_body_is_refused_before_it_is_read(console, recorder):
    proxy = console(recorder.url)
    # 50 MiB announced, a few bytes sent: the answer comes at once (the test waits 5 s at most).
    headers = [("Content-Type", "application/json"), ("Content-Length", str(50 * MiB))]
    status, _, text = proxy.raw("POST", "/v1/jobs", headers, b"{}", timeout=5)
    assert status == 413 and _error(text)["code"] == "payload_too_large", text
    # the same from another site: refused unread too
    status, _, _ = proxy.raw("POST", "/v1/jobs", [*headers, ("Origin", "https://evil.example")], b"{}", timeout=5)
    assert status in (403, 413)
    assert recorder.calls == []


def test_8_the_cap_is_the_apis_1_mib(console, recorder):
    proxy = console(recorder.url)
    json_type = [("Content-Type", "application/json")]
    assert proxy.raw("POST", "/v1/jobs", json_type, b" " * MiB)[0] == 200
    status, _, text = proxy.raw("POST", "/v1/jobs", json_type, b" " * (MiB + 1))
    assert status == 413 and _error(text)["code"] == "payload_too_large"
    assert recorder.calls == [("POST", "/v1/jobs", MiB)]


# -- beyond loopback only with a token --------------------------------------------------------------


def scheduler_console(*argv: str, env: dict[str, str]) -> subprocess.Popen:
    """`scheduler console ...` as a process, with Alice's key as its AWS credentials."""
    full_env = {k: v for k, v in os.environ.items() if k != "SCHEDULER_CONSOLE_TOKEN"}
    full_env.update({"PYTHONPATH": os.path.join(ROOT, "functions"), **env})
    full_env.update({"AWS_ACCESS_KEY_ID": KEYS["alice"][0], "AWS_SECRET_ACCESS_KEY": KEYS["alice"][1]})
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "console", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "my-laptop.example"])
def test_8_a_bind_beyond_loopback_without_a_token_is_a_usage_error(recorder, host):
    process = scheduler_console("--endpoint", recorder.url, "--host", host, env={})
    try:
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == EXIT_USAGE, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("scheduler console: error: --host "), err
    assert "--token" in lines[0] and "Traceback" not in err
    assert recorder.calls == []


def _started(process: subprocess.Popen, timeout: float = 30) -> str:
    """The URL of the start-up line of a `scheduler console` process (within ``timeout``)."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    match = re.match(r"scheduler console: (http://\S+) for ", lines[0] if lines else "")
    assert match, (lines, process.poll())
    return match.group(1)


def _interrupt(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    try:
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()


@pytest.mark.parametrize("how", ["generated", "environment"])
def test_8_the_token_is_printed_at_start_and_required_on_every_request(recorder, how):
    env = {"SCHEDULER_CONSOLE_TOKEN": TOKEN} if how == "environment" else {}
    process = scheduler_console("--endpoint", recorder.url, "--token", env=env)
    try:
        url = _started(process)
        token = re.search(r"[?&]token=([^&\s]+)", url).group(1)
        assert len(token) >= 32 and (token == TOKEN if how == "environment" else token != TOKEN)
        base = url.split("/console/")[0]
        for path in ("/console/", "/console/app.js", "/v1/jobs", "/v1/health", "/"):
            answer = requests.get(base + path, timeout=10, allow_redirects=False)
            assert answer.status_code == 401, path
            assert token not in answer.text and token not in str(answer.headers)
            assert (
                answer.headers["Cache-Control"] == "no-store" and answer.headers["X-Content-Type-Options"] == "nosniff"
            )
        wrong = requests.get(base + "/v1/jobs", headers={"Authorization": "Bearer " + "x" * len(token)}, timeout=10)
        assert wrong.status_code == 401
        assert requests.get(base + "/v1/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=10).ok
        assert recorder.calls == [("GET", "/v1/jobs", 0)]
    finally:
        _interrupt(process)


def test_8_a_short_token_in_the_environment_is_a_usage_error(recorder):
    process = scheduler_console("--endpoint", recorder.url, "--token", env={"SCHEDULER_CONSOLE_TOKEN": "tk-9f3a"})
    try:
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == EXIT_USAGE and "SCHEDULER_CONSOLE_TOKEN" in err and "tk-9f3a" not in err, err


def test_8_a_browser_user_with_the_token_uses_the_console(console, local_server):
    """The printed URL, opened once, leaves a cookie (HttpOnly, SameSite=Strict, not the token
    itself) with which the pages and their API calls work; nothing works without it."""
    proxy = console(local_server.api.base, token=TOKEN)
    assert proxy.url == f"{proxy.base}/console/?token={TOKEN}"
    browser = requests.Session()
    login = browser.get(proxy.url, timeout=10, allow_redirects=False)
    assert login.status_code == 303 and login.headers["Location"] == "/console/"
    cookie = login.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie and TOKEN not in login.text
    page = browser.get(proxy.base + "/console/", timeout=10)
    assert page.status_code == 200 and 'src="app.js"' in page.text
    assert browser.get(proxy.base + "/console/app.js", timeout=10).status_code == 200
    name = unique("via-token")
    same = {"Origin": proxy.base, "Sec-Fetch-Site": "same-origin"}
    created = browser.post(proxy.base + "/v1/jobs", json=spec(name), headers=same, timeout=10)
    assert created.status_code == 201 and created.json()["owner"].endswith("user/alice"), created.text
    listed = browser.get(proxy.base + "/v1/jobs", params={"name_prefix": name}, headers=same, timeout=10)
    assert [job["name"] for job in listed.json()["jobs"]] == [name]
    # without the cookie, or with another token's, nothing
    assert requests.get(proxy.base + "/v1/jobs", timeout=10).status_code == 401
    assert requests.get(proxy.base + "/console/", timeout=10).status_code == 401
    forged_cookies = {c.name: "0" * len(c.value) for c in browser.cookies}
    forged = requests.get(proxy.base + "/v1/jobs", cookies=forged_cookies, timeout=10)
    assert forged.status_code == 401
    wrong = requests.get(proxy.base + "/console/?token=" + "x" * len(TOKEN), timeout=10, allow_redirects=False)
    assert wrong.status_code == 401 and "set-cookie" not in {k.lower() for k in wrong.headers}


# -- in a real browser ---------------------------------------------------------------------------

ATTACK_PAGE = """<!doctype html><title>attack</title><script>
const url = "{proxy}/v1/jobs";
Promise.allSettled([
  fetch(url + "?via=no-cors", {{mode: "no-cors", credentials: "include"}}),
  fetch(url + "?via=cors", {{credentials: "include"}}),
  fetch(url + "?via=post", {{method: "POST", mode: "no-cors", credentials: "include", body: "{{}}"}}),
  new Promise((done) => {{ const img = new Image(); img.onload = img.onerror = done; img.src = url + "?via=img"; }}),
]).then(() => {{ document.title = "done"; }});
</script>"""


@pytest.mark.browser
@pytest.mark.parametrize("attacker_host", ["127.0.0.1", "localhost"], ids=["other-port", "other-site"])
def test_8_in_a_browser_another_pages_requests_are_not_forwarded(browser, console, recorder, attacker_host):
    """A page of another origin (another port of this host: same-site; or another host name:
    cross-site) has Chromium read, fetch and post to the proxy: none of it reaches the API."""
    proxy = console(recorder.url)
    attacker = RecordingServer()
    attacker.responses["/attack"] = [
        (200, {"Content-Type": "text/html"}, ATTACK_PAGE.format(proxy=proxy.base).encode())
    ]
    try:
        page = browser.new_page()
        page.goto(attacker.url.replace("127.0.0.1", attacker_host) + "/attack")
        page.wait_for_function("document.title === 'done'", timeout=TIMEOUT_MS)
        assert recorder.calls == []
        page.goto(proxy.base + "/console/")  # the user's own visit: its calls go through
        poll(lambda: any(call[:2] == ("GET", "/v1/jobs") for call in _paths(recorder)), what="the console's call")
    finally:
        attacker.close()


@pytest.mark.browser
def test_8_in_a_browser_the_printed_url_signs_in_and_the_console_works(browser, console, local_server, alice):
    """Chromium opens the URL the start-up line printed: the token leaves the address bar for a
    cookie, the console lists the user's jobs; a browser without the cookie gets 401."""
    from playwright.sync_api import expect

    name = unique("browser-token")
    alice.create(spec(name))
    proxy = console(local_server.api.base, token=TOKEN)
    page = browser.new_page()
    page.goto(proxy.url)
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text(name)).to_be_visible(timeout=TIMEOUT_MS)
    assert "token" not in page.url
    [cookie] = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and TOKEN not in cookie["value"]
    stranger = browser.new_context().new_page()
    assert stranger.goto(proxy.base + "/console/").status == 401
