"""The kernel-log rules on a real Loki: the pinned chart's configuration for our values, the rules
where its sidecar puts them, lines pushed as our collector sends them, and what the ruler then
sends to Alertmanager and remote-writes to a real Prometheus (issue 14). The reconciler's Loki
source is run against the same program, including Loki's own series limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generator.compile.monitoring import KERNEL_LOG_TENANT
from generator.reconciler import sources
from generator.reconciler.sources import LokiSource
from generator.versions import component
from tests.rendered import rendered_object
from tests.upstream.kubeconform import assert_kubeconform_strict
from tests.upstream.loki_server import CLUSTER, HARDWARE, LokiServer, Receiver, collector_resource, find, loki_chart
from tests.upstream.processes import wait_or_fail
from tests.upstream.prometheus_server import PrometheusServer

pytestmark = pytest.mark.usefixtures("upstream_tools")

RESET = "NVRM: Xid (PCI:0000:1b:00): 62, pid=771, name=python3, Internal micro-controller halt"
APP = "NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1)"
ACTION = ("NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
          "(GPU Reset Required)")
ALL_CLEAR = ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) "
             "to 0x0 (None)")
SXID = "nvidia-nvswitch3: SXid (PCI:0000:4e:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error"
BENIGN_SXID = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12021, Non-fatal, Link 8 ingress invalid ACL"
KERNEL_LOG = {  # node -> the kernel lines it logs
    "gpu-a": [HARDWARE, HARDWARE],
    "gpu-b": [ALL_CLEAR],
    "gpu-c": [ACTION],
    "gpu-d": [APP, APP, APP],
    "gpu-e": [RESET],
    "gpu-f": [SXID, BENIGN_SXID],
}


def _rules(cluster: str, docs: list[dict[str, Any]], interval: str) -> dict[str, str]:
    """The rendered rules ConfigMap, as the chart's sidecar would pick it up; group interval
    shortened for the test (evaluation scheduling only: the expressions are unchanged)."""
    config_map = rendered_object(cluster, "monitoring", "configmap-fleetgen-loki-rules.yaml")
    statefulset = find(docs, "StatefulSet", "loki")
    (sidecar,) = [c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == "loki-sc-rules"]
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert config_map["metadata"]["labels"][env["LABEL"]] == env["LABEL_VALUE"], "the sidecar would not load it"
    assert config_map["metadata"]["namespace"] == statefulset["metadata"]["namespace"]  # the sidecar's namespace
    out = {}
    for name, text in config_map["data"].items():
        assert "interval: 1m\n" in text
        out[name] = text.replace("interval: 1m\n", f"interval: {interval}\n")
    return out


def test_the_chart_runs_the_release_we_pin(tmp_path: Path) -> None:
    """The chart's image is the Loki the tests build and run, not the chart's own default."""
    from tests.upstream import tools

    docs = loki_chart(tmp_path)
    (container,) = [c for c in find(docs, "StatefulSet", "loki")["spec"]["template"]["spec"]["containers"]
                    if c["name"] == "loki"]
    assert container["image"] == f"docker.io/grafana/loki:{component('loki').app}"
    assert tools.BY_NAME["loki"].version == f"v{component('loki').app}"


def test_the_ruler_alerts_and_records_what_the_kernel_logged(tmp_path: Path) -> None:
    docs = loki_chart(tmp_path)
    receiver = Receiver()
    (tmp_path / "prometheus").mkdir()
    prometheus = PrometheusServer(tmp_path / "prometheus", [], {}, flags=("--web.enable-remote-write-receiver",))
    (tmp_path / "loki").mkdir()
    with prometheus:
        loki = LokiServer(tmp_path / "loki", docs, _rules(CLUSTER, docs, "2s"), receiver.url,
                          f"{prometheus.url}/api/v1/write").start()
        try:
            groups = loki.get("/loki/api/v1/rules")
            assert [g["name"] for groups_ in groups.values() for g in groups_] == ["fleetgen-kernel-log"], groups
            for node, lines in KERNEL_LOG.items():
                loki.push_otlp(collector_resource(CLUSTER, node), lines)
            expected = {("KernelGPUXidHardwareError", "gpu-a", "79"),
                        ("KernelGPUXidRecoveryActionRequired", "gpu-c", "154"),
                        ("KernelGPUXidResetRequired", "gpu-e", "62"),
                        ("KernelNVSwitchSXidError", "gpu-f", "12028")}
            wait_or_fail(lambda: receiver.names() >= expected, 60, f"alerts {expected}; got {receiver.names()}")

            def recorded(metric: str, label: str) -> dict[tuple[str, str], float]:
                result = prometheus.api("query", query=metric)["data"]["result"]
                return {(s["metric"]["k8s_node_name"], s["metric"][label]): float(s["value"][1]) for s in result}

            xids = wait_or_fail(lambda: recorded("fleetgen:kernel_xid_lines:count5m", "xid"), 60,
                                "the XID recording rule remote-written to Prometheus")
            sxids = wait_or_fail(lambda: recorded("fleetgen:kernel_sxid_lines:count5m", "sxid"), 30,
                                 "the SXid recording rule remote-written to Prometheus")
        finally:
            loki.stop()
            receiver.close()
    # XID 154's all-clear (gpu-b) and the benign SXid are not counted; the application XID 13 is
    # recorded but never alerted on.
    assert xids == {("gpu-a", "79"): 2, ("gpu-c", "154"): 1, ("gpu-d", "13"): 3, ("gpu-e", "62"): 1}
    assert sxids == {("gpu-f", "12028"): 1}
    assert receiver.names() == expected
    alert = next(a for a in receiver.alerts if a["labels"]["alertname"] == "KernelGPUXidHardwareError")
    assert alert["labels"]["fleetgen_action"] == "cordon" and "gpu-a" in alert["annotations"]["summary"]


def test_the_reconciler_reads_a_real_loki_past_its_series_limit(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Loki's own refusal (max_query_series, HTTP 400) makes the source ask per batch of nodes,
    which Loki answers: every node's evidence arrives and none is unknown."""
    docs = loki_chart(tmp_path)
    receiver = Receiver()
    (tmp_path / "loki").mkdir()
    loki = LokiServer(tmp_path / "loki", docs, {}, receiver.url, receiver.url + "/api/v1/write",
                      overrides={KERNEL_LOG_TENANT: {"max_query_series": 2}})
    loki.start()
    try:
        for node, lines in KERNEL_LOG.items():
            loki.push_otlp(collector_resource(CLUSTER, node), lines)
        nodes = [*KERNEL_LOG, "gpu-quiet"]
        source = LokiSource(loki.url, tenant=KERNEL_LOG_TENANT)
        with pytest.raises(sources.SourceError) as refused:
            source.query("sum by (k8s_node_name) (count_over_time({service_name=\"fleetgen-kernel\"} [5m]))")
        assert refused.value.answered and "maximum number of series (2) reached" in str(refused.value)
        monkeypatch.setattr(sources, "LOKI_NODES_PER_QUERY", 2)
        observed = wait_or_fail(lambda: (o := source.observe(nodes)) and o["gpu-a"].evidence and o, 30,
                                "XIDs visible to the reconciler")
    finally:
        loki.stop()
        receiver.close()
    signals = {node: sorted(e.signal for e in obs.evidence) for node, obs in observed.items()}
    assert signals == {"gpu-a": ["xid-79"], "gpu-b": [], "gpu-c": ["xid-154"], "gpu-d": ["xid-13"],
                       "gpu-e": ["xid-62"], "gpu-f": ["sxid-12028"], "gpu-quiet": []}
    assert not any(obs.unknown_signals for obs in observed.values())
    assert observed["gpu-a"].state == "faulty" and observed["gpu-d"].state == "warn"


@pytest.mark.parametrize("cluster", ["dev", "prod-east", "prod-west"])
def test_what_the_loki_chart_makes_of_our_values_is_valid(cluster: str, kubeconform_on_path: Path,
                                                          shared_schemas: Path, tmp_path: Path) -> None:
    docs = loki_chart(tmp_path, cluster)
    assert_kubeconform_strict(docs, cluster, kubeconform_on_path, shared_schemas, tmp_path)
    # Single binary with its ruler: no read/write/backend pods, the rules sidecar beside Loki.
    workloads = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs
                       if d["kind"] in ("StatefulSet", "Deployment"))
    assert workloads == ["Deployment/loki-gateway", "StatefulSet/loki"], workloads
