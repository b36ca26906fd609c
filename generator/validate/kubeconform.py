"""Run the real kubeconform binary over a rendered tree when it is installed.

Our in-process schema check covers the same ground; kubeconform is a second, independent
opinion, the one most platform teams already trust in CI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from generator.compile.manifest import Manifest
from generator.emit import cluster_tree
from generator.errors import Finding
from generator.validate.findings import object_finding


def available() -> str | None:
    """Path of kubeconform on PATH, if any."""
    return shutil.which("kubeconform")


def run_kubeconform(binary: str, cluster: str, manifests: list[Manifest], k8s_version: str,
                    schema_location: str | None) -> list[Finding]:
    """kubeconform -strict over the cluster's rendered files; findings mapped back to objects."""
    by_path = {f"{cluster}/{m.path}": m for m in manifests}
    with tempfile.TemporaryDirectory(prefix="fleetgen-kubeconform-") as tmp:
        for rel, content in cluster_tree(cluster, manifests).items():
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        args = [binary, "-strict", "-output", "json", "-kubernetes-version", f"{k8s_version}.0",
                "-ignore-filename-pattern", "kustomization.yaml", "-schema-location", "default"]
        if schema_location:
            loc = schema_location if "{" in schema_location else \
                f"{schema_location.rstrip('/')}/{{{{.Group}}}}/{{{{.ResourceKind}}}}_{{{{.ResourceAPIVersion}}}}.json"
            args += ["-schema-location", loc]
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
