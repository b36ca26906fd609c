"""Platform components and monitoring objects: engines, ordering, values from the cluster file."""

from __future__ import annotations

import csv
import io
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.compile.dashboards import queries
from generator.compile.monitoring import DCGM_COUNTERS
from generator.compile.rules import loki_groups, prometheus_groups
from generator.signals import HEALTH_TAINT_KEY
from generator.versions import lock
from tests.conftest import REPO, run
from tests.rendered import chart_values


def load(root: Path, rel: str) -> dict[str, Any]:
    return yaml.safe_load((root / "rendered" / rel).read_text())


def test_argocd_applications_are_ordered_by_sync_waves() -> None:
    waves = {}
    for path in sorted((REPO / "rendered/prod-east/platform").glob("application-*.yaml")):
        app = yaml.safe_load(path.read_text())
        waves[app["spec"]["source"]["chart"]] = int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
        assert app["metadata"]["namespace"] == "argocd"
        assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]
    # CRDs and controllers first: the operator stack, then JobSet before Kueue, then the rest.
    assert waves["kube-prometheus-stack"] < waves["jobset"] < waves["kueue"] < waves["loki"] == waves["dcgm-exporter"]
    assert max(waves.values()) < 0  # before the objects that need them (wave 0)


def test_argocd_sources_match_the_versions_lock() -> None:
    pinned = lock()
    for path in sorted((REPO / "rendered/prod-east/platform").glob("application-*.yaml")):
        source = yaml.safe_load(path.read_text())["spec"]["source"]
        component = pinned[source["helm"]["releaseName"]]
        assert source["targetRevision"] == component.version
        assert source["repoURL"] == (component.oci_repository if component.is_oci else component.repo)


def test_flux_releases_depend_on_what_they_need() -> None:
    releases = {p.stem.removeprefix("helmrelease-"): yaml.safe_load(p.read_text())
                for p in (REPO / "rendered/prod-west/platform").glob("helmrelease-*.yaml")}
    assert set(releases) == {"kube-prometheus-stack", "jobset", "kueue", "loki", "dcgm-exporter", "kuberay-operator",
                             "kubeflow-trainer"}
    deps = {name: {d["name"] for d in r["spec"].get("dependsOn", [])} for name, r in releases.items()}
    assert deps["kueue"] == {"jobset", "kube-prometheus-stack"}
    assert deps["loki"] == deps["dcgm-exporter"] == {"kube-prometheus-stack"}
    assert deps["kuberay-operator"] == {"kueue", "kube-prometheus-stack"}  # Kueue's webhooks suspend Ray kinds
    assert deps["kubeflow-trainer"] == {"jobset", "kueue"}
    assert deps["kube-prometheus-stack"] == deps["jobset"] == set()
    # OCI charts come from an OCIRepository, https charts from a HelmRepository.
    assert releases["kueue"]["spec"]["chartRef"] == {"kind": "OCIRepository", "name": "kueue",
                                                     "namespace": "flux-system"}
    oci = load(REPO, "prod-west/platform/ocirepository-kueue.yaml")
    assert oci["spec"]["url"] == "oci://registry.k8s.io/kueue/charts/kueue" and oci["spec"]["ref"]["tag"] == "0.19.2"
    repo_ref = releases["loki"]["spec"]["chart"]["spec"]["sourceRef"]
    assert repo_ref == {"kind": "HelmRepository", "name": "loki", "namespace": "flux-system"}


def test_flux_corrects_drift_and_ignores_what_argo_cd_ignores() -> None:
    """Issue 57: every HelmRelease puts back hand edits (drift detection on), leaving out exactly the fields
    Argo CD's Applications leave out for the same release (its controller writes them)."""
    from generator.compile.platform import WRITTEN_BY_THE_CONTROLLER

    releases = {p.stem.removeprefix("helmrelease-"): yaml.safe_load(p.read_text())["spec"]
                for p in (REPO / "rendered/prod-west/platform").glob("helmrelease-*.yaml")}
    apps = {a["spec"]["source"]["helm"]["releaseName"]: a["spec"]
            for a in (yaml.safe_load(p.read_text()) for p in (REPO / "rendered/prod-east/platform").glob(
                "application-*.yaml"))}
    assert set(WRITTEN_BY_THE_CONTROLLER) <= set(releases) & set(apps)
    for name, spec in releases.items():
        assert spec["driftDetection"]["mode"] == "enabled", name
        flux = [(r["target"]["kind"], r["target"]["name"], r["target"]["namespace"], r["paths"])
                for r in spec["driftDetection"].get("ignore", [])]
        argo = [(r["kind"], r["name"], r["namespace"], r["jsonPointers"])
                for r in apps.get(name, {}).get("ignoreDifferences", [])]
        assert flux == argo, name
        assert bool(flux) == (name in WRITTEN_BY_THE_CONTROLLER), name


