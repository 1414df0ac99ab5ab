"""A LocalStack Lambda runtime executor that runs each execution environment as a host process.

LocalStack's free edition runs functions only in Docker containers it starts (and downloads a
runtime-init binary for them). Selected with ``LAMBDA_RUNTIME_EXECUTOR=host``, this executor runs
``runtime.py`` instead, with the interpreter named for the function's runtime in
``SCHEDULER_LAMBDA_PYTHONS`` (JSON: ``{"python3.13": "/path/to/bin/python"}``), on a free port of
127.0.0.1, with the function's environment and its unzipped code as ``LAMBDA_TASK_ROOT``. The
process reports back to LocalStack's executor endpoint exactly as the container's init does.

Each environment's output goes to ``<SCHEDULER_LAMBDA_LOG_DIR>/<function>-<id>.log`` (default:
the temp dir), which also gives LocalStack the environment's logs.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import tempfile
from pathlib import Path

from localstack import config
from localstack.services.lambda_.invocation.executor_endpoint import ExecutorEndpoint
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin
from localstack.services.lambda_.invocation.runtime_executor import LambdaRuntimeException, RuntimeExecutor

LOG = logging.getLogger(__name__)

RUNTIME_SCRIPT = Path(__file__).with_name("runtime.py")
LOOPBACK = "127.0.0.1"
# The host's own environment the functions keep (Lambda sets a PATH and a locale too).
_HOST_VARIABLES = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")


def interpreters() -> dict[str, str]:
    """The interpreter of each Lambda runtime this machine can run (``SCHEDULER_LAMBDA_PYTHONS``)."""
    raw = os.environ.get("SCHEDULER_LAMBDA_PYTHONS") or "{}"
    try:
        found = json.loads(raw)
    except ValueError as error:
        raise LambdaRuntimeException(f"SCHEDULER_LAMBDA_PYTHONS is not JSON: {error}") from None
    if not isinstance(found, dict):
        raise LambdaRuntimeException("SCHEDULER_LAMBDA_PYTHONS must map runtimes to interpreters")
    return {str(runtime): str(path) for runtime, path in found.items()}


def interpreter_for(runtime: str | None) -> str:
    """The host interpreter that runs functions of ``runtime``, or a clear error."""
    known = interpreters()
    if runtime not in known:
        raise LambdaRuntimeException(
            f"no host interpreter for the Lambda runtime {runtime!r}: this machine runs "
            f"{', '.join(sorted(known)) or 'none'} (SCHEDULER_LAMBDA_PYTHONS)"
        )
    return known[runtime]


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


class HostExecutor(RuntimeExecutor):
    """One execution environment: a host process speaking LocalStack's executor protocol."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.port = free_port()
        self.executor_endpoint = ExecutorEndpoint(self.id, container_address=LOOPBACK, container_port=self.port)
        self.process: subprocess.Popen[bytes] | None = None
        log_dir = Path(os.environ.get("SCHEDULER_LAMBDA_LOG_DIR") or tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{function_version.id.function_name}-{self.id}.log"

    def start(self, env_vars: dict[str, str]) -> None:
        self.executor_endpoint.start()
        code = self.function_version.config.code
        if code is None:
            raise LambdaRuntimeException("container image functions are not supported by the host executor")
        code.prepare_for_execution()
        python = interpreter_for(self.function_version.config.runtime)
        environment = {name: os.environ[name] for name in _HOST_VARIABLES if name in os.environ}
        environment.update({key: str(value) for key, value in env_vars.items()})
        environment.update(
            {
                "LAMBDA_TASK_ROOT": str(code.get_unzipped_code_location()),
                "SCHEDULER_LAMBDA_PORT": str(self.port),
                "SCHEDULER_LAMBDA_LOG": str(self.log_path),
                "PYTHONUNBUFFERED": "1",
            }
        )
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [python, "-s", str(RUNTIME_SCRIPT)],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=environment["LAMBDA_TASK_ROOT"],
            )
        LOG.debug(
            "execution environment %s of %s: pid %s, port %s",
            self.id,
            self.function_version.id.function_name,
            self.process.pid,
            self.port,
        )
        self.executor_endpoint.wait_for_startup()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        try:
            self.executor_endpoint.shutdown()
        except Exception as error:
            LOG.debug("executor endpoint %s: %s", self.id, error)

    def get_address(self) -> str:
        return LOOPBACK

    def get_endpoint_from_executor(self) -> str:
        return LOOPBACK

    def get_runtime_endpoint(self) -> str:
        port = config.GATEWAY_LISTEN[0].port
        return f"http://{LOOPBACK}:{port}{self.executor_endpoint.get_endpoint_prefix()}"

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        return self.executor_endpoint.invoke(payload)

    def get_logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        # Unzip only: no image to pull, no runtime-init binary to download.
        if function_version.config.code is not None:
            function_version.config.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        return True


class HostExecutorPlugin(RuntimeExecutorPlugin):
    """``LAMBDA_RUNTIME_EXECUTOR=host``."""

    name = "host"

    def load(self, *args: object, **kwargs: object) -> type[RuntimeExecutor]:
        return HostExecutor
