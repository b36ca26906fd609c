"""Issue 32, job operators: `operators.ray` installs KubeRay after Kueue, lets team members use Ray
kinds in their own namespaces only, and is refused where Kueue would not queue what it runs. What the
real chart makes of the values: tests/test_charts.py; the real operator and Kueue: tests/test_ray.py."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import REPO, edit, run, snapshot

RAY = "ray.io"


def _load(rel: str, root: Path = REPO) -> dict:
    return yaml.safe_load((root / "rendered" / rel).read_text())


def test_prod_east_installs_kuberay_after_kueue() -> None:
    app = _load("prod-east/platform/application-prod-east-kuberay-operator.yaml")
    kueue = _load("prod-east/platform/application-prod-east-kueue.yaml")
    annotations = "argocd.argoproj.io/sync-wave"
    assert int(app["metadata"]["annotations"][annotations]) > int(kueue["metadata"]["annotations"][annotations])
    source = app["spec"]["source"]
    assert (source["chart"], source["targetRevision"]) == ("kuberay-operator", "1.6.2")
    assert app["spec"]["destination"]["namespace"] == "kuberay-system"
    values = source["helm"]["valuesObject"]
    assert values["batchScheduler"] == {"enabled": False}  # Kueue queues Ray kinds by suspending them
    assert values["metrics"]["serviceMonitor"]["enabled"] is True
    # The CRDs are over 256 KiB: only server-side apply can write them (no last-applied annotation).
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]
    project = _load("gitops/prod-east/appproject-prod-east-platform.yaml")
    assert source["repoURL"] in project["spec"]["sourceRepos"]


def test_flux_installs_kuberay_once_kueue_is_ready(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-west.yaml", "kueue:\n", "operators: {ray: true}\nkueue:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    release = _load("prod-west/platform/helmrelease-kuberay-operator.yaml", fleet_root)
    assert release["spec"]["dependsOn"] == [{"name": "kueue", "namespace": "flux-system"},
                                            {"name": "kube-prometheus-stack", "namespace": "flux-system"}]
    assert release["spec"]["targetNamespace"] == "kuberay-system"
    assert release["spec"]["install"]["crds"] == "CreateReplace"
    source = _load("prod-west/platform/helmrepository-kuberay-operator.yaml", fleet_root)
    assert source["spec"]["url"] == "https://ray-project.github.io/kuberay-helm/"


def test_members_get_ray_kinds_only_where_kuberay_runs() -> None:
    """KubeRay's chart aggregates none of its editor roles to `edit`: without these rules a member got
    403 on rayclusters. The ClusterRole is bound in the team's own namespaces only (RoleBindings)."""
    def ray_rules(cluster: str) -> list[dict]:
        role = _load(f"{cluster}/teams/clusterrole-fleetgen-team-member.yaml")
        return [rule for rule in role["rules"] if RAY in rule["apiGroups"]]

    granted = ray_rules("prod-east")
    assert {"rayclusters", "rayjobs", "rayservices"} <= set(granted[0]["resources"])
    assert "create" in granted[0]["verbs"] and "update" not in granted[0]["verbs"]
    assert all(not r.endswith("/status") or rule["verbs"] == ["get"] for rule in granted for r in rule["resources"])
    assert ray_rules("prod-west") == [] and ray_rules("dev") == []
    bindings = list((REPO / "rendered" / "prod-east" / "teams").rglob("rolebinding-*-members-jobs.yaml"))
    assert bindings and all(_load(str(b.relative_to(REPO / "rendered")))["kind"] == "RoleBinding" for b in bindings)


def test_ray_where_kueue_would_not_queue_it_is_refused_at_its_line(fleet_root: Path) -> None:
    before = snapshot(fleet_root / "rendered")
    edit(fleet_root, "clusters/prod-east.yaml", "  version: v0.19.2\n",
         "  version: v0.19.2\n  integrations: [jobset.x-k8s.io/jobset, batch/job, ray.io/raycluster]\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    line = next(i for i, text in enumerate((fleet_root / "clusters/prod-east.yaml").read_text().splitlines(), 1)
                if text.startswith("operators:"))
    assert f"clusters/prod-east.yaml:{line}" in result.err, result.err
    assert "operators: ray is on, but Kueue would not queue ray.io/rayjob," in result.err
    assert "add ray.io/rayjob to kueue.integrations" in result.err
    assert snapshot(fleet_root / "rendered") == before


def test_ray_on_a_multikueue_manager_is_refused(fleet_root: Path) -> None:
    path = fleet_root / "clusters/hub.yaml"
    path.write_text(path.read_text() + "operators: {ray: true}\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "clusters/hub.yaml" in result.err and "does not dispatch Ray kinds" in result.err, result.err
