"""The rendered alert and recording rules, checked and unit-tested with the real promtool.

Each GPU alert fires on a synthetic series that should trigger it and stays silent on one that
should not. Series carry the labels the rendered ServiceMonitor produces (job, node, gpu, UUID).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.signals import XID_CLASSES
from tests.alert_rules import expected, write_rules
from tests.upstream.prometheus_server import tool

pytestmark = pytest.mark.upstream  # promtool / the Prometheus server: not the fast tier

GPU0 = {"job": "gpu-exporter", "node": "gpu-node-1", "gpu": "0", "UUID": "GPU-0000-aaaa", "modelName": "H100"}
GPU1 = {**GPU0, "gpu": "1", "UUID": "GPU-1111-bbbb"}


def series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def gpu_labels(**extra: str) -> dict[str, str]:
    return {k: v for k, v in {**GPU0, **extra}.items() if k not in ("modelName", "job")}


def case(input_series: list[dict[str, str]], alerts: list[tuple[str, str, list[dict[str, Any]]]],
         exprs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    rule_tests = [{"eval_time": t, "alertname": a, "exp_alerts": e} for a, t, e in alerts]
    test: dict[str, Any] = {"interval": "1m", "input_series": input_series, "alert_rule_test": rule_tests}
    if exprs:
        test["promql_expr_test"] = exprs
    return test


def run_promtool_tests(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    rules = write_rules(tmp_path)
    spec = tmp_path / "tests.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests},
                                   sort_keys=False))
    return subprocess.run([tool("promtool"), "test", "rules", str(spec)], capture_output=True, text=True,
                          cwd=tmp_path, check=False, timeout=120)


@pytest.mark.parametrize("cluster", ["prod-east", "prod-west", "dev"])
def test_promtool_check_rules(tmp_path: Path, cluster: str) -> None:
    rules = write_rules(tmp_path, cluster)
    proc = subprocess.run([tool("promtool"), "check", "rules", str(rules)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout and "FAILED" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


XID = "DCGM_EXP_XID_ERRORS_COUNT"


def xid_class_codes(name: str) -> tuple[int, ...]:
    (cls,) = [c for c in XID_CLASSES if c.name == name]
    return cls.codes


def xid_cases() -> list[dict[str, Any]]:
    hw79 = gpu_labels(xid="79")
    return [
        # XID 79 (fell off the bus) fires the hardware alert at once; XID 13 (application) never does.
        case([series(XID, {**GPU0, "xid": "79"}, "0 1 1 1"), series(XID, {**GPU1, "xid": "13"}, "0 3 3 3")],
             [("GPUXidHardwareError", "2m", [expected("GPUXidHardwareError", hw79)]),
              ("GPUXidNeedsCorroboration", "2m", [])],
             [{"expr": 'fleetgen:gpu_xid_errors:sum{class="hardware"}', "eval_time": "2m",
               "exp_samples": [{"labels": 'fleetgen:gpu_xid_errors:sum{class="hardware", node="gpu-node-1", '
                                          'gpu="0", UUID="GPU-0000-aaaa", xid="79"}', "value": 1}]},
              {"expr": 'fleetgen:gpu_xid_errors:sum{class="application"}', "eval_time": "2m",
               "exp_samples": [{"labels": 'fleetgen:gpu_xid_errors:sum{class="application", node="gpu-node-1", '
                                          'gpu="1", UUID="GPU-1111-bbbb", xid="13"}', "value": 3}]}]),
        # Only XID 13: nothing fires.
        case([series(XID, {**GPU1, "xid": "13"}, "0 5 5 5")],
             [("GPUXidHardwareError", "3m", []), ("GPUXidRecoveryActionRequired", "3m", [])]),
        # XID 154 asks for a recovery action; XID 155 needs a second signal (warning, not cordon).
        case([series(XID, {**GPU0, "xid": "154"}, "1 1 1"), series(XID, {**GPU1, "xid": "155"}, "1 1 1")],
             [("GPUXidRecoveryActionRequired", "1m", [expected("GPUXidRecoveryActionRequired", gpu_labels(xid="154"))]),
              ("GPUXidNeedsCorroboration", "1m",
               [expected("GPUXidNeedsCorroboration", {k: v for k, v in {**GPU1, "xid": "155"}.items()
                                                     if k in ("node", "gpu", "UUID", "xid")})]),
              ("GPUXidHardwareError", "1m", [])]),
        # Issue 14: a reset-class alert no longer resolves when the 5-minute window forgets the XID:
        # it keeps firing for a day (no metric shows the reset); an application XID resolves.
        case([series(XID, {**GPU0, "xid": "79"}, "0 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"),
              series(XID, {**GPU1, "xid": "13"}, "0 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")],
             [("GPUXidHardwareError", "15m", [expected("GPUXidHardwareError", hw79)])]),
        # Every code of the other reset classes (hardware, recovery-action) alerts at once too.
        case([series(XID, {**GPU0, "gpu": str(i), "xid": str(code)}, "0 1 1 1")
              for i, code in enumerate(xid_class_codes("hardware") + xid_class_codes("recovery-action"))],
             [("GPUXidHardwareError", "2m", [expected("GPUXidHardwareError", gpu_labels(gpu=str(i), xid=str(code)))
                                             for i, code in enumerate(xid_class_codes("hardware"))]),
              ("GPUXidRecoveryActionRequired", "2m", [expected("GPUXidRecoveryActionRequired", gpu_labels(
                  gpu=str(len(xid_class_codes("hardware"))), xid="154"))])]),
        # Issue 14: every code NVIDIA resolves with a GPU reset alerts as reset-required, at once.
        case([series(XID, {**GPU0, "gpu": str(i), "xid": str(code)}, "0 1 1 1")
              for i, code in enumerate(xid_class_codes("reset-required"))],
             [("GPUXidResetRequired", "2m", [expected("GPUXidResetRequired", gpu_labels(gpu=str(i), xid=str(code)))
                                             for i, code in enumerate(xid_class_codes("reset-required"))]),
              ("GPUXidHardwareError", "2m", [])]),
        # XID 63 (row remap pending) is counted, never alerted.
        case([series(XID, {**GPU0, "xid": "63"}, "2 2 2")],
             [("GPUXidHardwareError", "2m", []), ("GPUXidNeedsCorroboration", "2m", [])],
             [{"expr": 'fleetgen:gpu_xid_errors:sum{class="count-only"}', "eval_time": "2m",
               "exp_samples": [{"labels": 'fleetgen:gpu_xid_errors:sum{class="count-only", node="gpu-node-1", '
                                          'gpu="0", UUID="GPU-0000-aaaa", xid="63"}', "value": 2}]}]),
    ]


def memory_cases() -> list[dict[str, Any]]:
    dbe = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
    return [
        # One double-bit ECC increment fires; a flat counter on the other GPU does not.
        case([series(dbe, GPU0, "0 0 0 1 1 1"), series(dbe, GPU1, "4 4 4 4 4 4")],
             [("GPUDoubleBitECCError", "4m", [expected("GPUDoubleBitECCError", GPU0)])]),
        case([series(dbe, GPU1, "4 4 4 4 4 4 4 4 4 4 4 4")], [("GPUDoubleBitECCError", "11m", [])]),
        case([series("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU0, "0 0 1 1"),
              series("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU1, "0 0 0 0")],
             [("GPURowRemapFailure", "3m", [expected("GPURowRemapFailure", GPU0)])]),
    ]


def availability_cases() -> list[dict[str, Any]]:
    cap = "kube_node_status_capacity"
    node = {"node": "gpu-node-1"}
    temps = [series("DCGM_FI_DEV_GPU_TEMP", {**GPU0, "gpu": str(i), "UUID": f"GPU-{i}"}, "60x20") for i in range(7)]
    return [
        # An exporter that is down: the exporter alert fires, the GPU-missing alert does not.
        case([series("up", {"job": "gpu-exporter", "node": "gpu-node-1", "instance": "10.0.0.1:9400"}, "0x20"),
              series(cap, {**node, "resource": "nvidia_com_gpu", "job": "kube-state-metrics"}, "8x20")],
             [("GPUExporterDown", "10m", [expected("GPUExporterDown", {"job": "gpu-exporter", "node": "gpu-node-1",
                                                                       "instance": "10.0.0.1:9400"})]),
              ("GPUMissingFromNode", "10m", [])]),
        # Issue 14: no exporter at all on a node with GPUs (no `up` series, no DCGM series):
        # GPUExporterMissing after 10m; gpu-node-1 has its exporter and stays silent.
        case([series("up", {"job": "gpu-exporter", "node": "gpu-node-1", "instance": "10.0.0.1:9400"}, "1x20"),
              series(cap, {**node, "resource": "nvidia_com_gpu", "job": "kube-state-metrics"}, "8x20"),
              series(cap, {"node": "gpu-node-2", "resource": "nvidia_com_gpu", "job": "kube-state-metrics"}, "8x20"),
              series(cap, {"node": "cpu-node-1", "resource": "nvidia_com_gpu", "job": "kube-state-metrics"}, "0x20")],
             [("GPUExporterMissing", "5m", []),
              ("GPUExporterMissing", "12m", [expected("GPUExporterMissing", {"node": "gpu-node-2"}, "8")]),
              ("GPUExporterDown", "12m", []), ("GPUMissingFromNode", "12m", [])]),
        # 7 of 8 GPUs report: one fell off the bus.
        case([series("up", {"job": "gpu-exporter", "node": "gpu-node-1", "instance": "10.0.0.1:9400"}, "1x20"),
              series(cap, {**node, "resource": "nvidia_com_gpu", "job": "kube-state-metrics"}, "8x20"), *temps],
             [("GPUMissingFromNode", "10m", [expected("GPUMissingFromNode", node, "1")]),
              ("GPUExporterDown", "10m", [])]),
        # All 8 report: silent.
        case([series(cap, {**node, "resource": "nvidia_com_gpu", "job": "kube-state-metrics"}, "8x20"), *temps,
              series("DCGM_FI_DEV_GPU_TEMP", {**GPU0, "gpu": "7", "UUID": "GPU-7"}, "60x20")],
             [("GPUMissingFromNode", "10m", [])]),
        # DCGM health: FAIL fires after 2m; WARN is a warning, not the failure alert.
        case([series("DCGM_EXP_GPU_HEALTH_STATUS", GPU0, "20x10"), series("DCGM_EXP_GPU_HEALTH_STATUS", GPU1, "10x10")],
             [("GPUHealthCheckFailed", "5m", [expected("GPUHealthCheckFailed", GPU0)])]),
    ]


def interconnect_thermal_cases() -> list[dict[str, Any]]:
    crc = "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"
    zero = [series(m, GPU0, "0x30") for m in ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                                              "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL")]
    return [
        # 50 CRC errors a minute is a burst (> 100 in 5m) for over 5 minutes; 1 a minute is not.
        case([series(crc, GPU0, "0+50x30"), *zero], [("GPUNVLinkErrorBurst", "20m", [
            expected("GPUNVLinkErrorBurst", {k: GPU0[k] for k in ("node", "gpu", "UUID")}, "250")])]),
        case([series(crc, GPU0, "0+1x30"), *zero], [("GPUNVLinkErrorBurst", "20m", [])]),
        case([series("DCGM_FI_DEV_GPU_TEMP", GPU0, "92x30"), series("DCGM_FI_DEV_GPU_TEMP", GPU1, "80x30")],
             [("GPUOverheating", "20m", [expected("GPUOverheating", GPU0, "92")])]),
    ]


def kueue_cases() -> list[dict[str, Any]]:
    cq = {"cluster_queue": "ml-research"}
    return [
        # Work waiting, nothing admitted for 30 minutes: stalled.
        case([series("kueue_pending_workloads", {**cq, "status": "active"}, "3x70"),
              series("kueue_admitted_workloads_total", cq, "12x70")],
             [("KueueAdmissionStalled", "65m", [expected("KueueAdmissionStalled", cq)])]),
        # Issue 14: a queue that never admitted anything has no admitted counter; it is stalled too.
        case([series("kueue_pending_workloads", {**cq, "status": "active"}, "3x70")],
             [("KueueAdmissionStalled", "20m", []),
              ("KueueAdmissionStalled", "35m", [expected("KueueAdmissionStalled", cq)])]),
        # Admissions keep flowing: not stalled.
        case([series("kueue_pending_workloads", {**cq, "status": "active"}, "3x70"),
              series("kueue_admitted_workloads_total", cq, "0+1x70")],
             [("KueueAdmissionStalled", "65m", [])]),
        # Pending above 5 and rising for 30 minutes.
        case([series("kueue_pending_workloads", {**cq, "status": "active"}, "0+1x100")],
             [("KueuePendingWorkloadsGrowing", "95m", [expected("KueuePendingWorkloadsGrowing", cq, "95")])]),
    ]


def reconciler_cases() -> list[dict[str, Any]]:
    """The reconciler's own metrics (issue 13): prod-east's period is 30 s, so stalled means no loop
    completed for 150 s; evaluation is every minute."""
    job = {"job": "fleetgen-health", "namespace": "fleetgen-system"}
    a, b = {**job, "pod": "fleetgen-health-a"}, {**job, "pod": "fleetgen-health-b"}
    done = "fleetgen_health_last_loop_completed_timestamp_seconds"
    return [
        # Replica a's loops complete every minute; b's stopped at minute 2: only b is stalled.
        case([series(done, a, "0+60x15"), series(done, b, "0+60x2 120x12")],
             [("FleetgenHealthLoopStalled", "3m", []),
              ("FleetgenHealthLoopStalled", "10m", [expected("FleetgenHealthLoopStalled", b, "480")])]),
        # A leader, then none for 6 minutes.
        case([series("fleetgen_health_leader", a, "1 1 0 0 0 0 0 0 0 0"), series("fleetgen_health_leader", b, "0x9")],
             [("FleetgenHealthNoLeader", "4m", []), ("FleetgenHealthNoLeader", "8m",
                                                     [expected("FleetgenHealthNoLeader", {})])]),
        # Both replicas gone: no series at all is no leader too.
        case([series("up", {"job": "other"}, "1x9")],
             [("FleetgenHealthNoLeader", "8m", [expected("FleetgenHealthNoLeader", {})])]),
        # A tripped breaker in one pool fires at once, per pool; the follower's 0 does not hide it.
        case([series("fleetgen_health_breaker_tripped", {**a, "pool": "h100"}, "0 1 1"),
              series("fleetgen_health_breaker_tripped", {**b, "pool": "h100"}, "0 0 0"),
              series("fleetgen_health_breaker_tripped", {**a, "pool": "a100"}, "0 0 0")],
             [("FleetgenHealthBreakerTripped", "0m", []),
              ("FleetgenHealthBreakerTripped", "2m", [expected("FleetgenHealthBreakerTripped", {"pool": "h100"})])]),
        # The drain breaker is its own alert, per pool.
        case([series("fleetgen_health_drain_breaker_tripped", {**a, "pool": "a100"}, "0 0 1 1"),
              series("fleetgen_health_breaker_tripped", {**a, "pool": "a100"}, "0 0 0 0")],
             [("FleetgenHealthDrainBreakerTripped", "1m", []), ("FleetgenHealthBreakerTripped", "3m", []),
              ("FleetgenHealthDrainBreakerTripped", "3m",
               [expected("FleetgenHealthDrainBreakerTripped", {"pool": "a100"})])]),
        case([series("fleetgen_health_write_failures_total", a, "0 0 2 2")],
             [("FleetgenHealthWritesFailing", "3m", [expected("FleetgenHealthWritesFailing", {"pod": a["pod"]})])]),
        case([series("fleetgen_health_loop_failures_total", a, "0+1x30")],
             [("FleetgenHealthLoopsFailing", "5m", []),
              ("FleetgenHealthLoopsFailing", "25m", [expected("FleetgenHealthLoopsFailing", a)])]),
    ]


def test_every_alert_fires_when_it_should_and_only_then(tmp_path: Path) -> None:
    tests = (xid_cases() + memory_cases() + availability_cases() + interconnect_thermal_cases() + kueue_cases()
             + reconciler_cases())
    proc = run_promtool_tests(tmp_path, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_harness_detects_a_wrong_expectation(tmp_path: Path) -> None:
    """The same harness fails when an alert that should be silent is expected to fire."""
    bogus = case([series(XID, {**GPU1, "xid": "13"}, "0 5 5 5")],
                 [("GPUXidHardwareError", "3m", [expected("GPUXidHardwareError", gpu_labels(xid="13"))])])
    proc = run_promtool_tests(tmp_path, [bogus])
    assert proc.returncode != 0
    assert "GPUXidHardwareError" in proc.stdout + proc.stderr


def test_every_alerting_xid_class_is_tested() -> None:
    text = repr(xid_cases())
    for cls in XID_CLASSES:
        assert any(f"'xid': '{code}'" in text or f'xid="{code}"' in text for code in cls.codes), cls.name


def test_the_failing_gpus_stat_counts_gpus_not_subsystems(tmp_path: Path) -> None:
    """Issue 14: DCGM_EXP_GPU_HEALTH_STATUS has one series per GPU and health subsystem, so the
    dashboard stat counted a GPU failing in two subsystems twice. Evaluated by promtool."""
    from generator.compile.dashboards import GPU_HEALTH

    (stat,) = [targets[0][0] for title, _, targets in GPU_HEALTH if title == "GPUs failing DCGM health checks"]
    health = "DCGM_EXP_GPU_HEALTH_STATUS"
    test = case([series(health, {**GPU0, "health_watch_system": "mem"}, "20x3"),
                 series(health, {**GPU0, "health_watch_system": "nvlink"}, "20x3"),
                 series(health, {**GPU1, "health_watch_system": "mem"}, "10x3")],
                [], [{"expr": stat, "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": 1}]}])
    proc = run_promtool_tests(tmp_path, [test])
    assert proc.returncode == 0, proc.stdout + proc.stderr
