"""A real Prometheus server runs the rendered rules against a local DCGM-format endpoint.

The endpoint stands in for dcgm-exporter on one 8-GPU node; Prometheus scrapes it every second
under the job name the rendered ServiceMonitor sets, with the node label it adds. The alerts
are read back through Prometheus's HTTP API.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.compile.dashboards import queries
from generator.compile.rules import EXPORTER_JOB
from tests.alert_rules import write_rules
from tests.metrics import NODE, FakeNode, MetricsEndpoint, exposition
from tests.upstream.prometheus_server import PrometheusServer, tool

pytestmark = pytest.mark.upstream  # promtool / the Prometheus server: not the fast tier


def test_alerts_become_pending_and_firing_on_a_real_server(tmp_path: Path) -> None:
    tool("prometheus")
    node = FakeNode()
    with MetricsEndpoint(node.render) as endpoint, PrometheusServer(
            tmp_path, [write_rules(tmp_path)], {EXPORTER_JOB: (endpoint.port, {"node": NODE})}) as prom:
        # Healthy node first: nothing GPU-related fires.
        assert prom.api("query", query=f'up{{job="{EXPORTER_JOB}"}}')["status"] == "success"

        # XID 13 (application error) on GPU 2: must stay silent; XID 79 on GPU 3: fires at once.
        with node.lock:
            node.xids[2] = (13, 1)
            node.xids[3] = (79, 1)
        firing = prom.wait_for_alert("GPUXidHardwareError", "firing", labels={"node": NODE, "gpu": "3"})
        assert firing["labels"]["xid"] == "79" and firing["labels"]["fleetgen_action"] == "cordon"
        assert "node gpu-node-1 GPU 3" in firing["annotations"]["summary"]
        assert not [a for a in prom.alerts() if a["labels"].get("xid") == "13"]

        # One double-bit ECC increment on GPU 5.
        with node.lock:
            node.dbe[5] += 1
        prom.wait_for_alert("GPUDoubleBitECCError", "firing", labels={"gpu": "5"})

        # GPU 7 falls off the bus: 7 of 8 GPUs report; the alert waits 5m, so it is pending.
        with node.lock:
            node.present.remove(7)
        pending = prom.wait_for_alert("GPUMissingFromNode", "pending", labels={"node": NODE})
        assert pending["value"] in ("1e+00", "1")


def test_exporter_down_is_unknown_not_missing_gpus(tmp_path: Path) -> None:
    """An exporter that stops answering fires GPUExporterDown (pending: for 5m), never GPUMissingFromNode."""
    tool("prometheus")
    node = FakeNode()
    ksm = MetricsEndpoint(lambda: exposition([("kube_node_status_capacity",
                                               {"node": NODE, "resource": "nvidia_com_gpu"}, 8.0)]))
    endpoint = MetricsEndpoint(node.render)
    with ksm, endpoint, PrometheusServer(tmp_path, [write_rules(tmp_path)],
                                         {EXPORTER_JOB: (endpoint.port, {"node": NODE}),
                                          "kube-state-metrics": (ksm.port, {})}) as prom:
        gpus = prom.api("query", query=f'count(DCGM_FI_DEV_GPU_TEMP{{node="{NODE}"}})')
        assert gpus["status"] == "success"
        endpoint.__exit__()  # the exporter dies
        prom.wait_for_alert("GPUExporterDown", "pending", labels={"node": NODE})
        names = {a["labels"]["alertname"] for a in prom.alerts()}
        assert "GPUMissingFromNode" not in names, names


def test_a_gpu_node_without_any_exporter_target_is_reported(tmp_path: Path) -> None:
    """Issue 14: with no exporter target on a GPU node there is no `up` and no DCGM series, so
    nothing fired. A real Prometheus scrapes kube-state-metrics (one GPU node, gpu-node-2, has no
    exporter) and the exporter of gpu-node-1; the rendered rule, with its `for` shortened to the
    test's pace, fires for gpu-node-2 only."""
    import yaml

    tool("prometheus")
    node = FakeNode()
    ksm = MetricsEndpoint(lambda: exposition([
        ("kube_node_status_capacity", {"node": NODE, "resource": "nvidia_com_gpu"}, 8.0),
        ("kube_node_status_capacity", {"node": "gpu-node-2", "resource": "nvidia_com_gpu"}, 8.0)]))
    endpoint = MetricsEndpoint(node.render)
    rules = write_rules(tmp_path)
    groups = yaml.safe_load(rules.read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "GPUExporterMissing":
                rule["for"] = "2s"
    rules.write_text(yaml.safe_dump(groups, sort_keys=False))
    with ksm, endpoint, PrometheusServer(tmp_path, [rules], {EXPORTER_JOB: (endpoint.port, {"node": NODE}),
                                                             "kube-state-metrics": (ksm.port, {})}) as prom:
        firing = prom.wait_for_alert("GPUExporterMissing", "firing", labels={"node": "gpu-node-2"})
        assert firing["labels"]["fleetgen_action"] == "unknown"
        assert not [a for a in prom.alerts() if a["labels"]["alertname"] == "GPUExporterMissing"
                    and a["labels"].get("node") == NODE]


def test_every_dashboard_query_runs(tmp_path: Path) -> None:
    tool("prometheus")
    node = FakeNode()
    with MetricsEndpoint(node.render) as endpoint, PrometheusServer(
            tmp_path, [write_rules(tmp_path)], {EXPORTER_JOB: (endpoint.port, {"node": NODE})}) as prom:
        for expr in queries():
            answer = prom.api("query", query=expr)
            assert answer["status"] == "success", (expr, answer)
