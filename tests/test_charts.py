"""The rendered chart values through the real charts: `helm template` (helm built at the pinned
version) of the Kueue and JobSet charts shipped inside their Go modules, then kubeconform strict
on what the charts make of our values (issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.checks import load_fleet
from generator.kinds import frameworks_of
from tests.conftest import REPO
from tests.rendered import chart_version
from tests.upstream.charts import helm_template
from tests.upstream.kubeconform import assert_kubeconform_strict, operator_schemas

CLUSTERS = ("dev", "hub", "prod-east", "prod-west")


def test_each_cluster_installs_the_kueue_it_declares() -> None:
    """Issue 14: dev declared a Kueue v0.15 and got the pinned 0.19.2 chart."""
    for cluster in CLUSTERS:
        declared = yaml.safe_load((REPO / "clusters" / f"{cluster}.yaml").read_text())["kueue"]["version"]
        assert f"v{chart_version(cluster, 'kueue')}" == declared, cluster


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_kueue_webhooks_match_team_namespaces_only(cluster: str, upstream_tools: None, tmp_path: Path) -> None:
    """While Kueue is down its `pod` webhook (failurePolicy Fail) refused every pod in the
    namespaces it matched: monitoring, gpu-operator, argocd, flux-system and the reconciler's
    among them. The chart takes the webhooks' namespaceSelector from our Configuration."""
    docs = helm_template("kueue", cluster, "kueue-system", tmp_path)
    hooks = {hook["name"]: hook for doc in docs if doc["kind"].endswith("WebhookConfiguration")
             for hook in doc["webhooks"]}
    pod = hooks["mpod.kb.io"]
    # With the `pod` integration on, the webhook fails closed: it would block everything it matches.
    # A MultiKueue manager dispatches Jobs and JobSets only, and the chart then makes it Ignore.
    frameworks = frameworks_of(load_fleet(REPO).clusters[cluster].config)
    assert pod["failurePolicy"] == ("Fail" if "pod" in frameworks else "Ignore"), frameworks
    team_only = {"matchExpressions": [{"key": "fleetgen.io/team", "operator": "Exists"}]}
    assert all(hook["namespaceSelector"] == team_only for name, hook in hooks.items()
               if name not in ("mresourceflavor.kb.io", "vresourceflavor.kb.io", "vclusterqueue.kb.io",
                               "mclusterqueue.kb.io", "vcohort.kb.io", "mworkload.kb.io", "vworkload.kb.io")
               and "namespaceSelector" in hook), {n: h.get("namespaceSelector") for n, h in hooks.items()}
    for path in (REPO / "rendered" / cluster).rglob("namespace-*.yaml"):
        namespace = yaml.safe_load(path.read_text())
        is_team = "fleetgen.io/team" in (namespace["metadata"].get("labels") or {})
        folder = path.relative_to(REPO / "rendered" / cluster).parts[0]
        assert is_team == (folder == "teams"), path  # platform namespaces never carry the label


@pytest.mark.parametrize(("chart", "namespace"), [("kueue", "kueue-system"), ("jobset", "jobset-system")])
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_what_the_charts_make_of_our_values_is_valid(chart: str, namespace: str, cluster: str,
                                                      upstream_tools: None, kubeconform_on_path: Path,
                                                      shared_schemas: Path, tmp_path: Path) -> None:
    assert_kubeconform_strict(helm_template(chart, cluster, namespace, tmp_path), cluster, kubeconform_on_path,
                              shared_schemas, tmp_path)


def test_what_kuberays_chart_makes_of_our_values_is_valid(upstream_tools: None, kubeconform_on_path: Path,
                                                         shared_schemas: Path, tmp_path: Path) -> None:
    """Issue 32: prod-east's `operators.ray` through KubeRay's own chart (the kuberay module at the pin):
    the operator scraped by Prometheus, no batch scheduler, and valid for kubeconform. Its pods carry the
    labels fleetgen-operator-ray-dashboard and -serve let in, and it reaches Ray heads directly, not through the API
    server's proxy (which that policy would not concern)."""
    from generator.kinds.ray import KUBERAY

    docs = helm_template("kuberay-operator", "prod-east", KUBERAY.namespace, tmp_path)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any("batch-scheduler" in a for a in args) and "--enable-metrics=true" in args, args
    assert not any("use-kubernetes-proxy" in a for a in args), args
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert dict(KUBERAY.pods).items() <= pod_labels.items(), pod_labels
    assert any(d["kind"] == "ServiceMonitor" for d in docs)
    assert_kubeconform_strict(docs, "prod-east", kubeconform_on_path, shared_schemas, tmp_path)


