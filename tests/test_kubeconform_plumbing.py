"""How fleetgen drives kubeconform: arguments, and findings mapped back to config lines.

kubeconform has no package in any registry this machine reaches, so this test puts a stand-in
executable on PATH that records its arguments and answers in kubeconform's documented
`-output json` format. `test_cel_and_kubeconform.py::test_kubeconform_agrees` runs the real
binary wherever it is installed (the GitHub workflow installs it).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import run

STAND_IN = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["ARGS_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
root = sys.argv[-1]
bad = os.path.join(root, "prod-east", "kueue", "resourceflavor-h100.yaml")
out = {"resources": []}
if os.path.exists(bad):
    out["resources"].append({"filename": bad, "kind": "ResourceFlavor", "name": "h100",
                             "version": "kueue.x-k8s.io/v1beta2", "status": "statusInvalid",
                             "msg": "problem validating schema: spec: bogus"})
print(json.dumps(out))
sys.exit(1 if out["resources"] else 0)
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "kubeconform"
    exe.write_text(STAND_IN)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "args.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ARGS_LOG", str(log))
    return log


def test_kubeconform_arguments_and_findings(fleet_root: Path, shared_schemas: Path, shared_crds: Path,
                                             stand_in: Path) -> None:
    result = run(fleet_root, "validate", "--offline", "--schema-location", str(shared_schemas),
                 "--crd-location", str(shared_crds))
    assert result.code == 1, result.err
    assert ("clusters/prod-east.yaml:14: ResourceFlavor h100: problem validating schema: spec: bogus [kubeconform]"
            in result.err)
    calls = [json.loads(line) for line in stand_in.read_text().splitlines()]
    assert len(calls) == 3  # one run per cluster
    versions = sorted(call[call.index("-kubernetes-version") + 1] for call in calls)
    assert versions == ["1.32.0", "1.33.0", "1.34.0"]
    first = calls[0]
    assert "-strict" in first and first[first.index("-output") + 1] == "json"
    assert f"{shared_schemas}/{{{{.Group}}}}/{{{{.ResourceKind}}}}_{{{{.ResourceAPIVersion}}}}.json" in first
    assert first[first.index("-ignore-filename-pattern") + 1] == "kustomization.yaml"


def test_no_kubeconform_flag(fleet_root: Path, shared_schemas: Path, shared_crds: Path, stand_in: Path) -> None:
    result = run(fleet_root, "validate", "--offline", "--no-kubeconform", "--schema-location", str(shared_schemas),
                 "--crd-location", str(shared_crds))
    assert result.code == 0, result.err
    assert not stand_in.exists()
