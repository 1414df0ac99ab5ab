"""One Lambda execution environment as a host process: LocalStack's side of the executor protocol.

Started by ``executor.HostExecutor`` with the interpreter of the function's runtime (a
virtualenv holding what the Lambda runtime holds: boto3), the function's environment, and:

- ``LAMBDA_TASK_ROOT``: the unzipped code, first on ``sys.path`` as ``/var/task`` is in Lambda;
- ``SCHEDULER_LAMBDA_PORT``: where to serve ``POST /invoke`` (on 127.0.0.1 only);
- ``SCHEDULER_LAMBDA_LOG``: the file this process's stdout and stderr go to; each invoke's
  slice of it is posted as that invoke's logs;
- ``LOCALSTACK_RUNTIME_ENDPOINT`` and ``LOCALSTACK_RUNTIME_ID``: where to report.

The protocol: load ``_HANDLER`` and post ``status/<id>/ready`` (or ``status/<id>/error`` when the
import fails); for every invoke LocalStack posts (``invoke-id``, ``invoked-function-arn``,
``payload``, ``trace-id``), answer 200 at once, run the handler, post the invoke's logs to
``invocations/<id>/logs``, then its result to ``invocations/<id>/response`` or the error to
``invocations/<id>/error``. A handler running past the function's timeout is answered with
Lambda's timeout error; the environment goes on serving (a thread cannot be killed).

Standard library only: this file runs under the function's interpreter, not LocalStack's.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import sys
import threading
import time
import traceback
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _post(url: str, body: Any) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    # LocalStack listens on loopback: no proxy, whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as answer:
        answer.read()


def _error_body(error: BaseException) -> dict[str, Any]:
    return {
        "errorMessage": str(error),
        "errorType": type(error).__name__,
        "stackTrace": traceback.format_exception(error),
    }


class Context:
    """The ``context`` argument of a Lambda handler."""

    def __init__(self, invoke: dict[str, Any], timeout_seconds: float) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = invoke.get("invoked-function-arn", "")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.aws_request_id = invoke.get("invoke-id", "")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class _Logs:
    """Each invoke's part of the log file this process writes to."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._offset = 0

    def mark(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        if self._path:
            self._offset = os.path.getsize(self._path)

    def since_mark(self) -> str:
        sys.stdout.flush()
        sys.stderr.flush()
        if not self._path:
            return ""
        with open(self._path, "rb") as log:
            log.seek(self._offset)
            return log.read().decode("utf-8", "replace")


def _load_handler(spec: str) -> Any:
    module_name, _, function_name = spec.rpartition(".")
    if not module_name:
        raise ValueError(f"handler {spec!r} is not module.function")
    module = importlib.import_module(module_name.replace("/", "."))
    return getattr(module, function_name)


def _serve(port: int, invokes: queue.Queue[dict[str, Any]]) -> None:
    class InvokeHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/invoke":
                self.send_response(404)
                self.end_headers()
                return
            invokes.put(json.loads(body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:  # quiet: the log file is the function's
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), InvokeHandler)
    threading.Thread(target=server.serve_forever, name="invoke-server", daemon=True).start()


def _run(handler: Any, invoke: dict[str, Any], timeout_seconds: float, logs: _Logs, endpoint: str) -> None:
    request_id = invoke["invoke-id"]
    os.environ["_X_AMZN_TRACE_ID"] = invoke.get("trace-id") or ""
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            event = json.loads(invoke.get("payload") or "null")
            outcome["result"] = handler(event, Context(invoke, timeout_seconds))
        except BaseException as error:  # the handler's failure is the invoke's answer
            outcome["error"] = error

    logs.mark()
    print(f"START RequestId: {request_id}", flush=True)
    worker = threading.Thread(target=call, name=f"invoke-{request_id}", daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(timeout_seconds)
    took_ms = (time.monotonic() - started) * 1000
    print(f"END RequestId: {request_id}\nREPORT RequestId: {request_id}\tDuration: {took_ms:.2f} ms", flush=True)
    _post(f"{endpoint}/invocations/{request_id}/logs", {"logs": logs.since_mark()})
    if worker.is_alive():
        body: Any = {
            "errorMessage": f"Task timed out after {timeout_seconds:.2f} seconds",
            "errorType": "Sandbox.Timedout",
        }
        _post(f"{endpoint}/invocations/{request_id}/error", body)
    elif "error" in outcome:
        _post(f"{endpoint}/invocations/{request_id}/error", _error_body(outcome["error"]))
    else:
        _post(f"{endpoint}/invocations/{request_id}/response", json.dumps(outcome.get("result")).encode())


def main() -> int:
    """Serve invokes until LocalStack stops this process."""
    endpoint = os.environ["LOCALSTACK_RUNTIME_ENDPOINT"].rstrip("/")
    runtime_id = os.environ["LOCALSTACK_RUNTIME_ID"]
    task_root = os.environ["LAMBDA_TASK_ROOT"]
    timeout_seconds = float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT") or 3)
    # As in Lambda: the code first, and not this file's folder (a script's own folder leads sys.path).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [task_root, *(entry for entry in sys.path if os.path.abspath(entry or ".") != here)]
    os.chdir(task_root)
    invokes: queue.Queue[dict[str, Any]] = queue.Queue()
    _serve(int(os.environ["SCHEDULER_LAMBDA_PORT"]), invokes)
    try:
        handler = _load_handler(os.environ["_HANDLER"])
    except BaseException as error:
        traceback.print_exc()
        _post(f"{endpoint}/status/{runtime_id}/error", _error_body(error))
        return 1
    logs = _Logs(os.environ.get("SCHEDULER_LAMBDA_LOG"))
    _post(f"{endpoint}/status/{runtime_id}/ready", {})
    while True:
        _run(handler, invokes.get(), timeout_seconds, logs, endpoint)


if __name__ == "__main__":
    sys.exit(main())
