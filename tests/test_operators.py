"""Issue 32, job operators: `operators.ray` installs KubeRay after Kueue, `operators.trainer` Kubeflow
Trainer after Kueue and JobSet; each lets team members use its kinds in their own namespaces only, and is
refused where Kueue would not queue what it runs. What the real charts make of the values:
tests/test_charts.py; the real operators and Kueue: tests/test_ray.py, tests/test_trainer.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, add_tenancy, edit, run, snapshot

RAY = "ray.io"


def _load(rel: str, root: Path = REPO) -> dict:
    return yaml.safe_load((root / "rendered" / rel).read_text())


def _installed_after(name: str, *before: str) -> dict:
    """prod-east's platform Application `name`, synced after each of `before`, from a source its project allows."""
    app = _load(f"prod-east/platform/application-prod-east-{name}.yaml")
    wave = "argocd.argoproj.io/sync-wave"
    for earlier in before:
        other = _load(f"prod-east/platform/application-prod-east-{earlier}.yaml")
        assert int(app["metadata"]["annotations"][wave]) > int(other["metadata"]["annotations"][wave]), earlier
    project = _load("gitops/prod-east/appproject-prod-east-platform.yaml")
    assert app["spec"]["source"]["repoURL"] in project["spec"]["sourceRepos"]
    return app


def test_prod_east_installs_kuberay_after_kueue() -> None:
    app = _installed_after("kuberay-operator", "kueue")
    source = app["spec"]["source"]
    assert (source["chart"], source["targetRevision"]) == ("kuberay-operator", "1.6.2")
    assert app["spec"]["destination"]["namespace"] == "kuberay-system"
    values = source["helm"]["valuesObject"]
    assert values["batchScheduler"] == {"enabled": False}  # Kueue queues Ray kinds by suspending them
    assert values["metrics"]["serviceMonitor"]["enabled"] is True
    # The CRDs are over 256 KiB: only server-side apply can write them (no last-applied annotation).
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]


@pytest.mark.parametrize(("operator", "release", "namespace", "after", "source"), [
    ("ray", "kuberay-operator", "kuberay-system", ["kueue", "kube-prometheus-stack"],
     ("helmrepository", "url", "https://ray-project.github.io/kuberay-helm/")),
    ("trainer", "kubeflow-trainer", "kubeflow-system", ["jobset", "kueue"],
     ("ocirepository", "url", "oci://ghcr.io/kubeflow/charts/kubeflow-trainer")),
])
def test_flux_installs_an_operator_once_what_it_needs_is_ready(fleet_root: Path, operator: str, release: str,
                                                              namespace: str, after: list[str],
                                                              source: tuple[str, str, str]) -> None:
    # prod-west runs both already (the hub dispatches their kinds there)
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    spec = _load(f"prod-west/platform/helmrelease-{release}.yaml", fleet_root)["spec"]
    assert spec["dependsOn"] == [{"name": name, "namespace": "flux-system"} for name in after]
    assert (spec["targetNamespace"], spec["install"]["crds"]) == (namespace, "CreateReplace")
    kind, key, value = source
    assert _load(f"prod-west/platform/{kind}-{release}.yaml", fleet_root)["spec"][key] == value


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
    assert ray_rules("prod-west") == granted and ray_rules("hub") == granted and ray_rules("dev") == []
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


def test_a_manager_with_operators_dispatches_their_kinds_to_workers_that_run_them() -> None:
    """hub's `operators.ray` and `operators.trainer`: its Kueue queues the Ray kinds and TrainJobs
    (MultiKueue dispatches them), each worker lets the manager's ServiceAccount watch and write them there
    besides JobSets and batch Jobs, and the hub gets Trainer's CRDs and runtime without its controller."""
    kueue = _load("hub/platform/application-hub-kueue.yaml")["spec"]["source"]["helm"]["valuesObject"]
    frameworks = yaml.safe_load(kueue["managerConfig"]["controllerManagerConfigYaml"])["integrations"]["frameworks"]
    assert frameworks == ["batch/job", "jobset.x-k8s.io/jobset", "ray.io/raycluster", "ray.io/rayjob",
                          "trainer.kubeflow.org/trainjob"]
    for worker in ("prod-east", "prod-west"):
        write = _load(f"{worker}/kueue/clusterrole-fleetgen-multikueue-hub-write.yaml")["rules"][0]
        assert write["resources"] == ["workloads", "jobs", "jobsets", "rayclusters", "rayjobs", "trainjobs"]
        assert RAY in write["apiGroups"] and "delete" in write["verbs"]
    trainer = _load("hub/platform/application-hub-kubeflow-trainer.yaml")["spec"]["source"]["helm"]["valuesObject"]
    assert trainer["manager"] == {"replicas": 0} and trainer["webhook"] == {"failurePolicy": "Ignore"}
    east = _load("prod-east/platform/application-prod-east-kubeflow-trainer.yaml")["spec"]["source"]["helm"]
    assert "manager" not in east["valuesObject"]  # a worker runs Trainer's controller


