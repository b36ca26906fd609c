"""GPU health signals: the one table alerts, log rules and the health reconciler share.

NVIDIA's XID catalog sorted into classes (what each class means for a node), the SXid codes
that are benign on NVSwitch systems, and the metric conditions with their thresholds. Changing
a threshold here changes the Prometheus alert, the Loki rule and the reconciler together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["cordon", "corroborate", "count", "ignore", "unknown"]
Severity = Literal["critical", "warning", "info"]

HEALTH_TAINT_KEY = "fleetgen.io/gpu-unhealthy"
"""Taint the health reconciler puts on faulty nodes; GPU-node agents tolerate it."""
KERNEL_LOG_SERVICE = "fleetgen-kernel"
"""`service_name` of kernel-log streams in Loki; the node name is in `k8s_node_name`."""


@dataclass(frozen=True)
class XidClass:
    """A group of XID codes that call for the same response."""

    name: str
    codes: tuple[int, ...]
    action: Action
    severity: Severity
    meaning: str
    runbook: str
    reset: bool = False
    """A cordon for this class is lifted only after a GPU reset or node reboot was seen (bootID
    changed): quiet metrics alone do not show that the fault is gone."""
    corroborated_by: tuple[str, ...] = ()
    """For `corroborate`: the signals that, on the same GPU, make it a fault. Heat, NVLink noise or
    a recoverable XID 63 are not a second opinion on a memory fault."""

    @property
    def regex(self) -> str:
        """Anchored alternation for PromQL/LogQL label matchers, e.g. `48|64|79`."""
        return "|".join(str(c) for c in self.codes)


XID_CLASSES: tuple[XidClass, ...] = (
    XidClass("hardware", (48, 64, 74, 79, 95, 119, 120, 140), "cordon", "critical",
             "GPU hardware fault (double-bit ECC, NVLink, fell off the bus, GSP or uncontained memory error)",
             "Cordon the node and drain GPU jobs; reset the GPU or reboot the node; if the XID returns after a "
             "reset, open a hardware ticket with the node's serial and the GPU UUID.", reset=True),
    XidClass("recovery-action", (154,), "cordon", "critical",
             "the driver states a recovery action is required (GPU reset or node reboot)",
             "Read the recovery action in the kernel log line (GPU reset or node reboot), drain the node and "
             "perform it; the node is released automatically once healthy and reset or rebooted.", reset=True),
    XidClass("reset-required", (46, 62, 109, 110, 136, 143, 156, 158), "cordon", "critical",
             "an error whose recovery NVIDIA's XID catalog gives as a GPU reset (the GPU or one of its engines "
             "stopped, a context-switch timeout, a security or initialization fault)",
             "Cordon the node and drain its GPU jobs, then reset the GPU (nvidia-smi -r, or reboot the node); "
             "the node is released automatically once healthy and reset or rebooted. Open a hardware ticket "
             "if the XID returns after the reset.", reset=True),
    XidClass("needs-corroboration", (155,), "corroborate", "warning",
             "possible hardware fault that needs a second signal before acting",
             "Check the GPU's ECC, row-remap and health-status series for the same GPU; cordon only if one of "
             "them also fails.",
             corroborated_by=("ecc_dbe", "row_remap_failure", "uncorrectable_remapped_rows", "health_fail",
                              "health_warn")),
    XidClass("count-only", (63, 92, 94), "count", "info",
             "recoverable memory events (row remap pending, high single-bit ECC rate, contained ECC error)",
             "No action while isolated; a rising rate on one GPU is a reason to schedule a reset at the next "
             "maintenance window."),
    XidClass("application", (13, 31, 43, 45), "ignore", "info",
             "application errors (illegal memory access, MMU fault, preemption): the job, not the GPU",
             "Tell the job's owners; the GPU is healthy."),
)

BENIGN_SXIDS: tuple[int, ...] = (11012, 12021, 19049)
"""NVSwitch SXid codes seen during normal operation; never alerted on."""


def xid_class(code: int) -> XidClass | None:
    """The class of an XID code, if fleetgen knows it."""
    return next((c for c in XID_CLASSES if code in c.codes), None)


@dataclass(frozen=True)
class Condition:
    """A metric condition on one GPU (or node), with its threshold and response."""

    name: str
    alert: str
    expr: str
    threshold: float
    for_: str
    action: Action
    severity: Severity
    summary: str
    runbook: str
    concern: str
    reset: bool = False
    """As XidClass.reset: released only after a reset or reboot."""

    def promql(self, exporter: str) -> str:
        """The alert expression with its threshold and the exporter's job selector filled in."""
        return self.expr.format(threshold=_number(self.threshold), exporter=exporter)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


