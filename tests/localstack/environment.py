"""The scheduler's stack deployed on LocalStack, on this machine, without Docker.

``make localstack`` (``python -m tests.localstack up``) and the deployed-stack tests use this:

1. a virtualenv of a Python >= 3.12 found on the machine (LocalStack 2026.3 does not load on
   3.11), with LocalStack (``requirements.txt``, every package pinned by ``constraints.txt``)
   and this project's LocalStack plugins (``plugin/``: the host-process Lambda executor and the
   custom-resource provider); a second, small one of the same Python holds what the Lambda
   runtime provides (boto3) for the functions' processes;
2. LocalStack started on 127.0.0.1 (``GATEWAY_SERVER=hypercorn``: the default server binds
   0.0.0.0 whatever the address says), its state, temp files and caches under ``home``;
3. ``cdk bootstrap`` and ``cdk deploy -c localstack=true`` against it (plain ``cdk`` with
   ``AWS_ENDPOINT_URL``), the functions built for that Python, the host's PostgreSQL and RabbitMQ
   as the stack's parameters;
4. ``down``: ``cdk destroy``, then LocalStack and every process it started stopped.

Everything it writes is under ``home`` (default ``.localstack/`` in the project) or the temp dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_HOME = ROOT / ".localstack"
PLUGIN_DIR = HERE / "plugin"
MIN_PYTHON = (3, 12)
# LocalStack's region and account for the default credentials (test / test).
REGION = "us-east-1"
ACCOUNT = "000000000000"
ACCESS_KEY = SECRET_KEY = "test"
DEFAULT_PORT = 4566
DEFAULT_STACK = "Scheduler"
DEFAULT_DATABASE = "scheduler_localstack"
DEFAULT_BROKER_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
START_TIMEOUT = 120.0
#: Seconds each step took, reported at the end of a test run (tests/localstack/conftest.py).
TIMINGS: dict[str, float] = {}
CDK_TIMEOUT = 900.0


class LocalStackError(RuntimeError):
    """What stopped the deployment, in one line a user can act on."""


def _python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def _candidates() -> Iterator[str]:
    if os.environ.get("LOCALSTACK_PYTHON"):
        yield os.environ["LOCALSTACK_PYTHON"]
        return
    for name in ("python3.13", "python3.12", "python3.14"):
        found = shutil.which(name)
        if found:
            yield found
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for version in sorted(pyenv.glob("3.1[2-9]*"), reverse=True):
        yield str(version / "bin" / "python")
    yield sys.executable


def find_python() -> tuple[str, tuple[int, int]]:
    """An interpreter of Python 3.12 or 3.13 (3.14 last) on this machine, and its version."""
    for python in _candidates():
        version = _python_version(python)
        if version and MIN_PYTHON <= version:
            return python, version
    raise LocalStackError(
        "LocalStack needs Python 3.12 or newer and none was found "
        "(install one, e.g. `pyenv install 3.13`, or name it with LOCALSTACK_PYTHON=/path/to/python3.13)"
    )


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def _digest(*paths: Path, extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        for file in sorted(path.rglob("*") if path.is_dir() else [path]):
            if file.is_file() and "egg-info" not in str(file) and "__pycache__" not in str(file):
                digest.update(str(file.relative_to(path.parent)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours counts as gone.
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


@dataclass(frozen=True)
class Deployment:
    """A deployed stack: its API's base URL and every output, and the endpoint it talks to."""

    api_url: str
    outputs: dict[str, str]
    endpoint: str
    region: str
    stack_name: str
    database_url: str
    deploy_seconds: float


