"""The dependency layer: Linux wheels for the Lambda runtime's Python and architecture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.shared import LAYERS_DIR, layer_build

PYTHON = layer_build.DEFAULT_PYTHON_VERSION
ARCHITECTURE = layer_build.DEFAULT_ARCHITECTURE
MACHINE = layer_build.MACHINES[ARCHITECTURE]
CPYTHON = "cp" + PYTHON.replace(".", "")


@pytest.fixture(scope="session")
def layer() -> Path:
    """The built layer (built here if the synthesis has not done it yet: the result is cached)."""
    return layer_build.build_layer(PYTHON, ARCHITECTURE) / "python"


def wheel_tags(site: Path) -> dict[str, list[str]]:
    """Distribution -> the tags of the wheel it was installed from (``*.dist-info/WHEEL``)."""
    tags = {}
    for wheel in site.glob("*.dist-info/WHEEL"):
        tags[wheel.parent.name.split("-")[0]] = re.findall(r"^Tag: (\S+)$", wheel.read_text(), re.MULTILINE)
    return tags


def test_compiled_modules_match_the_runtime(layer):
    suffix = f".cpython-{PYTHON.replace('.', '')}-{MACHINE}-linux-gnu.so"
    assert (layer / "psycopg_binary" / f"_psycopg{suffix}").is_file()
    assert (layer / "pydantic_core" / f"_pydantic_core{suffix}").is_file()
    other = "x86_64" if MACHINE == "aarch64" else "aarch64"
    assert not list(layer.rglob(f"*{other}-linux-gnu.so"))
    assert not list(layer.rglob("*darwin*.so")) and not list(layer.rglob("*.pyd"))


def test_every_binary_wheel_is_manylinux_for_the_architecture(layer):
    tags = wheel_tags(layer)
    assert {"psycopg_binary", "pydantic_core", "cryptography"} <= set(tags)
    for distribution, wheel in tags.items():
        assert wheel, distribution
        for tag in wheel:
            interpreter, abi, platform = tag.split("-")
            if platform == "any":
                continue
            assert re.fullmatch(rf"manylinux(2014|_2_\d+)_{MACHINE}", platform), (distribution, tag)
            assert interpreter == CPYTHON or abi == "abi3", (distribution, tag)


def test_the_runtime_sdk_is_not_shipped(layer):
    for name in ("boto3", "botocore", "s3transfer"):
        assert not (layer / name).exists(), name
        assert not list(layer.glob(f"{name}-*.dist-info")), name


def test_requirements_follow_the_project_dependencies_minus_the_sdk():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((LAYERS_DIR.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = sorted(d for d in project if not d.startswith(("boto3", "botocore")))
    lines = (LAYERS_DIR / "requirements.txt").read_text().splitlines()
    pinned = sorted(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    assert pinned == wanted


def test_build_is_skipped_when_nothing_changed(layer):
    stamp = layer.parent.with_name(layer.parent.name + ".fingerprint")
    before = (stamp.stat().st_mtime_ns, layer.stat().st_mtime_ns)
    assert layer_build.build_layer(PYTHON, ARCHITECTURE) == layer.parent
    assert (stamp.stat().st_mtime_ns, layer.stat().st_mtime_ns) == before


def test_fingerprint_covers_the_inputs(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pika>=1.3,<2\n")
    base = layer_build.fingerprint(PYTHON, "arm64", requirements)
    assert layer_build.fingerprint(PYTHON, "x86_64", requirements) != base
    assert layer_build.fingerprint("3.12", "arm64", requirements) != base
    requirements.write_text("pika>=1.3,<2\ncroniter\n")
    assert layer_build.fingerprint(PYTHON, "arm64", requirements) != base


def test_platform_tags_cover_manylinux2014_up_to_the_runtime_glibc():
    tags = layer_build.platform_tags("x86_64")
    assert tags[0] == "manylinux_2_34_x86_64"
    assert "manylinux_2_17_x86_64" in tags and "manylinux2014_x86_64" in tags
    assert all(tag.endswith("_aarch64") for tag in layer_build.platform_tags("arm64"))
    with pytest.raises(ValueError):
        layer_build.platform_tags("ppc64le")


def test_check_layer_rejects_the_wrong_architecture(layer):
    wrong = "x86_64" if ARCHITECTURE == "arm64" else "arm64"
    with pytest.raises(RuntimeError, match="lacks"):
        layer_build.check_layer(layer.parent, PYTHON, wrong)


def test_the_layer_ships_bytecode_for_the_runtime(layer):
    """/opt is read-only on Lambda: without .pyc files each cold start compiles what it imports."""
    if layer_build.runtime_interpreter(PYTHON) is None:
        pytest.skip(f"no Python {PYTHON} interpreter here to compile with")
    tag = f"cpython-{PYTHON.replace('.', '')}"
    for name in ("pydantic", "psycopg", "aws_lambda_powertools"):
        assert (layer / name / "__pycache__" / f"__init__.{tag}.pyc").is_file(), name
    # unchecked-hash: the source is not consulted, so neither the zip's dates nor a writable cache matter.
    header = (layer / "pydantic" / "__pycache__" / f"__init__.{tag}.pyc").read_bytes()[4:8]
    assert int.from_bytes(header, "little") == 0b01


def test_the_code_asset_ships_bytecode_and_no_leftovers(tmp_path):
    functions = tmp_path / "functions"
    (functions / "scheduler" / "__pycache__").mkdir(parents=True)
    (functions / "scheduler" / "__init__.py").write_text("")
    (functions / "scheduler" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"old")
    (functions / "x.egg-info").mkdir()
    (functions / "api_handler.py").write_text("VALUE = 1\n")
    built = layer_build.build_code(PYTHON, functions, tmp_path / "asset")
    assert built == tmp_path / "asset"
    assert (built / "api_handler.py").read_text() == "VALUE = 1\n"
    assert not (built / "x.egg-info").exists()
    assert not (built / "scheduler" / "__pycache__" / "stale.cpython-311.pyc").exists()
    if layer_build.runtime_interpreter(PYTHON) is not None:
        tag = f"cpython-{PYTHON.replace('.', '')}"
        assert (built / "__pycache__" / f"api_handler.{tag}.pyc").is_file()
        assert (built / "scheduler" / "__pycache__" / f"__init__.{tag}.pyc").is_file()
