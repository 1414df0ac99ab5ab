"""``jobs list --all`` and ``export`` print page by page, against a live ``scheduler local`` on a
real Postgres, seen through a proxy on loopback that records the listing's requests, can hold
one back until the CLI has printed something, and can answer one with an error.

- the output is the bytes one document of every page was (JSON, YAML, the export's stream);
- a page is printed without waiting for the next (the proxy holds page k's answer until the
  CLI's output shows page k-1's last job: a CLI that waited for the last page would never get
  it), so the first line comes before the last page, and a page at a time is held;
- a listing that fails on page 7 exits non-zero with the error on stderr, and its output ends
  with ``%INCOMPLETE`` (not JSON, not YAML), which ``apply`` refuses as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from scheduler.cli.export_documents import exported, yaml_stream
from scheduler.cli.reading import yaml_text
from scheduler.local.runtime import LOCAL_PRINCIPAL
from scheduler.store.db import make_pool
from tests.support import LocalScheduler, insert_jobs_sql

pytestmark = pytest.mark.slow

GATE_TIMEOUT = 20.0


class ListingProxy:
    """A loopback proxy to the API: it counts the requests of ``GET /v1/jobs`` (the listing's
    pages, from 1), answers the ``fail_at``-th with a 500, and before answering the n-th lets
    ``before(n)`` wait (for the CLI's output). ``log``: the requests and answers in order (the
    test adds the CLI's lines as they come)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.pages = 0
        self.fail_at: int | None = None
        self.before: Callable[[int], None] = lambda n: None
        self.log: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                page = None
                if self.path.split("?")[0] == "/v1/jobs":
                    with proxy.lock:
                        proxy.pages += 1
                        page = proxy.pages
                        proxy.log.append(("request", page))
                    proxy.before(page)
                    with proxy.lock:
                        proxy.log.append(("answer", page))
                if page is not None and page == proxy.fail_at:
                    body = {"error": {"code": "internal", "message": f"injected on page {page}"}}
                    status, data, kind = 500, json.dumps(body).encode(), "application/json"
                else:
                    answer = requests.get(proxy.upstream + self.path, timeout=30)
                    status, data, kind = answer.status_code, answer.content, answer.headers.get("Content-Type", "")
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Output:
    """A CLI process's standard output as it comes (a thread reads it); ``wait_for(text)``."""

    def __init__(self, process: subprocess.Popen, log: list[tuple[str, Any]], lock: threading.Lock) -> None:
        self.text = ""
        self.cond = threading.Condition()
        self.process = process

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                with lock:
                    log.append(("line", line))
                with self.cond:
                    self.text += line
                    self.cond.notify_all()
            with self.cond:
                self.cond.notify_all()

        self.thread = threading.Thread(target=read, daemon=True)
        self.thread.start()

    def wait_for(self, text: str) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: text in self.text or self.process.poll() is not None, GATE_TIMEOUT) and (
                text in self.text
            )


@pytest.fixture
def api(db_url, tmp_path):
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    yield scheduler
    assert scheduler.stop() == 0, "".join(scheduler.lines)


@pytest.fixture
def proxy(api):
    listing = ListingProxy(api.url)
    yield listing
    listing.close()


def fill(db_url: str, count: int) -> None:
    """``count`` jobs of local mode's principal (``job-001``...), none due, made with SQL (the
    API would take a while for hundreds); one in ten with a secret-less header and tags."""
    pool = make_pool(db_url, min_size=1, max_size=1)
    with pool.connection() as conn:
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, description, tags, schedule, target, retry, state, scheduled_at, next_run_at",
                """
                SELECT gen_random_uuid(), %(owner)s, 'job-' || lpad(g::text, 3, '0'), 'ünïcode "quoted" ' || g,
                       CASE WHEN g %% 10 = 0 THEN ARRAY['tenth', 'all'] ELSE ARRAY['all'] END, '15 3 * * *',
                       jsonb_build_object('type', 'http', 'url', 'https://example.com/hook/' || g,
                                          'body', '{"n": ' || g || '}'),
                       '{"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 60}'::jsonb,
                       'active', now() + interval '300 days', now() + interval '300 days'
                FROM generate_series(1, %(count)s) AS g""",
            ),
            {"owner": LOCAL_PRINCIPAL, "count": count},
        )
    pool.close()


