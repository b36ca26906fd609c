"""The pinned kubeconform run strictly on a folder of objects: against ../shared's schemas, and against the
schemas of the CRDs the operators' charts ship, converted as `fleetgen validate` converts CRDs."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from generator.validate.kubeconform import kubeconform_args
from tests.rendered import kubernetes_version


def kubeconform(exe: Path, folder: Path, k8s_version: str, schemas: Path,
                more: Path | None = None) -> list[dict[str, str]]:
    """What kubeconform finds in `folder` (-output json lists only what is not valid), its summary last."""
    args = kubeconform_args(str(exe), k8s_version, str(schemas))
    if more is not None:
        args += ["-schema-location", f"{more}/{{{{.Group}}}}/{{{{.ResourceKind}}}}_{{{{.ResourceAPIVersion}}}}.json"]
    proc = subprocess.run([*args, "-summary", str(folder)], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(proc.stdout)
    return list(report.get("resources") or []) + [{"summary": json.dumps(report["summary"])}]


@functools.cache
def _operator_schema_texts() -> tuple[tuple[str, str], ...]:
    """(path in kubeconform's layout, JSON schema) of each version of the operators' CRDs, worked out once
    per test process: read with libyaml's loader, 1.5 s instead of 13 s for PyYAML's pure-Python one."""
    from generator.validate.schemas import crd_json_schema
    from tests.upstream import tools

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds = [path for chart in ("kuberay-operator", "kubeflow-trainer", "lws")
            for path in sorted((tools.chart(chart) / "crds").glob("*.yaml"))]
    texts = []
    for path in crds:
        crd = yaml.load(path.read_text(), Loader=loader)  # noqa: S506 - a safe loader
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            texts.append((f"{group}/{kind.lower()}_{version['name']}.json",
                          json.dumps(crd_json_schema(version["schema"]["openAPIV3Schema"]))))
    return tuple(texts)


def operator_schemas(folder: Path) -> Path:
    """Schemas, in kubeconform's layout, of the CRDs KubeRay's, Kubeflow Trainer's and LeaderWorkerSet's
    charts ship (their modules at the pins), converted as `fleetgen validate` converts CRDs: ../shared's
    catalog has none for ray.io, trainer.kubeflow.org or leaderworkerset.x-k8s.io, whose RayJob, TrainJob
    and LeaderWorkerSet templates the rendered trees hold."""
    for relative, text in _operator_schema_texts():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder


def assert_kubeconform_strict(docs: list[dict[str, Any]], cluster: str, exe: Path, schemas: Path,
                              tmp_path: Path, more: Path | None = None) -> None:
    """Every object a chart rendered is valid for kubeconform -strict at the cluster's version (against
    `more` schemas too)."""
    folder = tmp_path / "out"
    folder.mkdir()
    for i, doc in enumerate(docs):
        (folder / f"{i:03d}-{doc['kind'].lower()}.yaml").write_text(yaml.safe_dump(doc))
    found = kubeconform(exe, folder, kubernetes_version(cluster), schemas, more)
    summary = json.loads(found.pop()["summary"])
    assert found == [], found  # -output json lists only what is not valid
    assert summary == {"valid": len(docs), "invalid": 0, "errors": 0, "skipped": 0}, summary
