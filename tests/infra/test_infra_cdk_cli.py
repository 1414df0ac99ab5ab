"""``npx cdk synth`` as a user runs it: the pinned CLI, cdk.json, offline.

Needs ``node_modules`` (``npm ci``); skipped without it. Where the test may create a network
namespace (root, ``unshare``), the CLI runs with no network at all.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"
# With localstack=true the functions default to the host's architecture.
HOST_ARCHITECTURE = "arm64" if platform.machine().lower() in {"arm64", "aarch64"} else "x86_64"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CDK.exists(), reason="node_modules absent: run `npm ci` (make install-cdk)"),
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
]


def offline_prefix() -> list[str]:
    """``unshare -n`` when this process may create a network namespace, else nothing."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)
    return [unshare, "-n"] if probe.returncode == 0 else []


def run_cdk(*args: str, outdir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    command = [
        *offline_prefix(), str(CDK), "synth", "--quiet", "--no-notices",
        "--app", f"{sys.executable} app.py", "--output", str(outdir), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize(
    ("args", "architecture", "expected", "absent"),
    [
        ((), "arm64", {"AWS::RDS::DBProxy", "AWS::AmazonMQ::Broker", "AWS::Lambda::LayerVersion"}, set()),
        (
            ("-c", "localstack=true"),
            HOST_ARCHITECTURE,
            {"AWS::ApiGateway::RestApi", "AWS::Lambda::Function"},
            {"AWS::RDS::DBInstance", "AWS::EC2::VPC", "AWS::Lambda::LayerVersion"},
        ),
        (
            ("-c", "database=aurora-serverless"),
            "arm64",
            {"AWS::RDS::DBCluster", "AWS::RDS::DBInstance", "AWS::RDS::DBProxy"},
            set(),
        ),
    ],
    ids=["aws", "localstack", "aurora"],
)
def test_cdk_synth_offline(tmp_path, args, architecture, expected, absent):
    from infra.shared import layer_build

    # The layer is the one input fetched from PyPI (``make layer``); everything else is offline.
    layer_build.build_layer(layer_build.DEFAULT_PYTHON_VERSION, architecture)
    result = run_cdk(*args, outdir=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    template = json.loads((tmp_path / "Scheduler.template.json").read_text())
    types = {resource["Type"] for resource in template["Resources"].values()}
    assert expected <= types
    assert not (absent & types)
