"""CLI verbs, exit codes, --root from anywhere, and a fast --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema_rs
import pytest
import yaml

from generator.jsonschemas import schema_text
from tests.conftest import REPO, run


def test_help_is_fast() -> None:
    best = min(_timed([sys.executable, "-m", "generator", "--help"]) for _ in range(3))
    assert best < 0.5, f"fleetgen --help took {best:.2f}s"


def _timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "render" in proc.stdout
    return time.perf_counter() - start


def test_works_from_another_directory_with_root(fleet_root: Path, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "generator", "--root", str(fleet_root), "render", "--check"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "generator", "render", "--check"], cwd=fleet_root,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_bad_usage_exits_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "generator", "render", "--bogus"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "No such option" in proc.stderr


def test_explain_team(fleet_root: Path) -> None:
    result = run(fleet_root, "explain", "team", "ml-research")
    assert result.code == 0
    lines = result.out.splitlines()
    row = next(line.split() for line in lines if line.startswith("prod-east"))
    # guaranteed 64; borrowable min(32, lent by others: llm-pretrain 64 + vision 32 + platform-ci 0); lendable 16
    assert row[:6] == ["prod-east", "h100", "64", "32", "(32)", "16"]
    assert row[-2:] == ["224/256", "88%"]
    assert "cohort research" in lines[0]


def test_explain_cluster(fleet_root: Path) -> None:
    result = run(fleet_root, "explain", "cluster", "prod-west")
    assert result.code == 0
    assert "pool l40s (NVIDIA-L40S): 48 GPUs, quota limit 48, allocated 44 (92%), free 4" in result.out
    inference = next(line.split() for line in result.out.splitlines() if line.startswith("inference") and "32" in line)
    assert inference == ["inference", "32", "0", "0"]  # never preempted: it borrows nothing


def test_explain_unknown_name(fleet_root: Path) -> None:
    result = run(fleet_root, "explain", "team", "nobody")
    assert result.code == 2 and "unknown team 'nobody'" in result.err


def test_committed_schemas_are_current() -> None:
    result = run(REPO, "schema", "--check")
    assert result.code == 0, result.out


def test_schema_check_detects_stale_files(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas/team.schema.json").write_text("{}")
    assert run(tmp_path, "schema", "--check").code == 1
    assert run(tmp_path, "schema", "--write").code == 0
    assert run(tmp_path, "schema", "--check").code == 0


def test_every_example_file_points_at_and_passes_its_json_schema() -> None:
    for which in ("team", "cluster"):
        validator = jsonschema_rs.validator_for(json.loads(schema_text(which)))
        files = sorted((REPO / f"{which}s").glob("*.yaml"))
        assert files
        for path in files:
            text = path.read_text()
            assert text.startswith(f"# yaml-language-server: $schema=../schemas/{which}.schema.json\n"), path
            errors = [e.message for e in validator.iter_errors(yaml.safe_load(text))]
            assert not errors, (path, errors)


def test_json_schema_rejects_what_fleetgen_rejects() -> None:
    validator = jsonschema_rs.validator_for(json.loads(schema_text("team")))
    assert not validator.is_valid({"name": "Bad_Name", "owners": ["@a"]})
    assert not validator.is_valid({"name": "ok", "owners": ["@a"], "unknown": 1})
    assert validator.is_valid({"name": "ok", "owners": ["@a"], "quotas": {"c": {"p": {"gpus": 1}}}})


def test_schema_prints_json(fleet_root: Path) -> None:
    result = run(fleet_root, "schema", "cluster")
    assert result.code == 0
    assert json.loads(result.out)["properties"]["nodePools"]["description"]


def test_readme_opens_with_the_two_commands_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):]
    block = quick[quick.index("```sh\n") + 6:quick.index("```\n", quick.index("```sh\n") + 6)]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["./fleetgen render", "tests/run"]
    assert (REPO / ".ci/run").read_text().rstrip().splitlines()[-1] == f"exec {commands[1]}"  # CI runs exactly it
    assert f"run: {commands[1]}" in (REPO / ".github/workflows/ci.yml").read_text()
    assert os.access(REPO / "fleetgen", os.X_OK) and os.access(REPO / "tests/run", os.X_OK)


def test_progress_only_on_a_terminal_and_never_in_ci(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from generator.cli.build import _progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert _progress() is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("CI", "true")
    assert _progress() is None
    monkeypatch.delenv("CI")
    step = _progress()
    assert step is not None
    step("prod-east")
    step("prod-west")
    assert "compiled 2 clusters (last: prod-west)" in capsys.readouterr().err