def test_monitoring_values_come_from_the_cluster_file() -> None:
    spec = chart_values("prod-east", "kube-prometheus-stack")["prometheus"]["prometheusSpec"]
    assert spec["retention"] == "30d" and spec["scrapeInterval"] == "15s"
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "fast-ssd" and claim["resources"]["requests"]["storage"] == "500Gi"
    assert spec["resources"]["requests"] == {"cpu": "4", "memory": "32Gi"}
    # The stack stays off GPU nodes and on the system pool.
    assert spec["nodeSelector"] == {"node.fleetgen.io/pool": "system"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "NotIn",
                                            "values": ["true"]}]}]
    loki = chart_values("prod-east", "loki")
    assert loki["loki"]["limits_config"]["retention_period"] == "336h"
    assert loki["singleBinary"]["persistence"] == {"enabled": True, "size": "200Gi", "storageClass": "fast-ssd"}
    # dev asked not to avoid GPU nodes.
    assert "affinity" not in chart_values("dev", "kube-prometheus-stack")["prometheus"]["prometheusSpec"]


def test_kueue_configuration() -> None:
    config = yaml.safe_load(chart_values("prod-east", "kueue")["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]
    assert config["waitForPodsReady"]["timeout"] == "10m" and "enable" not in config["waitForPodsReady"]
    assert config["fairSharing"]["preemptionStrategies"]
    assert config["metrics"]["enableClusterQueueResources"] is True
    old = yaml.safe_load(chart_values("dev", "kueue")["managerConfig"]["controllerManagerConfigYaml"])
    assert old["apiVersion"] == "config.kueue.x-k8s.io/v1beta1"
    assert old["waitForPodsReady"]["enable"] is True and old["fairSharing"]["enable"] is True


def test_fair_sharing_only_when_some_team_sets_a_weight(fleet_root: Path) -> None:
    for team in ("ml-research", "vision", "platform-ci", "recsys", "llm-pretrain"):
        path = fleet_root / f"teams/{team}.yaml"
        path.write_text(re.sub(r"fairSharingWeight: .*\n", "", path.read_text()))
    path = fleet_root / "clusters/prod-east.yaml"
    path.write_text(re.sub(r", fairSharingWeight: [0-9.]+}", "}", path.read_text()))
    assert run(fleet_root, "render").code == 0
    app = load(fleet_root, "prod-east/platform/application-prod-east-kueue.yaml")
    values = app["spec"]["source"]["helm"]["valuesObject"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert "fairSharing" not in config


def test_exporter_and_collector_tolerate_gpu_taints_and_the_health_taint() -> None:
    ds = load(REPO, "prod-west/monitoring/daemonset-fleetgen-kernel-log.yaml")
    tolerations = ds["spec"]["template"]["spec"]["tolerations"]
    keys = {(t["key"], t.get("effect")) for t in tolerations}
    assert {("nvidia.com/gpu", "NoSchedule"), ("fleetgen.io/inference-only", "PreferNoSchedule"),
            (HEALTH_TAINT_KEY, "NoSchedule"), (HEALTH_TAINT_KEY, "NoExecute")} <= keys
    assert chart_values("prod-west", "dcgm-exporter")["tolerations"] == tolerations
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}


def test_collector_reads_the_configured_kernel_log() -> None:
    def config(cluster: str) -> dict[str, Any]:
        cm = load(REPO, f"{cluster}/monitoring/configmap-fleetgen-kernel-log.yaml")
        return yaml.safe_load(cm["data"]["collector.yaml"])
    east, west = config("prod-east"), config("prod-west")
    assert east["receivers"] == {"filelog/kernel": {"include": ["/host/var/log/kern.log"], "start_at": "end"}}
    assert west["receivers"]["journald/kernel"]["matches"] == [{"_TRANSPORT": "kernel"}]
    attrs = {a["key"]: a["value"] for a in east["processors"]["resource/node"]["attributes"]}
    assert attrs == {"k8s.node.name": "${env:K8S_NODE_NAME}", "k8s.cluster.name": "prod-east",
                     "service.name": "fleetgen-kernel"}
    assert east["exporters"]["otlphttp/loki"]["endpoint"].startswith("http://loki-gateway.monitoring.svc")


def test_service_monitor_labels_series_with_the_node() -> None:
    for cluster, port, namespace in (("prod-east", "metrics", "monitoring"), ("dev", "gpu-metrics", "gpu-operator")):
        sm = load(REPO, f"{cluster}/monitoring/servicemonitor-gpu-exporter.yaml")
        endpoint = sm["spec"]["endpoints"][0]
        assert endpoint["port"] == port
        assert {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                "targetLabel": "node"} in endpoint["relabelings"]
        assert sm["spec"]["namespaceSelector"] == {"matchNames": [namespace]}


@pytest.mark.parametrize("cluster", ["prod-east", "prod-west"])
def test_exporter_arguments_stay_strings_in_the_charts_daemonset(cluster: str) -> None:
    """Issue 14: the dcgm-exporter chart writes each argument unquoted (`- {{ . }}`,
    deployment/templates/daemonset.yaml:119-122 at 4.4.1-4.6.0; the chart is not in any Go module
    or registry this machine reaches), so `300000` became an integer in the DaemonSet and strict
    validation refused it. Each argument, printed as that template prints it, must read back as
    the same string, and be `--flag=value` of a flag the exporter has (pkg/cmd/app.go:68, 86)."""
    arguments = chart_values(cluster, "dcgm-exporter")["arguments"]
    container_args = yaml.safe_load("args:\n" + "".join(f"- {argument}\n" for argument in arguments))["args"]
    assert container_args == arguments and all(isinstance(a, str) for a in container_args)
    assert [a.split("=")[0] for a in arguments] == ["--collectors", "--xid-count-window-size"]
    assert yaml.safe_load("args:\n- 300000\n")["args"] == [300000]  # what the old `-x`, `'300000'` pair gave


def test_gpu_operator_runs_only_what_the_docs_say() -> None:
    """Issue 14: the operator's driver, toolkit, device plugin and MIG manager were left on (the
    chart's defaults, values.yaml at v25.10.0), and its default `nvidia.com/gpu` toleration was
    replaced by the pools' taints."""
    values = chart_values("dev", "gpu-operator")
    assert {k: values[k]["enabled"] for k in ("driver", "toolkit", "devicePlugin", "migManager", "gfd", "nfd")} == {
        "driver": False, "toolkit": False, "devicePlugin": False, "migManager": False, "gfd": True, "nfd": True}
    assert values["daemonsets"]["tolerations"][0] == {"key": "nvidia.com/gpu", "operator": "Exists",
                                                      "effect": "NoSchedule"}
    assert {"key": "fleetgen.io/gpu-unhealthy", "operator": "Exists", "effect": "NoSchedule"} in \
        values["daemonsets"]["tolerations"]


def test_gpu_operator_uses_our_counters() -> None:
    values = chart_values("dev", "gpu-operator")
    assert values["dcgmExporter"]["config"] == {"name": "fleetgen-dcgm-counters"}
    cm = load(REPO, "dev/platform/configmap-fleetgen-dcgm-counters.yaml")
    assert cm["metadata"]["namespace"] == "gpu-operator" and "dcgm-metrics.csv" in cm["data"]


def test_every_dcgm_metric_the_rules_use_is_collected() -> None:
    collected = {field for field, _, _ in DCGM_COUNTERS}
    exprs = [r["expr"] for _, rules in prometheus_groups() for r in rules] + queries()
    used = {m for expr in exprs for m in re.findall(r"\bDCGM_(?:FI|EXP)_[A-Z0-9_]+", expr)}
    assert used and used <= collected, used - collected
    text = load(REPO, "prod-east/platform/configmap-fleetgen-dcgm-counters.yaml")["data"]["counters.csv"]
    rows = [row for row in csv.reader(io.StringIO(text)) if row and not row[0].startswith("#")]
    assert used <= {row[0] for row in rows}


def test_the_exporter_reads_every_rendered_counters_file(upstream_tools: None, tmp_path: Path) -> None:
    """Issue 14: two help texts with commas made 4- and 5-field records, which dcgm-exporter's
    encoding/csv reader refuses, and the exporter exits. Every cluster's rendered file goes through
    Go's encoding/csv with the exporter's rules (tests/upstream/dcgm-csv); the old lines fail there."""
    from tests.upstream import tools

    files = []
    for path in sorted(REPO.glob("rendered/*/platform/configmap-fleetgen-dcgm-counters.yaml")):
        (text,) = load(REPO, str(path.relative_to(REPO / "rendered")))["data"].values()
        files.append(tmp_path / f"{path.parts[-3]}.csv")
        files[-1].write_text(text)
    assert len(files) == 3
    reader = str(tools.binary("dcgm-csv"))
    proc = subprocess.run([reader, *map(str, files)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    old = tmp_path / "old.csv"
    old.write_text("# fields\nDCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (C).\n"
                   "DCGM_EXP_GPU_HEALTH_STATUS, gauge, DCGM health watch result: 0 pass, 10 warn, 20 fail.\n")
    proc = subprocess.run([reader, str(old)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "wrong number of fields" in proc.stdout


def test_every_alert_has_severity_summary_and_runbook() -> None:
    rules = [r for _, group in prometheus_groups() for r in group] + loki_groups()[0]["rules"]
    alerts = [r for r in rules if "alert" in r]
    assert len(alerts) >= 15
    for alert in alerts:
        assert alert["labels"]["severity"] in ("critical", "warning", "info"), alert["alert"]
        assert alert["annotations"]["summary"] and len(alert["annotations"]["runbook"]) > 40, alert["alert"]
        if alert["labels"]["concern"] != "kueue":
            assert "node" in alert["annotations"]["summary"], alert["alert"]


def test_monitoring_can_be_disabled(fleet_root: Path) -> None:
    path = fleet_root / "clusters/dev.yaml"
    path.write_text(path.read_text().replace("monitoring:\n  gpuExporter: gpu-operator",
                                             "monitoring:\n  enabled: false\n  gpuExporter: gpu-operator"))
    assert run(fleet_root, "render").code == 0
    assert not (fleet_root / "rendered/dev/monitoring").exists()
    platform = sorted(p.name for p in (fleet_root / "rendered/dev/platform").glob("helmrelease-*.yaml"))
    assert platform == ["helmrelease-jobset.yaml", "helmrelease-kueue.yaml"]
    kueue = load(fleet_root, "dev/platform/helmrelease-kueue.yaml")
    assert kueue["spec"]["values"]["enablePrometheus"] is False
    assert [d["name"] for d in kueue["spec"]["dependsOn"]] == ["jobset"]


MIRROR = "https://charts.acme.internal/fleet"


def test_a_chart_mirror_serves_every_platform_chart(fleet_root: Path) -> None:
    """Air-gapped clusters: with `gitops.chartMirror` every chart comes from the mirror at its pinned
    version (Argo CD and Flux alike) and the AppProjects allow no other chart source."""
    for cluster in ("prod-east", "prod-west"):
        path = fleet_root / f"clusters/{cluster}.yaml"
        path.write_text(re.sub(r"(\n  repoUrl: .*\n)", rf"\1  chartMirror: {MIRROR}\n", path.read_text()))
    assert run(fleet_root, "render").code == 0
    pinned = lock()
    apps = [yaml.safe_load(p.read_text()) for p in (fleet_root / "rendered/prod-east/platform").glob("application-*")]
    assert len(apps) == 8  # monitoring (3), JobSet, Kueue, KubeRay, Kubeflow Trainer, LeaderWorkerSet
    for app in apps:
        source = app["spec"]["source"]
        component = pinned[source["helm"]["releaseName"]]
        assert (source["repoURL"], source["chart"]) == (MIRROR, component.chart_name)
        assert source["targetRevision"] in (component.version, component.version.removeprefix("v"))
    projects = {p.name: yaml.safe_load(p.read_text())["spec"]["sourceRepos"]
                for p in (fleet_root / "rendered/gitops/prod-east").glob("appproject-*")}
    assert projects == {"appproject-prod-east.yaml": ["https://github.com/acme/gpu-fleet.git", MIRROR],
                        "appproject-prod-east-platform.yaml": [MIRROR],
                        "appproject-prod-east-gitops.yaml": ["https://github.com/acme/gpu-fleet.git"]}
    west = fleet_root / "rendered/prod-west/platform"
    assert not list(west.glob("ocirepository-*"))
    assert {yaml.safe_load(p.read_text())["spec"]["url"] for p in west.glob("helmrepository-*")} == {MIRROR}
    for path in west.glob("helmrelease-*"):
        spec = yaml.safe_load(path.read_text())["spec"]["chart"]["spec"]
        assert spec["sourceRef"]["kind"] == "HelmRepository" and spec["chart"] == path.stem.split("-", 1)[1]


def test_a_placeholder_chart_mirror_is_refused(fleet_root: Path) -> None:
    path = fleet_root / "clusters/dev.yaml"
    path.write_text(path.read_text().replace("  engine: flux\n", "  engine: flux\n  chartMirror: https://charts.example.com\n"))
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "clusters/dev.yaml:20" in result.err and "gitops.chartMirror" in result.err and "chart mirror" in result.err


def test_dashboards_are_valid_grafana_json() -> None:
    import json

    for uid in ("gpu-health", "xid-timeline", "queue-usage"):
        cm = load(REPO, f"prod-east/monitoring/configmap-fleetgen-dashboard-{uid}.yaml")
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        board = json.loads(cm["data"][f"fleetgen-{uid}.json"])
        assert board["uid"] == f"fleetgen-{uid}" and board["panels"]
        assert all(p["targets"] and p["datasource"]["type"] == "prometheus" for p in board["panels"])


def test_argocd_applications_stay_inside_their_clusters_projects() -> None:
    """Issue 14: the platform Applications used project `default` and a hard-coded in-cluster
    destination, outside the cluster's AppProject, and no Application retried a failed sync.
    Every Application rendered for prod-east names a project rendered for prod-east whose source
    repositories and destinations admit it (Argo CD's project check: source repo and destination
    server must both match an entry)."""
    gitops = REPO / "rendered" / "gitops" / "prod-east"
    def read(path: Path) -> dict[str, Any]:
        return load(REPO, str(path.relative_to(REPO / "rendered")))

    projects = {p["metadata"]["name"]: p["spec"] for p in map(read, sorted(gitops.glob("appproject-*.yaml")))}
    platform = REPO / "rendered" / "prod-east" / "platform"
    apps = [read(f) for f in [*sorted(gitops.glob("application-*.yaml")), *sorted(platform.glob("application-*"))]]
    assert len(apps) == 10 and set(projects) == {"prod-east", "prod-east-platform", "prod-east-gitops"}
    for app in apps:
        spec = app["spec"]
        project = projects[spec["project"]]
        assert spec["source"]["repoURL"] in project["sourceRepos"], app["metadata"]["name"]
        assert spec["destination"]["server"] in [d["server"] for d in project["destinations"]]
        assert spec["syncPolicy"]["retry"]["limit"] >= 3 and spec["syncPolicy"]["retry"]["backoff"]["maxDuration"]
    # The platform project admits charts only: not the fleet repository.
    fleet_repo = read(gitops / "application-prod-east-fleet.yaml")["spec"]["source"]["repoURL"]
    assert fleet_repo not in projects["prod-east-platform"]["sourceRepos"]


def test_dashboards_tile_the_grid_without_overlap_and_grafana_reads_loki() -> None:
    """Issue 14: the per-GPU table was drawn over the two stats above it; Grafana had no Loki data
    source although the XID lines are there."""
    import json

    for path in sorted(REPO.glob("rendered/*/monitoring/configmap-fleetgen-dashboard-*.yaml")):
        (text,) = load(REPO, str(path.relative_to(REPO / "rendered")))["data"].values()
        boxes = [p["gridPos"] for p in json.loads(text)["panels"]]
        cells = [(x, y) for b in boxes for x in range(b["x"], b["x"] + b["w"]) for y in range(b["y"], b["y"] + b["h"])]
        assert len(cells) == len(set(cells)), path.name
        assert all(b["x"] + b["w"] <= 24 for b in boxes), path.name
    grafana = chart_values("prod-east", "kube-prometheus-stack")["grafana"]
    (loki,) = grafana["additionalDataSources"]
    policy = json.loads(load(REPO, "prod-east/health/configmap-fleetgen-health.yaml")["data"]["policy.json"])
    assert loki["type"] == "loki" and loki["url"] == policy["lokiUrl"]