def start_cli(endpoint: str, *argv: str) -> subprocess.Popen:
    env = {**os.environ, "SCHEDULER_ENDPOINT": endpoint}
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


def run_cli(endpoint: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SCHEDULER_ENDPOINT": endpoint}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def every_job(api: LocalScheduler) -> list[dict[str, Any]]:
    """The jobs as the API answers them, in name order (pages of 200 followed here)."""
    jobs, cursor = [], None
    while True:
        page = requests.get(api.url + "/v1/jobs", params={"limit": 200, "cursor": cursor}, timeout=30).json()
        jobs += page["jobs"]
        cursor = page["next_cursor"]
        if not cursor:
            return jobs


def test_a_listing_of_many_pages_prints_the_bytes_of_one_document(api, db_url):
    fill(db_url, 23)
    jobs = every_job(api)
    whole = {"jobs": jobs, "next_cursor": None}
    as_json = run_cli(api.url, "jobs", "list", "--all", "--limit", "5", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout == json.dumps(whole, indent=2, ensure_ascii=False) + "\n"
    as_yaml = run_cli(api.url, "jobs", "list", "--all", "--limit", "5", "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert as_yaml.stdout == yaml_text(whole).rstrip() + "\n"
    # A table whose first page holds its widest cells (the names and URLs of job-010 on are
    # longer: --columns keeps those of one width) is the table of one page.
    table = run_cli(api.url, "jobs", "list", "--all", "--limit", "5", "--columns", "id,state,schedule")
    one_page = run_cli(api.url, "jobs", "list", "--limit", "200", "--columns", "id,state,schedule")
    assert table.returncode == 0 and table.stdout == one_page.stdout and len(table.stdout.splitlines()) == 24
    # None: the bytes of the empty listing.
    empty = run_cli(api.url, "jobs", "list", "--all", "--tag", "nobody", "-o", "json")
    assert empty.stdout == json.dumps({"jobs": [], "next_cursor": None}, indent=2) + "\n"


def test_export_of_many_pages_is_the_stream_of_every_job(api, db_url):
    fill(db_url, 450)  # three pages of 200
    documents = [exported(job)[0] for job in every_job(api)]
    as_yaml = run_cli(api.url, "export")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert as_yaml.stdout == "".join(yaml_stream(iter(documents)))
    as_json = run_cli(api.url, "export", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout == json.dumps(documents, indent=2, ensure_ascii=False) + "\n"
    tagged = run_cli(api.url, "export", "--tag", "tenth", "-o", "json")
    assert [d["name"] for d in json.loads(tagged.stdout)] == [f"job-{n:03}" for n in range(10, 451, 10)]


def _gate_on_output(proxy: ListingProxy, output: list[Output], last_of_page: Callable[[int], str]) -> list[int]:
    """Hold the n-th page's request (n > 1) until the output shows ``last_of_page(n - 1)``; the
    pages that waited in vain."""
    missed: list[int] = []

    def before(n: int) -> None:
        if n > 1 and not output[0].wait_for(last_of_page(n - 1)):
            missed.append(n)

    proxy.before = before
    return missed


def test_each_page_is_printed_without_waiting_for_the_next(api, db_url, proxy):
    fill(db_url, 30)
    output: list[Output] = []
    missed = _gate_on_output(proxy, output, lambda page: f'"name": "job-{page * 5:03}"')
    process = start_cli(proxy.url, "jobs", "list", "--all", "--limit", "5", "-o", "json")
    output.append(Output(process, proxy.log, proxy.lock))
    assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    output[0].thread.join(10)
    assert missed == [] and proxy.pages == 6
    # The log in order: each page's last job printed before the next page was answered (the
    # first line before the last page).
    log = proxy.log
    for n in range(2, 7):
        printed = next(i for i, (kind, text) in enumerate(log) if kind == "line" and f"job-{(n - 1) * 5:03}" in text)
        assert printed < log.index(("answer", n)), log
    assert json.loads(output[0].text)["jobs"][-1]["name"] == "job-030"


def test_export_prints_each_page_without_waiting_for_the_next(api, db_url, proxy):
    fill(db_url, 450)
    output: list[Output] = []
    missed = _gate_on_output(proxy, output, lambda page: f"name: job-{page * 200:03}\n")
    process = start_cli(proxy.url, "export", "--kind", "job")
    output.append(Output(process, proxy.log, proxy.lock))
    assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    assert missed == [] and proxy.pages == 3


@pytest.mark.parametrize("output", ["json", "yaml", "table"])
def test_a_listing_failing_on_page_7_exits_non_zero_and_its_output_says_it_is_cut(api, db_url, proxy, output):
    fill(db_url, 40)
    proxy.fail_at = 7
    result = run_cli(proxy.url, "jobs", "list", "--all", "--limit", "5", "-o", output)
    assert result.returncode == 5
    assert result.stderr.splitlines()[0] == "error: 500 internal: injected on page 7"
    assert proxy.pages == 7
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("%INCOMPLETE ") and "failed" in lines[-1]
    assert "job-030" in result.stdout and "job-031" not in result.stdout  # pages 1 to 6, whole
    if output == "json":
        with pytest.raises(json.JSONDecodeError):
            json.loads(result.stdout)
        with pytest.raises(json.JSONDecodeError):  # even without the last line
            json.loads("\n".join(lines[:-1]))
    if output == "yaml":
        import yaml

        with pytest.raises(yaml.YAMLError):
            yaml.safe_load(result.stdout)


def test_an_export_cut_short_is_refused_by_apply(api, db_url, proxy, tmp_path):
    fill(db_url, 450)
    proxy.fail_at = 2
    for output, suffix in (("yaml", "yaml"), ("json", "json")):
        proxy.pages = 0
        result = run_cli(proxy.url, "export", "-o", output)
        assert result.returncode == 5 and "error: 500 internal: injected on page 2" in result.stderr
        assert result.stdout.count("name: job-") == 200 or result.stdout.count('"name": "job-') == 200
        path = tmp_path / f"cut.{suffix}"
        path.write_text(result.stdout, encoding="utf-8")
        applied = run_cli(api.url, "apply", "-f", str(path), "--dry-run")
        assert applied.returncode == 2
        assert f"{path}: the output of an export that failed midway" in applied.stderr
        # Without the line, still no whole document: JSON's array is open.
        if output == "json":
            path.write_text(result.stdout.rsplit("%INCOMPLETE", 1)[0], encoding="utf-8")
            assert "not valid JSON" in run_cli(api.url, "apply", "-f", str(path), "--dry-run").stderr


def test_export_names_a_chain_to_a_job_of_another_page_and_says_which_ids_name_none(api, db_url, proxy):
    fill(db_url, 250)  # two pages of 200 (with the jobs below)
    target = next(job for job in every_job(api) if job["name"] == "job-250")
    gone = api.post(
        "/v1/jobs", {"name": "zz-gone", "schedule": "@daily", "target": {"type": "http", "url": "http://127.0.0.1:9/g"}}
    )
    spec = {"schedule": "@daily", "target": {"type": "http", "url": "http://127.0.0.1:9/c"}}
    api.post("/v1/jobs", {**spec, "name": "aaa-chainer", "on_success": [target["id"]], "on_failure": [gone["id"]]})
    api.post("/v1/jobs", {**spec, "name": "aab-chainer", "on_complete": ["aaa-chainer"]})
    assert requests.delete(f"{api.url}/v1/jobs/{gone['id']}", timeout=10).status_code == 204
    result = run_cli(proxy.url, "export", "--kind", "job", "-o", "json")
    assert result.returncode == 0, result.stderr
    documents = {d["name"]: d for d in json.loads(result.stdout)}
    assert documents["aaa-chainer"]["on_success"] == ["job-250"]  # by name, from page 2
    assert documents["aaa-chainer"]["on_failure"] == [gone["id"]]  # names no job: kept, and said
    assert documents["aab-chainer"]["on_complete"] == ["aaa-chainer"]
    assert f"export: chains name jobs that no longer exist: {gone['id']}" in result.stderr
    assert proxy.pages == 4  # the export's two pages, and one listing of every job's name (two pages)


def test_a_reader_that_goes_away_ends_a_listing_without_a_traceback(api, db_url):
    fill(db_url, 600)
    command = f"{sys.executable} -m scheduler.cli --endpoint {api.url} jobs list --all --limit 20 -o json | head -n 2"
    answer = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120)
    assert answer.returncode == 0 and answer.stdout == '{\n  "jobs": [\n' and answer.stderr == "", answer.stderr
