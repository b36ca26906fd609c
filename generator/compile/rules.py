"""Alerting and recording rules, built from the signals table.

Prometheus rule groups (one per concern) for DCGM and Kueue metrics, and Loki rule groups
(LogQL) for the kernel log. Every alert carries `severity`, `fleetgen_action` (what the health
reconciler does about it), a summary naming the node and GPU, and a runbook text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from generator.signals import (
    BENIGN_SXIDS,
    CONDITIONS,
    KERNEL_LOG_SERVICE,
    KUEUE,
    XID_CLASSES,
    Condition,
    XidClass,
)

EXPORTER_JOB = "gpu-exporter"
"""The ServiceMonitor sets this job label on every GPU exporter series, whichever exporter runs."""
EXPORTER = f'{{job="{EXPORTER_JOB}"}}'
GPU_KEYS = "node, gpu, UUID"
XID_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"

XID_ALERTS: dict[str, str] = {
    "hardware": "GPUXidHardwareError",
    "recovery-action": "GPUXidRecoveryActionRequired",
    "reset-required": "GPUXidResetRequired",
    "needs-corroboration": "GPUXidNeedsCorroboration",
}
"""XID classes that alert (the others are recorded only)."""


def alert(name: str, expr: str, for_: str, severity: str, action: str, concern: str,
          summary: str, runbook: str) -> dict[str, Any]:
    """One alerting rule in the house shape: `for` (omitted when "0m"), severity, fleetgen_action
    and concern labels, summary and runbook annotations."""
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ != "0m":
        rule["for"] = for_
    rule["labels"] = {"severity": severity, "fleetgen_action": action, "concern": concern}
    rule["annotations"] = {"summary": summary, "runbook": runbook}
    return rule


def _xid_recording(cls: XidClass) -> dict[str, Any]:
    return {"record": "fleetgen:gpu_xid_errors:sum",
            "expr": f'sum by ({GPU_KEYS}, xid) ({XID_METRIC}{{xid=~"{cls.regex}"}})',
            "labels": {"class": cls.name}}


def _xid_alert(cls: XidClass) -> dict[str, Any]:
    expr = f'max by ({GPU_KEYS}, xid) ({XID_METRIC}{{xid=~"{cls.regex}"}}) > 0'
    summary = (f"XID {{{{ $labels.xid }}}} ({cls.meaning}) on node {{{{ $labels.node }}}} "
               f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.UUID }}}})")
    rule = alert(XID_ALERTS[cls.name], expr, "0m", cls.severity, cls.action, "xid", summary, cls.runbook)
    if cls.reset:
        rule["keep_firing_for"] = RESET_ALERT_HOLD
    return rule


RESET_ALERT_HOLD = "24h"
"""How long a reset-class XID alert keeps firing after the exporter's 5-minute window forgot it
(issue 14: it resolved after 5 minutes, as if fixed). The fault lasts until a GPU reset or a
reboot, which no metric shows; the health reconciler holds the node until the bootID changes."""


def _condition_alert(c: Condition) -> dict[str, Any]:
    return alert(c.alert, c.promql(EXPORTER), c.for_, c.severity, c.action, c.concern, c.summary, c.runbook)


def _kueue_rules() -> list[dict[str, Any]]:
    return [
        {"record": "fleetgen:kueue_quota_used:ratio",
         "expr": "sum by (cluster_queue, flavor, resource) (kueue_cluster_queue_resource_usage) "
                 "/ sum by (cluster_queue, flavor, resource) (kueue_cluster_queue_nominal_quota > 0)"},
        alert("KueuePendingWorkloadsGrowing",
               f"sum by (cluster_queue) (kueue_pending_workloads) > {KUEUE.pending_min} "
               f"and sum by (cluster_queue) (delta(kueue_pending_workloads[{KUEUE.pending_growth_window}])) > 0",
               KUEUE.pending_for, "warning", "none", "kueue",
               "{{ $value }} workloads pending in ClusterQueue {{ $labels.cluster_queue }} and rising",
               "The team's queue is short of quota. Check `fleetgen explain team` for its guaranteed and "
               "borrowable GPUs and whether lenders in its cohort are busy."),
        alert("KueueClusterQueueAtQuota",
               "fleetgen:kueue_quota_used:ratio >= 1 and on (cluster_queue) "
               "(sum by (cluster_queue) (kueue_pending_workloads) > 0)",
               KUEUE.at_quota_for, "info", "none", "kueue",
               "ClusterQueue {{ $labels.cluster_queue }} has used all its {{ $labels.resource }} in "
               "{{ $labels.flavor }} with work waiting",
               "Expected during peaks; if it lasts, raise the team's quota or let it borrow (teams/<team>.yaml)."),
        alert("KueueAdmissionStalled",
               # `unless ... > 0`, not `and ... == 0`: a queue that never admitted anything has no
               # admitted counter at all, and `and` against a missing series never fired (issue 14).
               "sum by (cluster_queue) (kueue_pending_workloads{status=\"active\"}) > 0 unless on (cluster_queue) "
               f"sum by (cluster_queue) (increase(kueue_admitted_workloads_total[{KUEUE.stalled_for}])) > 0",
               KUEUE.stalled_for, "warning", "none", "kueue",
               "ClusterQueue {{ $labels.cluster_queue }} has admissible work but admitted nothing for "
               f"{KUEUE.stalled_for}",
               "Check the Kueue controller logs and the queue's conditions (kubectl describe clusterqueue); "
               "a missing ResourceFlavor or an inactive cohort stops admission."),
    ]


def prometheus_groups() -> list[tuple[str, list[dict[str, Any]]]]:
    """(concern, rules) for every Prometheus rule group, in a stable order."""
    xid = [_xid_recording(c) for c in XID_CLASSES]
    xid += [_xid_alert(c) for c in XID_CLASSES if c.name in XID_ALERTS]
    groups: list[tuple[str, list[dict[str, Any]]]] = [("gpu-xid", xid)]
    for concern in ("memory", "interconnect", "availability", "thermal"):
        groups.append((f"gpu-{concern}", [_condition_alert(c) for c in CONDITIONS if c.concern == concern]))
    groups.append(("kueue", _kueue_rules()))
    return groups


# --- Loki (LogQL) ---------------------------------------------------------------------------

KERNEL_STREAM = f'{{service_name="{KERNEL_LOG_SERVICE}"}}'
XID_LINE = r'|= "NVRM: Xid" | regexp `NVRM: Xid \((?P<pci>[^)]+)\): (?P<xid>[0-9]+),`'
RECOVERY_ACTION = (r'| regexp `recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) to 0x[0-9a-fA-F]+ '
                   r'\((?P<action>[^)]*)\)` | action != "None"')
"""XID 154 says which recovery action the driver now wants ("... changed from 0x0 (None) to 0x1 (GPU
Reset Required)", "(Node Reboot Required)", "(OS Reboot)", "(PF FLR)"); a change back to None is the
driver saying the GPU recovered, not a fault (issue 14: every 154 line counted). Lines without the
phrase get no `action` label and pass."""
XID_PARSE = f"{XID_LINE} {RECOVERY_ACTION}"
SXID_PARSE = r'|= "SXid" | regexp `nvidia-nvswitch(?P<switch>[0-9]+): SXid \((?P<pci>[^)]+)\): (?P<sxid>[0-9]+),`'
BENIGN_SXID_FILTER = f'| sxid !~ "{"|".join(str(c) for c in BENIGN_SXIDS)}"'
LOG_WINDOW = "5m"


def _only_nodes(nodes: Sequence[str] | None) -> str:
    """A label filter keeping the lines of `nodes` (names are DNS subdomains: only `.` needs
    escaping in the regex; a raw string keeps the backslash out of LogQL's string escapes)."""
    if nodes is None:
        return ""
    names = "|".join(n.replace(".", "\\.") for n in sorted(nodes))
    return f" | k8s_node_name =~ `{names}`"


def xid_lines_query(regex: str | None = None, window: str = LOG_WINDOW, nodes: Sequence[str] | None = None) -> str:
    """XID kernel-log lines per node and code (optionally only codes matching `regex`, only `nodes`)."""
    only = f' | xid =~ "{regex}"' if regex else ""
    return (f"sum by (k8s_node_name, xid) (count_over_time({KERNEL_STREAM} {XID_PARSE}{only}{_only_nodes(nodes)} "
            f"[{window}]))")


def sxid_lines_query(window: str = LOG_WINDOW, nodes: Sequence[str] | None = None) -> str:
    """Non-benign NVSwitch SXid lines per node and code (only `nodes`, when given)."""
    return (f"sum by (k8s_node_name, sxid) (count_over_time({KERNEL_STREAM} {SXID_PARSE} "
            f"{BENIGN_SXID_FILTER}{_only_nodes(nodes)} [{window}]))")


def loki_groups() -> list[dict[str, Any]]:
    """Loki ruler groups: XID and SXid line counts, and alerts on fatal classes."""
    records = [{"record": "fleetgen:kernel_xid_lines:count5m", "expr": xid_lines_query()},
               {"record": "fleetgen:kernel_sxid_lines:count5m", "expr": sxid_lines_query()}]
    alerts = []
    for cls in XID_CLASSES:
        if cls.action != "cordon":
            continue
        alerts.append(alert(f"Kernel{XID_ALERTS[cls.name]}", f"{xid_lines_query(cls.regex)} > 0", "0m",
                             cls.severity, cls.action, "xid",
                             f"Kernel log: XID {{{{ $labels.xid }}}} ({cls.meaning}) on node "
                             "{{ $labels.k8s_node_name }}", cls.runbook))
    alerts.append(alert("KernelNVSwitchSXidError", f"{sxid_lines_query()} > 0", "0m", "warning", "count", "xid",
                         "Kernel log: NVSwitch SXid {{ $labels.sxid }} on node {{ $labels.k8s_node_name }}",
                         "Non-benign NVSwitch error: check `nvidia-smi nvlink -s` and the fabric manager log; "
                         "multi-GPU jobs on this node may hang."))
    return [{"name": "fleetgen-kernel-log", "interval": "1m", "rules": records + alerts}]
