"""The security suite's server: `scheduler local --auth sigv4` (its ``serve``, in this process,
on loopback through waitress) with two tenants, alice and bob; a second one with
``--guard-targets``. Requests go over real sockets (``http.client``, so that headers can be
repeated or forged), signed by botocore as the CLI signs them."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support import postgres_server, temporary_database

REGION = "us-east-1"
KEYS = {
    "alice": ("AKIDALICE", "alice-secret-access-key-0123456789"),
    "bob": ("AKIDBOB", "bob-secret-access-key-9876543210"),
}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text) if self.text else None

    def error(self) -> dict[str, Any]:
        """The error envelope's ``error`` (asserts there is one)."""
        body = self.json
        assert isinstance(body, dict) and set(body) == {"error"}, self.text
        assert {"code", "message", "details"} <= set(body["error"]), self.text
        return body["error"]

    def fields(self) -> list[str]:
        return [d["field"] for d in self.error()["details"]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Api:
    """A running local server; ``call`` sends one raw request."""

    def __init__(self, port: int):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def raw(
        self,
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes | None = None,
        chunks: Iterator[bytes] | None = None,
    ) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            if chunks is not None:
                conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                try:
                    for chunk in chunks:
                        conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    conn.send(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server answered early and closed
            else:
                if body is not None:
                    conn.putheader("Content-Length", str(len(body)))
                try:
                    conn.endheaders(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server answered before reading it all
            response = conn.getresponse()
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read().decode("utf-8", "replace"),
            )
        finally:
            conn.close()


class Tenant:
    """A caller signing with one access key (as ``scheduler --sigv4`` does)."""

    def __init__(self, api: Api, name: str, key: str, secret: str):
        self.api, self.name, self.key, self.secret = api, name, key, secret
        self.principal = f"arn:aws:iam::000000000000:user/{name}"

    def signed_headers(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        region: str = REGION,
        secret: str | None = None,
        token: str | None = None,
        at: dt.datetime | None = None,
        content_type: str | None = "application/json",
    ) -> list[tuple[str, str]]:
        headers = {"Host": f"127.0.0.1:{self.api.port}"}
        if content_type and body is not None:
            headers["Content-Type"] = content_type
        request = AWSRequest(method=method, url=self.api.base + path, data=body or b"", headers=headers)
        credentials = Credentials(self.key, secret or self.secret, token)
        if at is None:
            SigV4Auth(credentials, "execute-api", region).add_auth(request)
        else:
            with mock.patch("botocore.auth.get_current_datetime", return_value=at.replace(tzinfo=None)):
                SigV4Auth(credentials, "execute-api", region).add_auth(request)
        return list(request.headers.items())

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None, **sign: Any) -> Answer:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        return self.api.raw(method, path, self.signed_headers(method, path, data, **sign), data)

    def create(self, spec: dict[str, Any]) -> dict[str, Any]:
        answer = self.call("POST", "/v1/jobs", spec)
        assert answer.status == 201, answer.text
        return answer.json

    def names(self) -> list[str]:
        """The names of all this tenant's jobs (to check that nothing was stored)."""
        answer = self.call("GET", "/v1/jobs?limit=200")
        assert answer.status == 200, answer.text
        return [job["name"] for job in answer.json["jobs"]]

    def executions(self, job_id: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The job's finished executions, once at least ``count`` are there (polls)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.call("GET", f"/v1/jobs/{job_id}/executions")
            assert answer.status == 200, answer.text
            done = [e for e in answer.json["executions"] if e["status"] != "running"]
            if len(done) >= count:
                return done
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(done)} of {count} executions of {job_id} finished")
            time.sleep(0.1)

    def run_once(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Create the job, run it now, and return its first finished execution."""
        job = self.create(spec)
        answer = self.call("POST", f"/v1/jobs/{job['id']}/run")
        assert answer.status == 202, answer.text
        return self.executions(job["id"])[0]


class Servers:
    def __init__(self, database_url: str, tmp: str, *, guard: bool, allow_list: str = ""):
        from scheduler.local import runtime as local

        credentials = os.path.join(tmp, f"credentials-{guard}.json")
        with open(credentials, "w") as f:
            json.dump(
                {
                    key: {"secret_access_key": secret, "principal": f"arn:aws:iam::000000000000:user/{name}"}
                    for name, (key, secret) in KEYS.items()
                },
                f,
            )
        self.database_url = database_url  # for a test that stores what the API would refuse
        self.port = _free_port()
        args = local.LocalOptions(
            host="127.0.0.1",
            port=self.port,
            database_url=database_url,
            data_dir=os.path.join(tmp, f"data-{guard}"),
            auth="sigv4",
            credentials_file=credentials,
            precision="second",
            runners=1,
            guard_targets=guard,
            region=REGION,
        )
        self.ready, self.stop = threading.Event(), threading.Event()
        env = {"SCHEDULER_TARGET_ALLOW_LIST": allow_list} if allow_list else {}
        with mock.patch.dict(os.environ, env):  # read once, by the settings at start
            self.thread = threading.Thread(
                target=local.serve, args=(args,), kwargs={"ready": self.ready, "stop": self.stop}, daemon=True
            )
            self.thread.start()
            assert self.ready.wait(60), "scheduler local did not start"
        self.api = Api(self.port)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    with postgres_server("sched-sec-") as url:
        yield url


def _start(pg_server: str, tmp_path_factory, label: str, **kwargs: Any) -> Iterator[Servers]:
    with temporary_database(pg_server, label=label) as url:
        servers = Servers(url, str(tmp_path_factory.mktemp(label)), **kwargs)
        try:
            yield servers
        finally:
            servers.close()


@pytest.fixture(scope="session")
def local_server(pg_server, tmp_path_factory) -> Iterator[Servers]:
    """`scheduler local --auth sigv4` (private targets allowed, as local mode allows them)."""
    yield from _start(pg_server, tmp_path_factory, "sec", guard=False)


@pytest.fixture(scope="session")
def guarded_server(pg_server, tmp_path_factory) -> Iterator[Servers]:
    """`scheduler local --auth sigv4 --guard-targets`, the name ``localhost`` allow-listed (its
    addresses are not: the allow list exempts names, not what they resolve to)."""
    yield from _start(pg_server, tmp_path_factory, "secg", guard=True, allow_list="localhost")


@pytest.fixture
def alice(local_server) -> Tenant:
    return Tenant(local_server.api, "alice", *KEYS["alice"])


@pytest.fixture
def bob(local_server) -> Tenant:
    return Tenant(local_server.api, "bob", *KEYS["bob"])


@pytest.fixture
def guarded(guarded_server) -> Tenant:
    return Tenant(guarded_server.api, "alice", *KEYS["alice"])


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


def spec(name: str, target: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A valid job spec: a one-off far in the future (run with POST .../run)."""
    return {
        "name": name,
        "run_at": "2099-01-01T00:00:00Z",
        "target": target or {"type": "http", "url": "https://example.com/hook"},
        **extra,
    }
