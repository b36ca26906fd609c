"""Run the real kubeconform binary over a rendered tree when it is installed.

Our in-process schema check covers the same ground; kubeconform is a second, independent
opinion, the one most platform teams already trust in CI. It runs without network: built-in kinds
use the strict schemas of kubernetes-validate (a dependency already), custom resources the
schema location given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from generator.compile.manifest import NOT_OBJECT_FILES, Manifest
from generator.emit import cluster_tree
from generator.errors import Finding
from generator.validate.findings import object_finding


def available() -> str | None:
    """Path of kubeconform on PATH, if any."""
    return shutil.which("kubeconform")


IGNORED_FILES = tuple(re.escape(name) + "$" for name in NOT_OBJECT_FILES)
"""kubeconform -ignore-filename-pattern for files of a rendered tree that are not Kubernetes objects."""


def builtin_schema_location(k8s_version: str) -> str:
    """A `-schema-location` template for built-in kinds that needs no network.

    kubernetes-validate ships strict schemas per Kubernetes minor, but each file declares a
    kubernetes.io `$id` and refers to "/api/_definitions.json", which kubeconform's loader would
    resolve on the web (and, failing, report as "could not find schema": kubeconform v0.8.0
    pkg/validator/validator.go:387-394 skips schemas that do not compile). A copy with local,
    relative references is made once per kubernetes-validate release in the cache.
    """
    from generator.cachedir import cache_dir
    from generator.validate.schemas import builtin_dir

    source = builtin_dir(".".join(k8s_version.split(".")[:2]))  # the folder our own check reads
    name = source.name
    root = cache_dir() / "kubeconform-schemas" / f"kubernetes-validate-{version('kubernetes-validate')}"
    target = root / name
    if not target.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        for entry in source.iterdir():
            if entry.name.endswith(".json"):
                doc = json.loads(entry.read_text(encoding="utf-8"))
                doc.pop("$id", None)
                text = json.dumps(doc).replace('"/api/_definitions.json#', '"_definitions.json#')
                (staging / entry.name).write_text(text, encoding="utf-8")
        try:
            os.rename(staging, target)  # atomic: a concurrent run either wins or finds it done
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return str(root) + "/{{.NormalizedKubernetesVersion}}-local{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"


def kubeconform_args(binary: str, k8s_version: str, schema_location: str | None) -> list[str]:
    """kubeconform -strict with JSON output, offline built-in schemas and our custom-resource location."""
    args = [binary, "-strict", "-output", "json", "-kubernetes-version", f"{k8s_version}.0",
            "-schema-location", builtin_schema_location(k8s_version)]
    for pattern in IGNORED_FILES:
        args += ["-ignore-filename-pattern", pattern]
    if schema_location:
        loc = schema_location if "{" in schema_location else \
            f"{schema_location.rstrip('/')}/{{{{.Group}}}}/{{{{.ResourceKind}}}}_{{{{.ResourceAPIVersion}}}}.json"
        args += ["-schema-location", loc.replace("{group}", "{{.Group}}").replace("{kind}", "{{.ResourceKind}}")
                 .replace("{version}", "{{.ResourceAPIVersion}}")]
    else:  # built-in kinds only (every one has a schema above): say nothing about custom resources
        args.append("-ignore-missing-schemas")
    return args


def _crd_fallback(folder: Path, manifests: list[Manifest],
                  crd_schema: Callable[[str, str], dict[str, Any] | None]) -> str:
    """A last schema location with the CRDs' own schemas (converted as the catalog converts them)
    for the custom kinds in `manifests`: the fallback `fleetgen validate`'s own check uses when the
    schema location lacks a kind."""
    from generator.validate.schemas import crd_json_schema

    for api_version, kind in sorted({(m.body["apiVersion"], m.body["kind"]) for m in manifests}):
        group, _, version = api_version.rpartition("/")
        schema = crd_schema(api_version, kind) if group else None
        if schema is not None:
            target = folder / group / f"{kind.lower()}_{version}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(crd_json_schema(schema)), encoding="utf-8")
    return str(folder) + "/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json"


def run_kubeconform(binary: str, cluster: str, manifests: list[Manifest], k8s_version: str,
                    schema_location: str | None,
                    crd_schema: Callable[[str, str], dict[str, Any] | None] | None = None) -> list[Finding]:
    """kubeconform -strict over the cluster's rendered files; findings mapped back to objects."""
    by_path = {f"{cluster}/{m.path}": m for m in manifests}
    with tempfile.TemporaryDirectory(prefix="fleetgen-kubeconform-") as tmp, \
            tempfile.TemporaryDirectory(prefix="fleetgen-crd-schemas-") as crd_schemas:
        for rel, content in cluster_tree(cluster, manifests).items():
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        args = kubeconform_args(binary, k8s_version, schema_location)
        if crd_schema is not None:
            args += ["-schema-location", _crd_fallback(Path(crd_schemas), manifests, crd_schema)]
        proc = subprocess.run(args + [tmp], capture_output=True, text=True, timeout=600, check=False)
        try:
            resources = json.loads(proc.stdout or "{}").get("resources") or []
        except json.JSONDecodeError:
            return [Finding("rendered", None, "", f"kubeconform failed: {proc.stderr.strip() or proc.stdout[:200]}",
                            "check the kubeconform installation", "kubeconform")]
        findings = []
        for res in resources:
            if res.get("status") in ("statusValid", "statusSkipped"):
                continue
            rel = Path(res.get("filename", "")).resolve().relative_to(Path(tmp).resolve()).as_posix()
            m = by_path.get(rel)
            message = res.get("msg") or res.get("status", "invalid")
            if m is None:
                findings.append(Finding(f"rendered/{rel}", None, "", message, "", "kubeconform"))
            else:
                findings.append(object_finding(m, "", message, "fix the config that produces this object",
                                               "kubeconform"))
        return findings
