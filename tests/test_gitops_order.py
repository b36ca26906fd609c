"""Flux and Argo CD ordering (issue 14): the dependency graph of what the rendered GitOps objects
wait for, and the objects each needs, must have a producer for every need and no cycle.

Flux. Nodes are `apply:<Kustomization>` (its objects are applied: needs every dependsOn ready),
`ready:<Kustomization>` (applied, and with `wait: true` every object in it ready, else the
`healthChecks` ready) and `ready:<HelmRelease>` (its Kustomization applied, its dependsOn ready,
and what its pods mount applied). An object of a CRD group needs the release that installs the
CRDs ready; an object in a namespace needs the Namespace (in its own folder, another folder, or a
release that creates it). The deadlock fixed here: the exporter release mounted a ConfigMap that
lived in monitoring/, whose Kustomization waited for the platform one, which waited for the release.

Argo CD. Inside the fleet Application, a lower sync wave is applied (and healthy) first: every
custom resource must sit in a later wave than the Application installing its CRDs, and what a
release mounts in an earlier one.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

CRDS_FROM = {"monitoring.coreos.com": "kube-prometheus-stack", "kueue.x-k8s.io": "kueue",
             "jobset.x-k8s.io": "jobset"}
"""API group -> the chart release that installs its CRDs (Flux's own kinds are there before)."""


PRESENT = {"default", "kube-system", "kube-public", "kube-node-lease", "flux-system", "argocd"}
"""Namespaces a cluster has before any sync (the API server's own, and the GitOps controller's)."""


def objects(folder: Path, nested: bool = False) -> list[dict[str, Any]]:
    """The objects of a folder (with `nested`, of its subfolders too: what kustomize build gives)."""
    files = folder.rglob("*.yaml") if nested else folder.glob("*.yaml")
    return [yaml.safe_load(p.read_text()) for p in sorted(files) if p.name != "kustomization.yaml"]


def mounted_config_maps(release: dict[str, Any]) -> list[str]:
    """ConfigMaps a release's pods mount, from its values (the dcgm-exporter and GPU operator charts)."""
    values = release["spec"].get("values") or {}
    names = [v["configMap"]["name"] for v in values.get("extraConfigMapVolumes") or []]
    if (values.get("dcgmExporter") or {}).get("config"):
        names.append(values["dcgmExporter"]["config"]["name"])
    return names


Graph = dict[str, set[str]]
"""Flux's wait graph: a node -> the nodes it waits for."""


def flux_problems(rendered: Path, cluster: str) -> list[str]:
    """Missing producers and cycles of one Flux cluster's graph."""
    kustomizations = [k for k in objects(rendered / "gitops" / cluster) if k["kind"] == "Kustomization"]
    graph: Graph = defaultdict(set)
    content, produced, releases = _flux_producers(rendered, cluster, kustomizations, graph)
    problems = []
    for k in kustomizations:
        problems += _kustomization_needs(k, content[k["metadata"]["name"]], produced, releases, graph)
    for release_name, release in releases.items():
        problems += _release_needs(release_name, release, produced, graph)
    problems += [f"cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems


def _flux_producers(rendered: Path, cluster: str, kustomizations: list[dict[str, Any]], graph: Graph) -> tuple[
        dict[str, list[dict[str, Any]]], dict[tuple[str, str], str], dict[str, dict[str, Any]]]:
    """Each Kustomization's objects, the node that makes each object exist ((kind, namespace/name) ->
    node) and the HelmReleases by name; a release is ready only once its Kustomization is applied."""
    produced: dict[tuple[str, str], str] = {}  # (kind, namespace/name) -> node that makes it exist
    content: dict[str, list[dict[str, Any]]] = {}
    releases: dict[str, dict[str, Any]] = {}
    for k in kustomizations:
        name = k["metadata"]["name"]
        folder = k["spec"]["path"].rstrip("/").split("/")[-1]
        content[name] = objects(rendered / cluster / folder, nested=True)
        for obj in content[name]:
            meta = obj["metadata"]
            produced[(obj["kind"], f"{meta.get('namespace', '')}/{meta['name']}")] = f"apply:{name}"
            if obj["kind"] == "HelmRelease":
                releases[meta["name"]] = obj
                graph[f"ready:{meta['name']}"].add(f"apply:{name}")
                if obj["spec"].get("install", {}).get("createNamespace"):
                    produced.setdefault(("Namespace", "/" + obj["spec"]["targetNamespace"]), f"ready:{meta['name']}")
    for namespace in PRESENT:
        produced[("Namespace", "/" + namespace)] = "present"
    return content, produced, releases


def _kustomization_needs(k: dict[str, Any], content: list[dict[str, Any]], produced: dict[tuple[str, str], str],
                         releases: dict[str, dict[str, Any]], graph: Graph) -> list[str]:
    """The Kustomization's edges (its dependsOn, what it waits for, its objects' CRDs and namespaces);
    the needs nothing produces."""
    name, spec = k["metadata"]["name"], k["spec"]
    graph[f"ready:{name}"].add(f"apply:{name}")
    for dep in spec.get("dependsOn") or []:
        graph[f"apply:{name}"].add(f"ready:{dep['name']}")
    waited = [o["metadata"]["name"] for o in content if o["kind"] == "HelmRelease"] if spec.get("wait") \
        else [h["name"] for h in spec.get("healthChecks") or [] if h["kind"] == "HelmRelease"]
    graph[f"ready:{name}"].update(f"ready:{r}" for r in waited)
    problems = []
    for obj in content:
        meta = obj["metadata"]
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if group in CRDS_FROM:
            if CRDS_FROM[group] not in releases:
                problems.append(f"{obj['kind']} {meta['name']}: no release installs the {group} CRDs")
            else:
                graph[f"apply:{name}"].add(f"ready:{CRDS_FROM[group]}")
        namespace = meta.get("namespace")
        if namespace and ("Namespace", "/" + namespace) not in produced:
            problems.append(f"{obj['kind']} {meta['name']}: nothing creates namespace {namespace}")
        elif namespace and produced[("Namespace", "/" + namespace)] not in (f"apply:{name}", "present"):
            graph[f"apply:{name}"].add(produced[("Namespace", "/" + namespace)])
    return problems


def _release_needs(release_name: str, release: dict[str, Any], produced: dict[tuple[str, str], str],
                   graph: Graph) -> list[str]:
    """The HelmRelease's edges (its dependsOn, the ConfigMaps its pods mount); the mounts nothing renders."""
    for dep in release["spec"].get("dependsOn") or []:
        graph[f"ready:{release_name}"].add(f"ready:{dep['name']}")
    problems = []
    for cm in mounted_config_maps(release):
        key = ("ConfigMap", f"{release['spec']['targetNamespace']}/{cm}")
        if key not in produced:
            problems.append(f"HelmRelease {release_name} mounts ConfigMap {key[1]}, which nothing renders")
        else:
            graph[f"ready:{release_name}"].add(produced[key])
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected loop found by depth-first search (empty: acyclic)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def flux_clusters() -> list[str]:
    return sorted(p.name for p in (REPO / "rendered" / "gitops").iterdir()
                  if any(o["kind"] == "GitRepository" for o in objects(p)))


def test_the_example_fleet_has_flux_and_argocd_clusters() -> None:
    assert flux_clusters() == ["dev", "prod-west"]


@pytest.mark.parametrize("cluster", ["dev", "prod-west"])
def test_flux_graph_has_a_producer_for_every_need_and_no_cycle(cluster: str) -> None:
    assert flux_problems(REPO / "rendered", cluster) == []


def test_the_old_layout_deadlocks(tmp_path: Path) -> None:
    """As it was: the counters ConfigMap in monitoring/ and the platform Kustomization waiting
    for every release. The checker finds the cycle; either fix alone breaks it."""
    rendered = tmp_path / "rendered"
    for part in ("gitops/prod-west", "prod-west"):
        shutil.copytree(REPO / "rendered" / part, rendered / part)
    (rendered / "prod-west/platform/configmap-fleetgen-dcgm-counters.yaml").rename(
        rendered / "prod-west/monitoring/configmap-fleetgen-dcgm-counters.yaml")
    assert flux_problems(rendered, "prod-west") == []  # platform waits only for what others need
    platform = rendered / "gitops/prod-west/kustomization-prod-west-fleet-platform.yaml"
    body = yaml.safe_load(platform.read_text())
    body["spec"]["wait"] = True
    body["spec"].pop("healthChecks")
    platform.write_text(yaml.safe_dump(body))
    (found,) = [p for p in flux_problems(rendered, "prod-west") if p.startswith("cycle")]
    for node in ("ready:dcgm-exporter", "apply:prod-west-fleet-monitoring", "ready:prod-west-fleet-platform"):
        assert node in found, found


def test_argocd_waves_put_crds_before_their_resources_and_mounts_before_releases() -> None:
    cluster = "prod-east"
    folder = REPO / "rendered" / cluster
    apps = {a["spec"]["source"]["chart"]: a for a in objects(folder / "platform") if a["kind"] == "Application"}
    wave = {name: int(a["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for name, a in apps.items()}

    def wave_of(obj: dict[str, Any]) -> int:
        return int((obj["metadata"].get("annotations") or {}).get("argocd.argoproj.io/sync-wave", "0"))

    everything = [o for sub in sorted(p for p in folder.iterdir() if p.is_dir()) for o in objects(sub)]
    everything += [o for team in sorted((folder / "teams").rglob("*")) if team.is_dir() for o in objects(team)]
    checked = 0
    for obj in everything:
        group = obj["apiVersion"].split("/")[0]
        if group in CRDS_FROM and obj["kind"] != "Application":
            assert wave_of(obj) > wave[CRDS_FROM[group]], (obj["kind"], obj["metadata"]["name"])
            checked += 1
    assert checked > 10
    mounts = {cm for a in apps.values() for cm in mounted_config_maps({"spec": {"values": a["spec"]["source"][
        "helm"]["valuesObject"]}})}
    for obj in everything:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in mounts:
            assert wave_of(obj) < min(wave.values()), obj["metadata"]["name"]
            mounts.discard(obj["metadata"]["name"])
    assert mounts == set(), f"mounted but not rendered: {mounts}"


def test_argocd_judges_a_child_application_by_its_health(upstream_tools: None, tmp_path: Path) -> None:
    """Issue 14: with no health check for Applications (Argo CD removed it in 1.8), a platform
    Application counted as healthy at once, so its sync wave gated nothing. The rendered argocd-cm
    fragment's Lua, run as Argo CD runs it (gopher-lua at the version Argo CD requires), reports a
    child as Argo CD sees its own status; one not yet reconciled is Progressing, so the next wave waits."""
    import json
    import subprocess

    from tests.upstream import tools

    (settings,) = [o for o in objects(REPO / "rendered" / "gitops" / "argocd-settings" / "argocd")
                   if o["kind"] == "ConfigMap"]
    assert settings["metadata"]["name"] == "argocd-cm"
    assert settings["metadata"]["labels"]["app.kubernetes.io/part-of"] == "argocd"  # Argo CD reads only these
    script = tmp_path / "health.lua"
    script.write_text(settings["data"]["resource.customizations.health.argoproj.io_Application"])
    unfetchable = "Failed to load target state: failed to generate manifest: chart kueue not found"
    apps = [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "kueue"},
             **({"status": status} if status is not None else {})}
            for status in ({"health": {"status": "Healthy"}}, {"health": {"status": "Degraded", "message": "crash"}},
                           {"sync": {"status": "OutOfSync"}}, None,
                           # Issue 30: a chart that cannot be fetched leaves a child with no resources, so
                           # Argo CD calls it Healthy, with a ComparisonError and sync status Unknown.
                           {"health": {"status": "Healthy"}, "sync": {"status": "Unknown"},
                            "conditions": [{"type": "ComparisonError", "message": unfetchable}]},
                           {"health": {"status": "Healthy"}, "sync": {"status": "Unknown"}},
                           {"health": {"status": "Healthy"}, "sync": {"status": "Synced"},
                            "conditions": [{"type": "OrphanedResourceWarning", "message": "1 orphan"}]},
                           {"health": {"status": "Healthy"}, "sync": {"status": "Synced"},
                            "conditions": [{"type": "InvalidSpecError", "message": "repo not permitted"}]},
                           # The fleet twin: Healthy with only its Namespace applied, its sync still running.
                           {"health": {"status": "Healthy"}, "sync": {"status": "OutOfSync"},
                            "operationState": {"phase": "Running", "message": "one or more tasks are running"}},
                           {"health": {"status": "Healthy"}, "sync": {"status": "Synced"},
                            "operationState": {"phase": "Succeeded", "message": "successfully synced"}})]
    (tmp_path / "apps.json").write_text(json.dumps(apps))
    proc = subprocess.run([str(tools.binary("argocd-health")), str(script), str(tmp_path / "apps.json")],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        {"status": "Healthy"}, {"status": "Degraded", "message": "crash"}, {"status": "Progressing"},
        {"status": "Progressing"}, {"status": "Degraded", "message": f"ComparisonError: {unfetchable}"},
        {"status": "Progressing", "message": "sync status Unknown: its manifests are not generated yet"},
        {"status": "Healthy"},  # a warning is no error
        {"status": "Degraded", "message": "InvalidSpecError: repo not permitted"},
        {"status": "Progressing", "message": "sync running: one or more tasks are running"},
        {"status": "Healthy"}]