def test_prod_east_installs_kubeflow_trainer_after_kueue_and_jobset() -> None:
    app = _installed_after("kubeflow-trainer", "kueue", "jobset")
    source = app["spec"]["source"]
    assert (source["repoURL"], source["chart"], source["targetRevision"]) == (
        "ghcr.io/kubeflow/charts", "kubeflow-trainer", "2.2.1")
    assert app["spec"]["destination"]["namespace"] == "kubeflow-system"
    # The cluster's own JobSet, not the chart's second one; the runtime the profiles name.
    assert source["helm"]["valuesObject"] == {"jobset": {"install": False},
                                              "runtimes": {"torchDistributed": {"enabled": True}}}
    # Its cert-controller fills the webhook Secret the chart declares empty: Argo CD must leave it.
    assert {"group": "", "kind": "Secret", "name": "kubeflow-trainer-webhook-cert", "jsonPointers": ["/data"],
            "namespace": "kubeflow-system"} in app["spec"]["ignoreDifferences"]
    assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]


def test_members_get_trainjobs_only_where_trainer_runs() -> None:
    """TrainJobs, and reads of the runtimes they name (what Kubeflow's Trainer SDK lists), never a write of a
    TrainingRuntime (whose pod templates would pass by the profiles' rules)."""
    def trainer_rules(cluster: str, role: str = "teams/clusterrole-fleetgen-team-member.yaml") -> list[dict]:
        return [rule for rule in _load(f"{cluster}/{role}")["rules"] if "trainer.kubeflow.org" in rule["apiGroups"]]

    granted = trainer_rules("prod-east")
    assert [rule["resources"] for rule in granted] == [["trainjobs"], ["trainjobs/status"], ["trainingruntimes"]]
    assert "create" in granted[0]["verbs"] and "update" not in granted[0]["verbs"] and granted[1]["verbs"] == ["get"]
    assert granted[2]["verbs"] == ["get", "list", "watch"]
    assert trainer_rules("prod-west") == trainer_rules("hub") == granted and trainer_rules("dev") == []
    wide = "teams/ml-research/clusterrole-fleetgen-members-ml-research.yaml"
    assert trainer_rules("prod-east", wide) == [{"apiGroups": ["trainer.kubeflow.org"],
                                                 "resources": ["clustertrainingruntimes"],
                                                 "verbs": ["get", "list", "watch"]}]
    assert trainer_rules("dev", wide) == []


def test_trainer_where_kueue_would_not_queue_it_or_on_a_manager_with_lws_is_refused(fleet_root: Path) -> None:
    from tests.refusals import refused_at

    refused_at(fleet_root, "clusters/prod-east.yaml", "  version: v0.19.2\n",
               "  version: v0.19.2\n  integrations: [jobset.x-k8s.io/jobset, batch/job, ray.io/raycluster, "
               "ray.io/rayjob]\n", "clusters/prod-east.yaml:51: operators:",
               "trainer is on, but Kueue would not queue trainer.kubeflow.org/trainjob,",
               "add trainer.kubeflow.org/trainjob to kueue.integrations")
    edit(fleet_root, "clusters/prod-east.yaml", ", ray.io/rayjob]\n",
         ", ray.io/rayjob, trainer.kubeflow.org/trainjob]\n")
    refused_at(fleet_root, "clusters/hub.yaml", "operators: {ray: true, trainer: true}",
               "operators: {ray: true, trainer: true, lws: true}", "clusters/hub.yaml",
               "lws is on, but a MultiKueue manager cannot dispatch its kinds "
               "(leaderworkerset.x-k8s.io/leaderworkerset): a LeaderWorkerSet v0.9.0 has no spec.managedBy",
               "turn operators.lws on in the worker clusters' files and submit those there")


