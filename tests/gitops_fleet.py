"""The fleet twin's GitOps pieces shared by the engine stories (tests/test_twin_gitops.py, the Kueue upgrade
under Flux): the example fleet pushed to the twin's git host, its chart mirror, and the waits for Flux."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from generator.config.cluster import ClusterConfig
from generator.versions import component
from tests.conftest import REPO, run
from tests.upstream import tools
from tests.upstream.gitops import Flux, GitHost, chart_mirror, ready
from tests.upstream.processes import wait_for

SERVICE_RANGE = "127.64.0.0/16"
"""The twin's ClusterIPs: on loopback, so the API server's calls to a chart's webhook Service arrive."""
CONTROLLERS = ("job-controller", "deployment-controller", "replicaset-controller", "endpointslice-controller",
               "endpoints-controller", "statefulset-controller", "daemonset-controller",
               "persistentvolume-binder-controller", "root-ca-certificate-publisher-controller")
"""Beyond the stack's own: the charts' Deployments, StatefulSets (Prometheus, Alertmanager, Loki) and
DaemonSets (the exporters, the kernel-log collector) get pods (which kwok runs), their claims their volumes,
their Services endpoints (the aggregator calls an APIService only when its Service has some, Prometheus
scrapes what they list), and every namespace the `kube-root-ca.crt` a pod's token volume reads."""


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False,
                          env={"GIT_AUTHOR_NAME": "twin", "GIT_AUTHOR_EMAIL": "twin@fleet.test",
                               "GIT_COMMITTER_NAME": "twin", "GIT_COMMITTER_EMAIL": "twin@fleet.test",
                               "PATH": "/usr/bin:/bin", "HOME": str(repo)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _fleet_repo(root: Path, git: GitHost, cluster: str, monitoring: bool = True) -> Path:
    """The example fleet, its cluster file pointing at the twin's git host and mirror, rendered (monitoring,
    and with it health, as the file has it unless turned off)."""
    root.mkdir()
    for name in ("teams", "clusters"):
        shutil.copytree(REPO / name, root / name)
    example_repo = "  repoUrl: https://github.com/acme/gpu-fleet.git\n"
    for other in (root / "clusters").glob("*.yaml"):  # one fleet repository (Argo CD's settings follow hub's)
        other.write_text(other.read_text().replace(
            example_repo, f"  repoUrl: {git.repo_url('fleet')}\n  chartMirror: {git.chart_url}\n"))
    path = root / "clusters" / f"{cluster}.yaml"
    text = path.read_text()
    if not monitoring:
        text = text.replace("\nmonitoring:\n", "\nmonitoring:\n  enabled: false\n")
    path.write_text(text)
    rendered = run(root, "render")
    assert rendered.code == 0, rendered.err
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fleet")
    return root


def _platform(fleet: Path, cluster: str, kind: str) -> list[dict[str, Any]]:
    """The rendered platform installs of a cluster: its Applications or HelmReleases, as pushed."""
    return [yaml.safe_load(p.read_text()) for p in sorted((fleet / "rendered" / cluster / "platform").glob(
        f"{kind.lower()}-*.yaml"))]


def _installed_values(fleet: Path, cluster: ClusterConfig, chart: str) -> dict[str, Any]:
    """The values the rendered install of `chart` gives it (Application or HelmRelease)."""
    for app in _platform(fleet, cluster.name, "Application"):
        if app["spec"]["source"].get("chart") == chart:
            return dict(app["spec"]["source"]["helm"]["valuesObject"])
    for release in _platform(fleet, cluster.name, "HelmRelease"):
        if (release["spec"].get("chart") or {}).get("spec", {}).get("chart") == chart:
            return dict(release["spec"].get("values") or {})
    raise AssertionError(f"no rendered install of {chart} for {cluster.name}")


def mirror_for(git: GitHost, fleet: Path, cluster: ClusterConfig, also: tuple[str, ...] = ()) -> None:
    """The twin's chart repository with every chart the cluster's rendered platform installs: those of Go
    modules at the versions it pins, the monitoring charts packaged from their release tags
    (../shared/upstream), Loki's from its module less the subcharts its values leave off."""
    operators = {name: "v" + component(name).version.removeprefix("v") for name, on in (
        ("kuberay-operator", cluster.operators.ray), ("kubeflow-trainer", cluster.operators.trainer),
        ("lws", cluster.operators.lws)) if on}
    mon = cluster.monitoring
    released = (*(("kube-prometheus-stack", mon.gpu_exporter) if mon.enabled else ()), *also)
    trimmed = {"loki": (tools.BY_NAME["loki"].version, _installed_values(fleet, cluster, "loki"))} \
        if mon.enabled else {}
    chart_mirror(git.charts, {"kueue": cluster.kueue.version, "jobset": "v0.12.0", **operators}, released, trimmed)


def _flux_ready(flux: Flux, names: list[str], seconds: float,
                each_look: Callable[[], None] | None = None) -> dict[str, float]:
    """Seconds until each named Kustomization or HelmRelease is Ready (missing: it was not)."""
    started, done = time.monotonic(), {}

    def look() -> bool:
        if each_look is not None:
            each_look()
        now = time.monotonic() - started
        found = flux.objects("kustomize.toolkit.fluxcd.io", "v1", "kustomizations") + \
            flux.objects("helm.toolkit.fluxcd.io", "v2", "helmreleases")
        for obj in found:
            name = obj["metadata"]["name"]
            if name in names and name not in done and ready(obj):
                done[name] = now
        return all(n in done for n in names)

    wait_for(look, seconds, step=1.0)
    return done


def _flux_names(fleet: Path, cluster: str) -> list[str]:
    """The Kustomizations of the bootstrap folder and the HelmReleases of the platform, as rendered."""
    kustomizations = [yaml.safe_load(p.read_text())["metadata"]["name"]
                      for p in sorted((fleet / "rendered" / "gitops" / cluster).glob("kustomization-*.yaml"))]
    return [*kustomizations, *(r["metadata"]["name"] for r in _platform(fleet, cluster, "HelmRelease"))]
