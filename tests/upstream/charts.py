"""`helm template` (helm built at the pinned version) of a chart from its Go module, at the version a cluster's
rendered install asks for, with the values fleetgen wrote for that cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.rendered import chart_values, chart_version, kubernetes_version
from tests.upstream import tools


def helm_template(chart: str, cluster: str, namespace: str, tmp_path: Path,
                  version: str = "") -> list[dict[str, Any]]:
    """What the chart, at the release the cluster renders or `version`, makes of the values fleetgen wrote for
    this cluster (once per session)."""
    key = (chart, cluster, namespace, version)
    if key not in _TEMPLATED:
        _TEMPLATED[key] = _helm_template(chart, cluster, namespace, tmp_path, version)
    return _TEMPLATED[key]


_TEMPLATED: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}


def _helm_template(chart: str, cluster: str, namespace: str, tmp_path: Path, version: str) -> list[dict[str, Any]]:
    values = tmp_path / f"{cluster}-{chart}-values.yaml"
    values.write_text(yaml.safe_dump(chart_values(cluster, chart)))
    version = version or chart_version(cluster, chart)
    source = tools.chart(chart, version if version.startswith("v") else f"v{version}")  # a module tag
    proc = subprocess.run([str(tools.binary("helm")), "template", chart, str(source), "--namespace",
                           namespace, "--values", str(values), "--kube-version", f"{kubernetes_version(cluster)}.0"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
