"""The rendered Loki rules: LogQL that parses (Grafana's grammar), regexps that read real kernel lines."""

from __future__ import annotations

import re

import pytest
import yaml

from generator.compile.rules import RECOVERY_ACTION, SXID_PARSE, XID_PARSE, sxid_lines_query, xid_lines_query
from generator.signals import BENIGN_SXIDS, XID_CLASSES
from tests.conftest import REPO
from tests.upstream.logql import parse_errors

XID_LINES = [
    ("NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "79"),
    ("NVRM: Xid (PCI:0000:b1:00): 48, pid=2314, name=python3, An uncorrectable double bit error", "48"),
    ("NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1)", "13"),
    ("[ 1234.5678] NVRM: Xid (PCI:0000:3a:00): 154, GPU recovery action changed from 0x0 (None) to 0x2", "154"),
]
SXID_LINES = [
    ("nvidia-nvswitch3: SXid (PCI:0000:4e:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error", "12028"),
    ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12021, Non-fatal, Link 8 ingress invalid ACL", "12021"),
]


def _regexp(stage: str) -> re.Pattern[str]:
    """The first `regexp` stage of a LogQL pipeline, as a Python pattern (no backticks inside)."""
    return re.compile(stage.split("regexp `", 1)[1].split("`", 1)[0])


def rendered_loki_rules(cluster: str = "prod-east") -> list[dict]:
    cm = yaml.safe_load((REPO / "rendered" / cluster / "monitoring" / "configmap-fleetgen-loki-rules.yaml").read_text())
    (text,) = cm["data"].values()
    return [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]


def test_every_rendered_logql_expression_parses() -> None:
    rules = rendered_loki_rules()
    assert {r.get("alert") or r.get("record") for r in rules} >= {
        "fleetgen:kernel_xid_lines:count5m", "fleetgen:kernel_sxid_lines:count5m", "KernelGPUXidHardwareError",
        "KernelNVSwitchSXidError"}
    exprs = [r["expr"] for r in rules]
    assert parse_errors(exprs) == [[] for _ in exprs], exprs


def test_the_grammar_rejects_broken_logql() -> None:
    broken = [xid_lines_query()[:-3], '{service_name="x"} | xid >> 3', "count_over_time({a=\"b\"} |= [5m]"]
    assert all(errors for errors in parse_errors(broken))


@pytest.mark.parametrize("line,code", XID_LINES)
def test_xid_regexp_reads_kernel_lines(line: str, code: str) -> None:
    assert "NVRM: Xid" in line  # the line filter of the query
    match = _regexp(XID_PARSE).search(line)
    assert match and match.group("xid") == code and match.group("pci").startswith("PCI:")


def test_alert_filters_select_exactly_the_cordon_classes() -> None:
    rules = {r.get("alert"): r["expr"] for r in rendered_loki_rules() if "alert" in r}
    hardware = rules["KernelGPUXidHardwareError"]
    selected = re.search(r'\| xid =~ "([^"]+)"', hardware).group(1)  # type: ignore[union-attr]
    codes = {int(c) for c in selected.split("|")}
    hw = next(c for c in XID_CLASSES if c.name == "hardware")
    assert codes == set(hw.codes)
    assert re.fullmatch(selected, "79") and not re.fullmatch(selected, "13") and not re.fullmatch(selected, "7")


@pytest.mark.parametrize("line,code", SXID_LINES)
def test_sxid_regexp_and_benign_allowlist(line: str, code: str) -> None:
    match = _regexp(SXID_PARSE).search(line)
    assert match and match.group("sxid") == code
    benign = re.search(r'\| sxid !~ "([^"]+)"', sxid_lines_query()).group(1)  # type: ignore[union-attr]
    assert bool(re.fullmatch(benign, code)) == (int(code) in BENIGN_SXIDS)


RECOVERY_LINES = [
    ("NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
     "GPU Reset Required", True),
    ("NVRM: Xid (PCI:0000:02:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
     "Node Reboot Required", True),
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)",
     "OS Reboot", True),
    ("NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)", "PF FLR", True),
    # The driver clearing its request: the GPU recovered.
    ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
     "None", False),
    # Other XIDs carry no action and pass the filter.
    ("NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", None, True),
]


@pytest.mark.parametrize("line,action,counted", RECOVERY_LINES)
def test_xid_154_counts_only_when_the_driver_asks_for_an_action(line: str, action: str | None,
                                                                counted: bool) -> None:
    """Issue 14: XID 154's recovery action was never read, so a 154 saying "back to None" was a
    fault. The second regexp stage names the action; `action != "None"` drops the all-clear (a
    line without the phrase has no action label and passes, as in Loki)."""
    stage = RECOVERY_ACTION.split(" | action")[0]
    match = _regexp(stage).search(line)
    assert (match.group("action") if match else None) == action
    assert ((match.group("action") if match else "") != "None") is counted
    assert RECOVERY_ACTION in xid_lines_query() and RECOVERY_ACTION.endswith('| action != "None"')