# `{exporter}` in an expression is the job selector of the exporter's series; see rules.py.
CONDITIONS: tuple[Condition, ...] = (
    Condition("ecc_dbe", "GPUDoubleBitECCError",
              "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > {threshold}", 0, "0m", "cordon", "critical",
              "Double-bit ECC error on node {{ $labels.node }} GPU {{ $labels.gpu }} ({{ $labels.UUID }})",
              "Uncorrectable memory error: running jobs on this GPU are corrupt. Cordon, drain and reset the GPU; "
              "replace it if errors recur.", "memory", reset=True),
    Condition("row_remap_failure", "GPURowRemapFailure",
              "DCGM_FI_DEV_ROW_REMAP_FAILURE > {threshold}", 0, "0m", "cordon", "critical",
              "Row remapping failed on node {{ $labels.node }} GPU {{ $labels.gpu }} ({{ $labels.UUID }})",
              "The GPU ran out of spare memory rows. Cordon the node and open a hardware ticket (RMA).", "memory",
              reset=True),
    Condition("uncorrectable_remapped_rows", "GPUUncorrectableRowsRemapped",
              "increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h]) > {threshold}", 0, "0m", "count", "warning",
              "Rows remapped after uncorrectable errors on node {{ $labels.node }} GPU {{ $labels.gpu }}",
              "A GPU reset completes the remap. Schedule one at the next idle window.", "memory"),
    Condition("nvlink_errors", "GPUNVLinkErrorBurst",
              "sum by (node, gpu, UUID) (increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[5m]) "
              "+ increase(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL[5m]) "
              "+ increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[5m])) > {threshold}",
              100, "5m", "count", "warning",
              "NVLink error burst on node {{ $labels.node }} GPU {{ $labels.gpu }}: {{ $value }} errors in 5m",
              "Multi-GPU jobs on this node will slow down or hang. Check the NVLink/NVSwitch state "
              "(nvidia-smi nvlink -e) and reseat or replace the link at the next window.", "interconnect"),
    Condition("pcie_replay", "GPUPCIeReplayBurst",
              "increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[10m]) > {threshold}", 1000, "10m", "count", "warning",
              "PCIe replays on node {{ $labels.node }} GPU {{ $labels.gpu }}: {{ $value }} in 10m",
              "A marginal PCIe link; a GPU that later falls off the bus usually showed this first.", "interconnect"),
    Condition("health_fail", "GPUHealthCheckFailed",
              "DCGM_EXP_GPU_HEALTH_STATUS >= {threshold}", 20, "2m", "cordon", "critical",
              "DCGM health check FAILED on node {{ $labels.node }} GPU {{ $labels.gpu }} ({{ $labels.UUID }})",
              "Run `dcgmi health -c` on the node for the failing subsystem; cordon until it passes.", "availability"),
    Condition("health_warn", "GPUHealthCheckWarning",
              "DCGM_EXP_GPU_HEALTH_STATUS >= {threshold} < 20", 10, "15m", "count", "warning",
              "DCGM health check warns on node {{ $labels.node }} GPU {{ $labels.gpu }}",
              "Run `dcgmi health -c` on the node; watch for it turning into a failure.", "availability"),
    Condition("thermal", "GPUOverheating",
              "max_over_time(DCGM_FI_DEV_GPU_TEMP[5m]) > {threshold}", 87, "10m", "count", "warning",
              "GPU {{ $labels.gpu }} on node {{ $labels.node }} at {{ $value }} C",
              "Sustained heat throttles the GPU. Check fans, airflow and the rack's inlet temperature.", "thermal"),
    Condition("gpus_missing", "GPUMissingFromNode",
              "max by (node) (kube_node_status_capacity{{resource=\"nvidia_com_gpu\"}}) "
              "- on (node) count by (node) (DCGM_FI_DEV_GPU_TEMP) > {threshold}", 0, "5m", "cordon", "critical",
              "Node {{ $labels.node }} reports {{ $value }} fewer GPUs than its capacity",
              "A GPU fell off the bus or the driver lost it (check for XID 79). Cordon, drain and reboot the node.",
              "availability", reset=True),
    Condition("exporter_missing", "GPUExporterMissing",
              "max by (node) (kube_node_status_capacity{{resource=\"nvidia_com_gpu\"}}) > {threshold} "
              "unless on (node) max by (node) (up{exporter})", 0, "10m", "unknown", "warning",
              "Node {{ $labels.node }} has GPUs but no GPU metrics exporter is scraped there: its GPUs' health "
              "is unknown",
              "No exporter target exists for this node (a node selector or taint keeps the exporter off it, or "
              "its pod never started), so neither GPUExporterDown nor GPUMissingFromNode can fire. Check the "
              "exporter DaemonSet's pods on this node; nothing is cordoned or released while health is unknown.",
              "availability"),
    Condition("exporter_down", "GPUExporterDown",
              "up{exporter} == {threshold}", 0, "5m", "unknown", "warning",
              "GPU metrics exporter on node {{ $labels.node }} is down: its GPUs' health is unknown",
              "Check the exporter pod on this node. Nothing is cordoned or released while health is unknown.",
              "availability"),
)