class LocalStack:
    """LocalStack on ``127.0.0.1:port``: its virtualenvs under ``home``, shared by every instance
    (``make localstack``'s and the tests'), its state under ``home/instance``."""

    def __init__(
        self,
        home: Path = DEFAULT_HOME,
        *,
        instance: str = "default",
        port: int = DEFAULT_PORT,
        stack_name: str = DEFAULT_STACK,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.home = Path(home)
        self.state = self.home / instance
        self.port = port
        self.stack_name = stack_name
        self.endpoint = f"http://127.0.0.1:{port}"
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._python: tuple[str, tuple[int, int]] | None = None

    # -- paths -----------------------------------------------------------------------------------

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def lambda_venv(self) -> Path:
        return self.home / "lambda-runtime"

    @property
    def pid_file(self) -> Path:
        return self.state / "localstack.pid"

    @property
    def log_file(self) -> Path:
        return self.state / "localstack.log"

    @property
    def lambda_logs(self) -> Path:
        return self.state / "lambda-logs"

    @property
    def outputs_file(self) -> Path:
        return self.state / "outputs.json"

    # -- the interpreters ------------------------------------------------------------------------

    def python(self) -> tuple[str, tuple[int, int]]:
        """The host interpreter LocalStack and the functions run with."""
        if self._python is None:
            self._python = find_python()
        return self._python

    @property
    def lambda_runtime(self) -> str:
        """The Lambda runtime the functions are deployed with: the host interpreter's version."""
        major, minor = self.python()[1]
        return f"python{major}.{minor}"

    def install(self) -> None:
        """Both virtualenvs, made again when their requirements or the plugins change."""
        python, version = self.python()
        self.home.mkdir(parents=True, exist_ok=True)
        wanted = _digest(
            HERE / "requirements.txt", HERE / "constraints.txt", PLUGIN_DIR / "pyproject.toml", extra=str(version)
        )
        self._venv(
            self.venv,
            python,
            wanted,
            [
                ["-r", str(HERE / "requirements.txt"), "-c", str(HERE / "constraints.txt")],
                ["--no-deps", "-e", str(PLUGIN_DIR)],
            ],
        )
        runtime_wanted = _digest(HERE / "lambda-requirements.txt", extra=str(version))
        self._venv(self.lambda_venv, python, runtime_wanted, [["-r", str(HERE / "lambda-requirements.txt")]])

    def _venv(self, path: Path, python: str, fingerprint: str, installs: list[list[str]]) -> None:
        stamp = path / ".fingerprint"
        if stamp.is_file() and stamp.read_text().strip() == fingerprint:
            return
        self._log(f"localstack: installing {path.name} ({python})")
        if path.exists():
            shutil.rmtree(path)
        self._run([python, "-m", "venv", str(path)], "create the virtualenv")
        pip = [str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        for arguments in installs:
            self._run([*pip, *arguments], f"install {' '.join(arguments)}", timeout=900)
        stamp.write_text(fingerprint + "\n")

    # -- LocalStack itself -----------------------------------------------------------------------

    def healthy(self) -> bool:
        """Whether LocalStack answers its health check on this port."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/_localstack/health", timeout=2) as answer:
                return answer.status == 200 and "services" in json.loads(answer.read())
        except (OSError, ValueError):
            return False

    def _environment(self) -> dict[str, str]:
        state = self.state / "state"
        tmp = self.state / "tmp"
        for folder in (state, tmp, self.lambda_logs, self.state / "cache"):
            folder.mkdir(parents=True, exist_ok=True)
        python = str(self.lambda_venv / "bin" / "python")
        return {
            **os.environ,
            # Not in a container: its state, temp files and unzipped functions go under home.
            "OVERRIDE_IN_DOCKER": "0",
            "FILESYSTEM_ROOT": str(state),
            "TMPDIR": str(tmp),
            "XDG_CACHE_HOME": str(self.state / "cache"),
            # hypercorn binds the address given; the default server binds 0.0.0.0 whatever it says.
            "GATEWAY_LISTEN": f"127.0.0.1:{self.port}",
            "GATEWAY_SERVER": "hypercorn",
            "DNS_ADDRESS": "0",
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            "DISABLE_EVENTS": "1",
            # Functions run as host processes (plugin/scheduler_localstack/executor.py).
            "LAMBDA_RUNTIME_EXECUTOR": "host",
            "SCHEDULER_LAMBDA_PYTHONS": json.dumps({self.lambda_runtime: python}),
            "SCHEDULER_LAMBDA_LOG_DIR": str(self.lambda_logs),
            # Idle environments end after two minutes (default ten), so fewer processes linger.
            "LAMBDA_KEEPALIVE_MS": "120000",
        }

    def start(self) -> None:
        """Start LocalStack in the background (its own process group), or find it running."""
        if self.healthy():
            if self._pid() is None:
                raise LocalStackError(
                    f"something else answers as LocalStack on {self.endpoint}: stop it, or choose another port"
                )
            return
        if listening(self.port):
            raise LocalStackError(f"port {self.port} of 127.0.0.1 is taken by another program")
        self.install()
        self._log(f"localstack: starting on {self.endpoint}")
        self.state.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(
                [str(self.venv / "bin" / "python"), "-m", "localstack.runtime.main"],
                env=self._environment(),
                cwd=self.state,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{process.pid}\n")
        deadline = time.monotonic() + START_TIMEOUT
        while not self.healthy():
            if process.poll() is not None:
                raise LocalStackError(f"LocalStack exited at start (code {process.returncode}); see {self.log_file}")
            if time.monotonic() > deadline:
                self.stop()
                raise LocalStackError(f"LocalStack did not answer within {START_TIMEOUT:.0f} s; see {self.log_file}")
            time.sleep(0.5)

    def _pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _pid_alive(pid) else None

    def stop(self) -> None:
        """Stop LocalStack and everything it started (its process group: the functions' processes)."""
        pid = self._pid()
        if pid is not None:
            self._log("localstack: stopping")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        deadline = time.monotonic() + 10
        while listening(self.port) and time.monotonic() < deadline:
            time.sleep(0.2)

    # -- the stack -------------------------------------------------------------------------------

    def aws_environment(self) -> dict[str, str]:
        """The environment of an AWS client (or ``cdk``) talking to this LocalStack."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("AWS_") and key not in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")
        }
        env.update(
            {
                "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_ENDPOINT_URL": self.endpoint,
                # The CDK CLI's caches and notices stay under home.
                "CDK_HOME": str(self.state / "cdk-home"),
                "CDK_DISABLE_VERSION_CHECK": "1",
            }
        )
        return env

    def _cdk(self, *arguments: str, what: str) -> str:
        cdk = ROOT / "node_modules" / ".bin" / "cdk"
        if not cdk.exists():
            raise LocalStackError("the CDK CLI is not installed: run `make install` (npm ci) first")
        return self._run([str(cdk), *arguments, "--no-notices"], what, env=self.aws_environment(), timeout=CDK_TIMEOUT)

    def context(self) -> list[str]:
        """The ``-c`` options of this stack's variant."""
        options = {
            "localstack": "true",
            "localstack_endpoint": self.endpoint,
            "python_version": self.lambda_runtime.removeprefix("python"),
            "stack_name": self.stack_name,
            # A throw-away stack: destroy removes its keys and logs too.
            "deletion_protection": "false",
            "removal_policy": "destroy",
        }
        return [item for key, value in options.items() for item in ("-c", f"{key}={value}")]

    def bootstrap(self) -> None:
        """``cdk bootstrap`` of LocalStack's account and region (once per LocalStack state)."""
        self._cdk(
            "bootstrap",
            f"aws://{ACCOUNT}/{REGION}",
            *self.context(),
            "--output",
            str(self.state / "cdk.out"),
            what="cdk bootstrap",
        )

    def deploy(self, database_url: str, broker_url: str = "") -> Deployment:
        """``cdk deploy`` of the LocalStack variant; its outputs."""
        started = time.monotonic()
        self._cdk(
            "deploy",
            self.stack_name,
            *self.context(),
            "--require-approval",
            "never",
            "--parameters",
            f"{self.stack_name}:DatabaseUrl={database_url}",
            "--parameters",
            f"{self.stack_name}:BrokerUrl={broker_url}",
            "--outputs-file",
            str(self.outputs_file),
            "--output",
            str(self.state / "cdk.out"),
            what="cdk deploy",
        )
        seconds = time.monotonic() - started
        outputs = json.loads(self.outputs_file.read_text()).get(self.stack_name, {})
        return Deployment(
            api_url=outputs["ApiUrl"],
            outputs=outputs,
            endpoint=self.endpoint,
            region=REGION,
            stack_name=self.stack_name,
            database_url=database_url,
            deploy_seconds=seconds,
        )

    def deploy_app(
        self, app: str, stack_name: str, context: dict[str, str], parameters: dict[str, str] | None = None
    ) -> dict[str, str]:
        """``cdk deploy`` of another CDK app (``app``: its command) on this LocalStack, such as a
        user's stack of ``Job`` constructs; its outputs."""
        outputs_file = self.state / f"outputs-{stack_name}.json"
        options = [item for key, value in context.items() for item in ("-c", f"{key}={value}")]
        for key, value in (parameters or {}).items():
            options += ["--parameters", f"{stack_name}:{key}={value}"]
        self._cdk(
            "deploy", stack_name, "--app", app, *options, "--require-approval", "never",
            "--outputs-file", str(outputs_file), "--output", str(self.state / f"cdk.out-{stack_name}"),
            what=f"cdk deploy {stack_name}",
        )  # fmt: skip
        return json.loads(outputs_file.read_text()).get(stack_name, {})

    def destroy_app(self, app: str, stack_name: str, context: dict[str, str]) -> None:
        """``cdk destroy`` of a stack of another CDK app (see ``deploy_app``)."""
        options = [item for key, value in context.items() for item in ("-c", f"{key}={value}")]
        self._cdk(
            "destroy", stack_name, "--app", app, *options, "--force",
            "--output", str(self.state / f"cdk.out-{stack_name}"), what=f"cdk destroy {stack_name}",
        )  # fmt: skip

    def destroy(self) -> None:
        """``cdk destroy`` of the stack (nothing to do when LocalStack is not running)."""
        if not self.healthy():
            return
        self._cdk(
            "destroy",
            self.stack_name,
            *self.context(),
            "--force",
            "--output",
            str(self.state / "cdk.out"),
            what="cdk destroy",
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _run(self, command: list[str], what: str, *, env: dict[str, str] | None = None, timeout: float = 600) -> str:
        try:
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise LocalStackError(f"{what} did not finish within {timeout:.0f} s") from None
        except OSError as error:
            raise LocalStackError(f"{what}: {error}") from None
        if done.returncode != 0:
            log = self.state / f"{re.sub(r'[^a-z]+', '-', what.lower()).strip('-')}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(done.stdout + "\n" + done.stderr)
            tail = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()][-12:]
            raise LocalStackError(f"{what} failed (exit {done.returncode}); the end of its output:\n" + "\n".join(tail))
        return done.stdout


def database_for(server_url: str, name: str = DEFAULT_DATABASE) -> str:
    """The URL of database ``name`` on the PostgreSQL server of ``server_url``, created if absent."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as error:
        raise LocalStackError(
            f"cannot reach PostgreSQL at {_where(server_url)}: {str(error).strip().splitlines()[0]}"
        ) from None
    params = conninfo_to_dict(make_conninfo(server_url, dbname=name))
    return _as_url(params)


def drop_database(server_url: str, name: str = DEFAULT_DATABASE) -> None:
    """Drop database ``name`` of the server (the stack's data), and the roles made for it
    (migration 0011's application role: roles outlive databases)."""
    import psycopg
    import psycopg.sql

    from scheduler.store.migrations import database_roles

    with contextlib.suppress(psycopg.Error), psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
        roles = database_roles(conn, name)
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for role in roles:
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(role)))


def _as_url(params: dict[str, Any]) -> str:
    """A ``postgresql://`` URL of conninfo parameters (the stack's parameter is a URL)."""
    from urllib.parse import quote

    user = quote(str(params.get("user") or "postgres"), safe="")
    password = f":{quote(str(params['password']), safe='')}" if params.get("password") else ""
    host = str(params.get("host") or "127.0.0.1")
    query = ""
    if host.startswith("/"):  # a unix socket directory (an embedded PostgreSQL)
        query, host = f"?host={quote(host, safe='')}", ""
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{password}@{host}{port}/{quote(str(params['dbname']), safe='')}{query}"


def _where(url: str) -> str:
    return url.split("@")[-1]


def broker_reachable(url: str = DEFAULT_BROKER_URL) -> bool:
    """Whether the RabbitMQ of ``url`` accepts TCP connections (its port is open)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return listening(parts.port or 5672, parts.hostname or "127.0.0.1")
