"""The rendered chart values through the real charts: `helm template` (helm built at the pinned
version) of the Kueue and JobSet charts shipped inside their Go modules, then kubeconform strict
on what the charts make of our values (issue 14)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.checks import load_fleet
from tests.conftest import REPO
from tests.test_kubeconform import kubeconform, kubernetes_version
from tests.test_platform import _values

CLUSTERS = ("dev", "hub", "prod-east", "prod-west")


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


def test_each_cluster_installs_the_kueue_it_declares() -> None:
    """Issue 14: dev declared a Kueue v0.15 and got the pinned 0.19.2 chart."""
    for cluster in CLUSTERS:
        declared = yaml.safe_load((REPO / "clusters" / f"{cluster}.yaml").read_text())["kueue"]["version"]
        assert f"v{chart_version(cluster, 'kueue')}" == declared, cluster


def helm_template(chart: str, cluster: str, namespace: str, tmp_path: Path) -> list[dict[str, Any]]:
    """What the chart renders with the values fleetgen wrote for this cluster (once per session)."""
    key = (chart, cluster, namespace)
    if key not in _TEMPLATED:
        _TEMPLATED[key] = _helm_template(chart, cluster, namespace, tmp_path)
    return _TEMPLATED[key]


_TEMPLATED: dict[tuple[str, str, str], list[dict[str, Any]]] = {}


def _helm_template(chart: str, cluster: str, namespace: str, tmp_path: Path) -> list[dict[str, Any]]:
    from tests.upstream import tools

    values = tmp_path / f"{cluster}-{chart}-values.yaml"
    values.write_text(yaml.safe_dump(_values(cluster, chart)))
    version = chart_version(cluster, chart)
    source = tools.chart(chart, version if version.startswith("v") else f"v{version}")  # a module tag
    proc = subprocess.run([str(tools.binary("helm")), "template", chart, str(source), "--namespace",
                           namespace, "--values", str(values), "--kube-version", f"{kubernetes_version(cluster)}.0"],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


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
    frameworks = load_fleet(REPO).clusters[cluster].config.frameworks
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


def test_what_kuberays_chart_makes_of_our_values_is_valid(upstream_tools: None, kubeconform_on_path: Path,
                                                         shared_schemas: Path, tmp_path: Path) -> None:
    """Issue 32: prod-east's `operators.ray` through KubeRay's own chart (the kuberay module at the pin):
    the operator scraped by Prometheus, no batch scheduler, and valid for kubeconform."""
    docs = helm_template("kuberay-operator", "prod-east", "kuberay-system", tmp_path)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any("batch-scheduler" in a for a in args) and "--enable-metrics=true" in args, args
    assert any(d["kind"] == "ServiceMonitor" for d in docs)
    assert_kubeconform_strict(docs, "prod-east", kubeconform_on_path, shared_schemas, tmp_path)


def test_what_kubeflow_trainers_chart_makes_of_our_values_is_valid(
        upstream_tools: None, kubeconform_on_path: Path, shared_schemas: Path, tmp_path: Path) -> None:
    """Issue 32: prod-east's `operators.trainer` through Kubeflow Trainer's own chart (the trainer module at
    the pin, its subcharts from theirs): no second JobSet, the torch-distributed runtime the profiles name,
    the webhook Secret Argo CD is told to leave to the controller, and valid for kubeconform -strict."""
    from generator.compile.platform import WRITTEN_BY_THE_CONTROLLER
    from generator.config.platform import TRAINER_RUNTIME
    from tests.test_kubeconform import operator_schemas

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