@dataclass(frozen=True)
class KueueThresholds:
    """When a team queue is in trouble (Kueue's own metrics)."""

    pending_min: int = 5
    """Pending workloads above which growth is alerted."""
    pending_growth_window: str = "1h"
    """Window over which pending workloads must have grown."""
    pending_for: str = "30m"
    """How long the growth must last."""
    at_quota_for: str = "2h"
    """How long a queue may sit at its nominal quota with work waiting before it is reported."""
    stalled_for: str = "30m"
    """How long admissible work may wait with no admission at all."""


KUEUE = KueueThresholds()


def condition(name: str) -> Condition:
    """A condition by name."""
    return next(c for c in CONDITIONS if c.name == name)


def needs_reset(signal: str) -> bool:
    """Does a cordon for `signal` (`xid-79`, `ecc_dbe`, ...) wait for a GPU reset or node reboot?"""
    if signal.startswith("xid-") and signal[4:].isdigit():
        cls = xid_class(int(signal[4:]))
        return bool(cls and cls.reset)
    return any(c.name == signal and c.reset for c in CONDITIONS)


def persistence_seconds(signal: str) -> float:
    """How long `signal` must keep firing before the reconciler acts on it: the `for:` of its
    alert (a condition), 0 for kernel XIDs and SXids (each line is an event, not a level)."""
    from generator.durations import seconds

    return next((seconds(c.for_) for c in CONDITIONS if c.name == signal), 0.0)


def corroborators(signal: str) -> tuple[str, ...]:
    """The signals that confirm a `corroborate`-class XID (`xid-155`), from its class."""
    if signal.startswith("xid-") and signal[4:].isdigit():
        cls = xid_class(int(signal[4:]))
        return cls.corroborated_by if cls else ()
    return ()