def test_what_kubeflow_trainers_chart_makes_of_our_values_is_valid(
        upstream_tools: None, kubeconform_on_path: Path, shared_schemas: Path, tmp_path: Path) -> None:
    """Issue 32: prod-east's `operators.trainer` through Kubeflow Trainer's own chart (the trainer module at
    the pin, its subcharts from theirs): no second JobSet, the torch-distributed runtime the profiles name,
    the webhook Secret Argo CD is told to leave to the controller, and valid for kubeconform -strict."""
    from generator.compile.platform import WRITTEN_BY_THE_CONTROLLER
    from generator.config.platform import TRAINER_RUNTIME

    docs = helm_template("kubeflow-trainer", "prod-east", "kubeflow-system", tmp_path)
    kinds = sorted(d["kind"] for d in docs)
    assert "CustomResourceDefinition" not in kinds and not any(
        d["kind"] == "Deployment" and "jobset" in d["metadata"]["name"] for d in docs), kinds
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterTrainingRuntime"] == [TRAINER_RUNTIME]
    (ignored,) = WRITTEN_BY_THE_CONTROLLER["kubeflow-trainer"]
    (secret,) = [d for d in docs if d["kind"] == "Secret"]
    assert secret["metadata"]["name"] == ignored["name"] and set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt",
                                                                                     "tls.key"}
    assert_kubeconform_strict(docs, "prod-east", kubeconform_on_path, shared_schemas, tmp_path,
                              operator_schemas(tmp_path / "operators"))


def test_trainer_2_3_makes_its_crds_templates_and_its_runtimes_a_hook_job(upstream_tools: None, tmp_path: Path) -> None:
    """Issue 57: what the releases table says Trainer 2.3.0 changes, judged by helm: its chart (the trainer module
    at v2.3.0) with the values fleetgen writes (a cluster's `versions.kubeflow-trainer` changes the chart, not
    the values) renders its CRDs as templates and no ClusterTrainingRuntime, but a post-install and post-upgrade
    hook Job, which installs kubectl from Alpine's mirrors when it runs, and whose ConfigMap holds the
    `torch-distributed` runtime."""
    from generator.config.platform import TRAINER_RUNTIME

    docs = helm_template("kubeflow-trainer", "prod-east", "kubeflow-system", tmp_path, version="2.3.0")
    kinds = [d["kind"] for d in docs]
    assert kinds.count("CustomResourceDefinition") == 3 and "ClusterTrainingRuntime" not in kinds, kinds
    hooks = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    installer = hooks["kubeflow-trainer-runtimes-installer"]
    assert installer["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade", installer
    (container,) = installer["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "docker.io/alpine:3.21" and "apk add --no-cache kubectl" in container["command"][-1]
    (runtimes,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("installer")]
    assert f"name: {TRAINER_RUNTIME}\n" in "".join(runtimes["data"].values()), runtimes["data"].keys()


def test_what_leaderworkersets_chart_makes_of_our_values_is_valid(
        upstream_tools: None, kubeconform_on_path: Path, shared_schemas: Path, tmp_path: Path) -> None:
    """Issue 32: prod-east's `operators.lws` through LeaderWorkerSet's own chart (the lws module at the pin):
    the controller's image at the release, not the module chart's `main` always pulled; its webhooks for
    LeaderWorkerSets and their pods only; its Secret declared without data (its cert-controller fills it,
    so Argo CD has nothing to put back); valid for kubeconform -strict."""
    docs = helm_template("lws", "prod-east", "lws-system", tmp_path)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == ("registry.k8s.io/lws/lws:v0.9.0", "IfNotPresent")
    hooks = [h for d in docs if d["kind"].endswith("WebhookConfiguration") for h in d["webhooks"]]
    pod_hooks = [h for h in hooks if "pods" in h["rules"][0]["resources"]]
    assert pod_hooks and all(h["objectSelector"] == {"matchExpressions": [
        {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]} for h in pod_hooks), pod_hooks
    (secret,) = [d for d in docs if d["kind"] == "Secret"]
    assert "data" not in secret
    assert_kubeconform_strict(docs, "prod-east", kubeconform_on_path, shared_schemas, tmp_path)
