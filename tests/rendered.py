"""What the committed fleet says, read from its files: the charts' values and versions a cluster's rendered
install passes, its Kueue configuration, its rendered objects, and the Kubernetes version of each tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

CLUSTERS = sorted(p.stem for p in (REPO / "clusters").glob("*.yaml"))


def kubernetes_version(tree: str) -> str:
    """The `kubernetesVersion` of a rendered tree's cluster file (the first cluster's for `gitops`)."""
    name = CLUSTERS[0] if tree == "gitops" else tree
    return str(yaml.safe_load((REPO / "clusters" / f"{name}.yaml").read_text())["kubernetesVersion"])


def rendered_object(cluster: str, folder: str, name: str) -> dict[str, Any]:
    """One rendered file of a cluster, `rendered/<cluster>/<folder>/<name>`."""
    return dict(yaml.safe_load((REPO / "rendered" / cluster / folder / name).read_text()))


def chart_values(cluster: str, name: str, root: Path = REPO) -> dict[str, Any]:
    """The chart values a cluster's rendered install passes, from its Argo CD Application or Flux HelmRelease."""
    platform = root / "rendered" / cluster / "platform"
    app = platform / f"application-{cluster}-{name}.yaml"
    obj = yaml.safe_load((app if app.exists() else platform / f"helmrelease-{name}.yaml").read_text())
    return obj["spec"]["source"]["helm"]["valuesObject"] if obj["kind"] == "Application" else obj["spec"]["values"]


def kueue_config(root: Path, cluster: str) -> dict[str, Any]:
    """The Kueue Configuration a cluster's rendered Kueue chart values carry."""
    return dict(yaml.safe_load(chart_values(cluster, "kueue", root)["managerConfig"]["controllerManagerConfigYaml"]))


def chart_version(cluster: str, chart: str) -> str:
    """The chart version the cluster's rendered install asks for (Argo CD Application or Flux source)."""
    platform = REPO / "rendered" / cluster / "platform"
    app = platform / f"application-{cluster}-{chart}.yaml"
    if app.exists():
        return str(yaml.safe_load(app.read_text())["spec"]["source"]["targetRevision"])
    oci = platform / f"ocirepository-{chart}.yaml"
    if oci.exists():
        return str(yaml.safe_load(oci.read_text())["spec"]["ref"]["tag"])
    # A chart from a Helm repository: the HelmRelease names the version.
    release = yaml.safe_load((platform / f"helmrelease-{chart}.yaml").read_text())
    return str(release["spec"]["chart"]["spec"]["version"])
