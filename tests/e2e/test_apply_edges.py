"""``scheduler apply``, ``export`` and ``jobs create -f`` at their edges, against a live
``scheduler local``: names made of references, chains exported by name, secret references in
``jobs create -f``, a dry run that says what the API would refuse, a one-off that deleted itself,
dot-folders, flow-style YAML and a JSON byte-order mark, an alias bomb, a long chain, and a closed
pipe."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.test_apply import _cli, api  # noqa: F401 (the live scheduler fixture)

pytestmark = pytest.mark.slow


def _jobs(api) -> dict[str, dict]:
    answer = _cli(api, "jobs", "list", "--all", "-o", "json")
    assert answer.returncode == 0, answer.stderr
    return {job["name"]: job for job in json.loads(answer.stdout)["jobs"]}


def test_a_name_made_of_references_is_matched_pruned_and_chained_by_what_it_makes(api, tmp_path):
    spec = tmp_path / "env.yaml"
    spec.write_text(
        'name: "${STAGE}-first"\nschedule: "@daily"\ntags: [envt]\ntarget: {url: "http://127.0.0.1:9/a"}\n'
        "on_success: ['${STAGE}-second']\n---\n"
        'name: "${STAGE}-second"\nschedule: "@daily"\ntags: [envt]\ntarget: {url: "http://127.0.0.1:9/b"}\n'
    )
    env = {"STAGE": "prod"}
    first = _cli(api, "apply", "-f", str(spec), env=env)
    assert first.returncode == 0, first.stderr
    again = _cli(api, "apply", "-f", str(spec), "--prune", "--selector", "tag=envt", env=env)
    assert again.returncode == 0 and "0 changed, 2 unchanged" in again.stdout, again.stdout + again.stderr
    assert set(_jobs(api)) == {"prod-first", "prod-second"}


def test_export_writes_chains_by_name_so_that_the_files_apply_elsewhere(api, tmp_path):
    target = _cli(api, "jobs", "create", "--name", "t", "--schedule", "@daily", "--url", "http://127.0.0.1:9/t")
    assert target.returncode == 0, target.stderr
    target_id = _jobs(api)["t"]["id"]
    created = _cli(
        api,
        "jobs",
        "create",
        "--name",
        "s",
        "--schedule",
        "@daily",
        "--url",
        "http://127.0.0.1:9/s",
        "--on-success",
        target_id,
    )
    assert created.returncode == 0, created.stderr
    assert _jobs(api)["s"]["on_success"] == [target_id]
    exported = _cli(api, "export")
    assert exported.returncode == 0 and target_id not in exported.stdout, exported.stdout
    assert "on_success:\n- t\n" in exported.stdout
    for name in ("s", "t"):
        assert _cli(api, "jobs", "delete", name).returncode == 0
    restored = _cli(api, "apply", "-f", "-", stdin=exported.stdout)
    assert restored.returncode == 0, restored.stderr
    jobs = _jobs(api)
    assert jobs["s"]["on_success"] == ["t"]


def test_jobs_create_from_a_file_sends_the_value_of_a_secret_reference(api, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        'name: ref\nschedule: "@daily"\n'
        'target: {url: "http://127.0.0.1:9/r", body: "${KEPT_AS_WRITTEN}",'
        ' headers: {Authorization: "Bearer ${CREATE_TOKEN}"}}\n'
    )
    missing = _cli(api, "jobs", "create", "-f", str(spec))
    assert missing.returncode == 2 and "${CREATE_TOKEN} is not set" in missing.stderr, missing.stderr
    created = _cli(api, "jobs", "create", "-f", str(spec), env={"CREATE_TOKEN": "s3cret"})
    assert created.returncode == 0, created.stderr
    job = _jobs(api)["ref"]
    assert job["target"]["body"] == "${KEPT_AS_WRITTEN}" and job["target"]["headers"]["Authorization"] == "***"


def test_a_dry_run_says_what_the_api_would_refuse_and_fails(api, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        'name: bad-cron\nschedule: "61 * * * *"\ntarget: {url: "http://127.0.0.1:9/x"}\n---\n'
        'name: good\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/y"}\n'
    )
    dry = _cli(api, "apply", "-f", str(spec), "--dry-run")
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "! bad-cron (would be refused: " in dry.stdout and "schedule: minute field: 61" in dry.stdout
    assert "+ good (would be created)" in dry.stdout
    assert "1 would change (1 created), 0 unchanged, 1 would be refused" in dry.stdout  # refused: not a change
    as_json = _cli(api, "apply", "-f", str(spec), "--dry-run", "-o", "json")
    answer = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and list(answer["refused"]) == ["bad-cron"] and answer["created"] == ["good"]
    real = _cli(api, "apply", "-f", str(spec))
    # The real run refuses before its first write: no file half applied ("good" is not created).
    assert real.returncode == 1 and f"apply: bad-cron ({spec}#1) would be refused:" in real.stderr
    assert "schedule: minute field: 61" in real.stderr and "nothing was changed" in real.stderr
    assert "good" not in _jobs(api)
    as_json = _cli(api, "apply", "-f", str(spec), "-o", "json")
    assert as_json.returncode == 1 and list(json.loads(as_json.stdout)["refused"]) == ["bad-cron"]


def test_a_one_off_that_deleted_itself_is_not_created_again(api, tmp_path):
    spec = tmp_path / "once.yaml"
    spec.write_text(
        'name: once\nrun_at: "2020-01-01T00:00:00Z"\nafter_completion: delete\ntarget: {url: "http://127.0.0.1:9/o"}\n'
    )
    answer = _cli(api, "apply", "-f", str(spec))
    assert answer.returncode == 0, answer.stderr
    assert "= once (skipped)" in answer.stdout and "0 changed, 0 unchanged, 1 skipped" in answer.stdout
    assert "once" not in _jobs(api)


def test_folders_and_formats(api, tmp_path):
    """Dot-folders are not read; a .yaml file in flow style is YAML; a JSON file may start with a
    byte-order mark."""
    folder = tmp_path / "repo"
    (folder / ".github" / "workflows").mkdir(parents=True)
    (folder / ".github" / "workflows" / "ci.yml").write_text("name: CI\non: [push]\n")
    (folder / "flow.yaml").write_text('{name: flow, schedule: "@daily", target: {url: "http://127.0.0.1:9/f"}}\n')
    (folder / "bom.json").write_text(
        "\ufeff" + json.dumps({"name": "bom", "schedule": "@daily", "target": {"url": "http://127.0.0.1:9/b"}}),
        encoding="utf-8",
    )
    answer = _cli(api, "apply", "-f", str(folder))
    assert answer.returncode == 0, answer.stderr
    assert "2 changed (2 created)" in answer.stdout and "CI" not in answer.stdout


def test_an_alias_bomb_is_refused_at_once(api, tmp_path):
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 10)}]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("name: bomb\n" + "\n".join(lines) + "\n")
    answer = _cli(api, "apply", "-f", str(bomb), "--dry-run")
    assert answer.returncode == 2 and "aliases expand it past 2,000,000 values" in answer.stderr, answer.stderr


def test_a_long_chain_is_ordered_without_recursion(api, tmp_path):
    documents = [
        f'name: lc-{i}\nschedule: "0 0 1 1 *"\ntarget: {{url: "http://127.0.0.1:9/{i}"}}\non_success: [lc-{i + 1}]\n'
        for i in range(1500)
    ]
    documents.append('name: lc-1500\nschedule: "0 0 1 1 *"\ntarget: {url: "http://127.0.0.1:9/end"}\n')
    spec = tmp_path / "chain.yaml"
    spec.write_text("---\n".join(documents))
    answer = _cli(api, "apply", "-f", str(spec), "--dry-run")
    assert answer.returncode == 0, answer.stderr[-2000:]
    created = [line for line in answer.stdout.splitlines() if line.startswith("+ ")]
    assert created[0] == "+ lc-1500 (would be created)" and created[-1] == "+ lc-0 (would be created)"


def test_a_closed_pipe_ends_the_command_without_a_traceback(api):
    """The reader is gone before the command writes (``| true``): one exit, no traceback."""
    assert (
        _cli(api, "jobs", "create", "--name", "p", "--schedule", "@daily", "--url", "http://127.0.0.1:9/p").returncode
        == 0
    )
    for output in ("json", "table"):
        command = f"{sys.executable} -m scheduler.cli --endpoint {api.url} jobs list -o {output} | true"
        answer = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=60)
        assert "Traceback" not in answer.stderr and "BrokenPipe" not in answer.stderr, answer.stderr
        assert answer.returncode == 0, answer.stderr


def test_a_path_is_decoded_once(api):
    """``%3A`` is a ":" of a name; ``%253A`` is "%3A", which no name holds (the local server
    decoded the path, then the API again)."""
    import requests

    assert _cli(api, "calendars", "create", "--name", "a:b", "--date", "2030-01-01").returncode == 0
    assert requests.get(f"{api.url}/v1/calendars/a%3Ab", timeout=10).status_code == 200
    assert requests.get(f"{api.url}/v1/calendars/a%253Ab", timeout=10).status_code == 404
