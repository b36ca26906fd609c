"""Grafana dashboards as data: fleet GPU health, XID timeline, queue usage per team.

Each dashboard is a small table of panels (title, kind, PromQL); `dashboard()` turns it into
Grafana's JSON model. The kube-prometheus-stack Grafana sidecar loads them from ConfigMaps.
"""

from __future__ import annotations

from typing import Any

from generator.compile.rules import EXPORTER

Panel = tuple[str, str, list[tuple[str, str]]]
"""(title, "timeseries" | "table" | "stat", [(PromQL, legend)])."""

GPU_HEALTH: list[Panel] = [
    # One series per GPU and health subsystem: count GPUs, not GPU x subsystem pairs (issue 14).
    ("GPUs failing DCGM health checks", "stat",
     [("count(max by (node, gpu, UUID) (DCGM_EXP_GPU_HEALTH_STATUS) >= 20) or vector(0)", "")]),
    ("GPU exporters down", "stat", [(f"count(up{EXPORTER} == 0) or vector(0)", "")]),
    ("Health status per GPU (0 pass, 10 warn, 20 fail)", "table",
     [("max by (node, gpu, UUID, modelName) (DCGM_EXP_GPU_HEALTH_STATUS)", "")]),
    ("GPU temperature", "timeseries", [("DCGM_FI_DEV_GPU_TEMP", "{{node}} gpu{{gpu}}")]),
    ("Double-bit ECC errors (10m increase)", "timeseries",
     [("increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", "{{node}} gpu{{gpu}}")]),
    ("NVLink errors (5m increase)", "timeseries",
     [("sum by (node, gpu) (increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[5m]))", "{{node}} gpu{{gpu}}")]),
    ("GPU utilisation", "timeseries", [("avg by (node) (DCGM_FI_DEV_GPU_UTIL)", "{{node}}")]),
]

XID_TIMELINE: list[Panel] = [
    ("XID errors by class (exporter window)", "timeseries",
     [("sum by (class) (fleetgen:gpu_xid_errors:sum)", "{{class}}")]),
    ("XID errors by node, GPU and code", "timeseries",
     [("sum by (node, gpu, xid) (DCGM_EXP_XID_ERRORS_COUNT) > 0", "{{node}} gpu{{gpu}} xid {{xid}}")]),
    ("Last XID per GPU", "table", [("max by (node, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS) > 0", "")]),
]

QUEUE_USAGE: list[Panel] = [
    ("GPU quota used per team (share of nominal)", "timeseries",
     [('fleetgen:kueue_quota_used:ratio{resource=~"nvidia.com/.*"}', "{{cluster_queue}} {{flavor}}")]),
    ("GPUs: nominal vs in use per team", "table",
     [('sum by (cluster_queue, flavor) (kueue_cluster_queue_nominal_quota{resource=~"nvidia.com/.*"})', "nominal"),
      ('sum by (cluster_queue, flavor) (kueue_cluster_queue_resource_usage{resource=~"nvidia.com/.*"})', "in use")]),
    ("GPUs borrowed per team", "timeseries",
     [('sum by (cluster_queue) (clamp_min(kueue_cluster_queue_resource_usage{resource=~"nvidia.com/.*"} '
       '- kueue_cluster_queue_nominal_quota{resource=~"nvidia.com/.*"}, 0))', "{{cluster_queue}}")]),
    ("Pending workloads per team", "timeseries",
     [("sum by (cluster_queue, status) (kueue_pending_workloads)", "{{cluster_queue}} {{status}}")]),
    ("Admissions per team (1h)", "timeseries",
     [("sum by (cluster_queue) (increase(kueue_admitted_workloads_total[1h]))", "{{cluster_queue}}")]),
]

GRID = 24
"""Columns of a Grafana dashboard."""

DASHBOARDS: dict[str, tuple[str, list[Panel]]] = {
    "gpu-health": ("Fleet GPU health", GPU_HEALTH),
    "xid-timeline": ("GPU XID timeline", XID_TIMELINE),
    "queue-usage": ("Kueue queue usage per team", QUEUE_USAGE),
}


def dashboard(uid: str, cluster: str) -> dict[str, Any]:
    """Grafana dashboard JSON model for one entry of DASHBOARDS."""
    title, panels = DASHBOARDS[uid]
    out = []
    x = y = row = 0  # a cursor over Grafana's 24-column grid: panels fill a row, then wrap
    for i, (panel_title, kind, queries) in enumerate(panels):
        height, width = (4, 6) if kind == "stat" else (8, 24 if kind == "table" else 12)
        if x + width > GRID:
            x, y, row = 0, y + row, 0
        out.append({
            "id": i + 1, "title": panel_title, "type": kind,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": height, "w": width, "x": x, "y": y},
            "targets": [{"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend,
                         **({"format": "table", "instant": True} if kind == "table" else {})}
                        for j, (expr, legend) in enumerate(queries)],
        })
        x, row = x + width, max(row, height)
    return {
        "uid": f"fleetgen-{uid}", "title": f"{title} ({cluster})", "tags": ["fleetgen", "gpu"],
        "schemaVersion": 39, "version": 1, "editable": False, "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Data source"}]},
        "panels": out,
    }


def queries() -> list[str]:
    """Every PromQL expression of every dashboard (tests run them against a real Prometheus)."""
    return [expr for _, panels in DASHBOARDS.values() for _, _, targets in panels for expr, _ in targets]