def _team_network_policies(cluster: str, root: Path = REPO) -> dict[str, dict[str, dict]]:
    """Every NetworkPolicy under a cluster's team namespaces: by namespace, then by name."""
    out: dict[str, dict[str, dict]] = {}
    for path in sorted((root / "rendered" / cluster / "teams").rglob("networkpolicy-*.yaml")):
        body = yaml.safe_load(path.read_text())
        out.setdefault(body["metadata"]["namespace"], {})[body["metadata"]["name"]] = body
    return out


def test_kuberay_may_reach_ray_heads_dashboard_and_serve_proxy_and_nothing_else() -> None:
    """KubeRay's operator follows a RayJob through its head's dashboard on 8265 (ray-operator v1.6.2
    controllers/ray/rayjob_controller.go:300-305) and asks a RayService head's Serve proxy on 8000 whether it
    is healthy (rayservice_controller.go:1815-1846): the isolation policy's deny-by-default ingress cut both
    off. Beside that policy, unchanged, one policy per port lets in the operator's pods, from its namespace
    as rendered, to Ray heads on that port only; ingress only, so every team pod's egress is still the
    isolation policy's."""
    from generator.compile.namespace_policies import ISOLATION_POLICY
    from generator.kinds.ray import KUBERAY

    ports = {"fleetgen-operator-ray-dashboard": 8265, "fleetgen-operator-ray-serve": 8000}
    app = _load("prod-east/platform/application-prod-east-kuberay-operator.yaml")["spec"]
    flux = _load("prod-west/platform/helmrelease-kuberay-operator.yaml")["spec"]
    # Where and as what the platform installs the operator: the chart labels its pods with the release.
    assert app["destination"]["namespace"] == flux["targetNamespace"] == KUBERAY.namespace == "kuberay-system"
    assert app["source"]["helm"]["releaseName"] == flux["releaseName"] == dict(KUBERAY.pods)[
        "app.kubernetes.io/instance"]
    for cluster in ("prod-east", "prod-west", "hub"):
        policies = _team_network_policies(cluster)
        assert policies, cluster
        for namespace, by_name in policies.items():
            assert sorted(by_name) == [*sorted(ports), ISOLATION_POLICY], (cluster, namespace)
            isolation = by_name[ISOLATION_POLICY]["spec"]
            assert isolation["podSelector"] == {} and isolation["ingress"] == [{"from": [{"podSelector": {}}]}]
            for name, port in ports.items():
                assert by_name[name]["spec"] == {
                    "podSelector": {"matchLabels": {"ray.io/node-type": "head"}},
                    "policyTypes": ["Ingress"],
                    "ingress": [{
                        "from": [{"namespaceSelector": {"matchLabels": {
                                      "kubernetes.io/metadata.name": "kuberay-system"}},
                                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator",
                                                                  "app.kubernetes.io/instance": "kuberay-operator"}}}],
                        "ports": [{"protocol": "TCP", "port": port}]}]}, (cluster, namespace, name)


def test_a_cluster_without_kuberay_lets_no_operator_in(fleet_root: Path) -> None:
    """dev runs no operator: its team namespaces keep the isolation policy alone, until its file turns
    KubeRay on; and where isolation is off, no operator's policy comes either."""
    from generator.compile.namespace_policies import ISOLATION_POLICY

    names = ["fleetgen-operator-ray-dashboard", "fleetgen-operator-ray-serve"]
    before = _team_network_policies("dev", fleet_root)
    assert before and all(sorted(p) == [ISOLATION_POLICY] for p in before.values()), before
    path = fleet_root / "clusters" / "dev.yaml"
    path.write_text(path.read_text() + "operators: {ray: true}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    after = _team_network_policies("dev", fleet_root)
    assert after.keys() == before.keys() and all(sorted(p) == [*names, ISOLATION_POLICY] for p in after.values())
    add_tenancy(fleet_root, "dev", "  network: {isolate: false}\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert _team_network_policies("dev", fleet_root) == {}
