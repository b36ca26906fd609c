"""The reconciler's decision, rule by rule: a pure function, tested without I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest

from generator.reconciler.decide import CONDITION_WRITES_PER_LOOP, decide
from generator.reconciler.model import (
    ALL_POOLS,
    Breaker,
    ClearHumanRelease,
    Cordon,
    Decision,
    Event,
    Evidence,
    NodeCondition,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
    SetCondition,
    SetHealthyChecks,
)

NOW = 1_000_000.0
POLICY = Policy(healthy_checks_to_release=3, cooldown_seconds=600, flap_count=3, flap_window_seconds=3600,
                max_unhealthy_percent=50)
XID79 = Evidence("xid-79", "cordon", gpu="3", detail="fell off the bus")
DBE = Evidence("ecc_dbe", "cordon", gpu="1")
XID155 = Evidence("xid-155", "corroborate", gpu="2")
NVLINK = Evidence("nvlink_errors", "count", gpu="2", detail="250 errors in 5m")


def pool(n: int, name: str = "h100") -> dict[str, NodeState]:
    return {f"{name}-{i}": NodeState(f"{name}-{i}", name) for i in range(n)}


def healthy(nodes: dict[str, NodeState]) -> dict[str, Observation]:
    return {n: Observation(n) for n in nodes}


def kinds(decision: object, kind: type) -> list:
    return [a for a in decision.actions if isinstance(a, kind)]  # type: ignore[attr-defined]


def lasting(observations: dict[str, Observation]) -> dict:
    """`pending` in which every signal of `observations` has been firing for an hour."""
    return {name: {(e.signal, e.gpu): NOW - 3600 for e in obs.evidence} for name, obs in observations.items()}


def acts(decision: Decision) -> tuple:
    """Actions on the node itself (cordon, release, counts, Events): all but the condition report."""
    return tuple(a for a in decision.actions if not isinstance(a, SetCondition))


def test_fatal_xid_cordons_with_reason_and_event() -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-3": Observation("h100-3", (XID79,))}
    decision = decide(obs, nodes, POLICY, {}, NOW)
    (cordon,) = kinds(decision, Cordon)
    assert cordon.node == "h100-3" and cordon.reason == "xid-79" and cordon.evidence == (XID79,)
    assert cordon.history == (NOW,) and not cordon.repair
    assert any(e.reason == "GPUHealthCordoned" and e.node == "h100-3" for e in kinds(decision, Event))
    assert decision.breakers == {}


def test_unknown_never_cordons_or_releases_or_counts() -> None:
    nodes = pool(4)
    nodes["h100-0"] = replace(nodes["h100-0"], unschedulable=True, owned=True, reason="xid-79", since=0,
                              healthy_checks=2)
    obs = {name: Observation(name, unknown=True) for name in nodes}
    obs["h100-1"] = Observation("h100-1", (XID79,), unknown=True)  # evidence, but a source is down
    decision = decide(obs, nodes, POLICY, {}, NOW)
    assert acts(decision) == ()
    assert any("health unknown" in s for s in decision.skipped)
    assert acts(decide({}, nodes, POLICY, {}, NOW)) == ()  # no observation at all = unknown


def test_release_after_healthy_checks_and_cooldown_only() -> None:
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=NOW - 1000,
                     healthy_checks=1, cordon_boot_id="boot-1", boot_id="boot-2")  # rebooted since
    nodes = {**pool(4), "h100-0": held}
    first = decide(healthy(nodes), nodes, POLICY, {}, NOW)
    assert kinds(first, SetHealthyChecks) == [SetHealthyChecks("h100-0", 2)] and not kinds(first, Release)
    second = decide(healthy(nodes), {**nodes, "h100-0": replace(held, healthy_checks=2)}, POLICY, {}, NOW)
    assert kinds(second, Release) == [Release("h100-0")]
    # Enough checks but still cooling down: hold.
    young = replace(held, healthy_checks=2, since=NOW - 60)
    third = decide(healthy(nodes), {**nodes, "h100-0": young}, POLICY, {}, NOW)
    assert not kinds(third, Release) and kinds(third, SetHealthyChecks) == [SetHealthyChecks("h100-0", 3)]


def test_a_reset_class_fault_is_released_only_after_a_reset_or_reboot() -> None:
    """Issue 13: XID 154 (reset or reboot required) was released at t+900 s without either."""
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-154", since=NOW - 1000,
                     healthy_checks=5, cordon_boot_id="boot-1", boot_id="boot-1")
    nodes = {**pool(4), "h100-0": held}
    waiting = decide(healthy(nodes), nodes, POLICY, {}, NOW)
    assert not kinds(waiting, Release)
    assert any("until a GPU reset or reboot (bootID unchanged)" in line for line in waiting.skipped)
    rebooted = decide(healthy(nodes), {**nodes, "h100-0": replace(held, boot_id="boot-2")}, POLICY, {}, NOW)
    assert kinds(rebooted, Release) == [Release("h100-0")]
    # A cordon with no bootID on record (or a Node that reports none) is never released by quiet metrics.
    unknown = decide(healthy(nodes), {**nodes, "h100-0": replace(held, cordon_boot_id="")}, POLICY, {}, NOW)
    assert not kinds(unknown, Release)
    # A fault that needs no reset (health check FAIL) is released on metrics alone.
    check = replace(held, reason="health_fail")
    assert kinds(decide(healthy(nodes), {**nodes, "h100-0": check}, POLICY, {}, NOW), Release) == [Release("h100-0")]


def test_a_held_node_missing_gpus_is_not_healthy() -> None:
    """Issue 13: a held node whose exporter reported no GPUs counted as healthy; without
    kube-state-metrics the missing-GPU rule matched nothing. The Node's own capacity is the reference."""
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="health_fail", since=NOW - 1000,
                     healthy_checks=5, gpus=8)
    nodes = {**pool(4), "h100-0": held}
    for reporting in (0, 7):
        obs = {**healthy(nodes), "h100-0": Observation("h100-0", gpus_reporting=reporting)}
        # First loop: missing GPUs are not yet a fault (`for: 5m`), but not health either.
        first = decide(obs, nodes, POLICY, {}, NOW)
        assert not kinds(first, Release) and not kinds(first, SetHealthyChecks)
        assert first.pending == {"h100-0": {("gpus_missing", ""): NOW}}
        # Five minutes later, still missing: a fault, and the healthy count starts over.
        decision = decide(obs, nodes, POLICY, {}, NOW + 300, first.pending)
        assert not kinds(decision, Release) and kinds(decision, SetHealthyChecks) == [SetHealthyChecks("h100-0", 0)]
    all_eight = {**healthy(nodes), "h100-0": Observation("h100-0", gpus_reporting=8)}
    assert kinds(decide(all_eight, nodes, POLICY, {}, NOW), Release) == [Release("h100-0")]
    # A free node reporting 7 of its 8 GPUs is cordoned for it.
    free = {**pool(4), "h100-1": NodeState("h100-1", "h100", gpus=8)}
    seven = {**healthy(free), "h100-1": Observation("h100-1", gpus_reporting=7)}
    assert not kinds(decide(seven, free, POLICY, {}, NOW), Cordon)  # a scrape gap is not a lost GPU
    (cordon,) = kinds(decide(seven, free, POLICY, {}, NOW, {"h100-1": {("gpus_missing", ""): NOW - 300}}), Cordon)
    assert cordon.reason == "gpus_missing" and cordon.evidence[0].detail == "7 of 8 GPUs report"


def test_faulty_again_resets_the_healthy_count() -> None:
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=NOW, healthy_checks=2)
    decision = decide({"h100-0": Observation("h100-0", (XID79,))}, {"h100-0": held}, POLICY, {}, NOW)
    assert acts(decision) == (SetHealthyChecks("h100-0", 0),)


def test_only_our_own_cordons_are_lifted() -> None:
    foreign = NodeState("h100-0", "h100", unschedulable=True)  # cordoned by a human or another tool
    nodes = {**pool(4), "h100-0": foreign}
    for _ in range(5):
        decision = decide(healthy(nodes), nodes, POLICY, {}, NOW)
        assert not kinds(decision, Release) and not kinds(decision, SetHealthyChecks)
    faulty = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, {}, NOW)
    assert not kinds(faulty, Cordon)  # already cordoned: not ours to take over
    assert any("already cordoned by someone else" in s for s in faulty.skipped)


def test_human_uncordon_is_respected_for_the_same_finding_only() -> None:
    released = NodeState("h100-0", "h100", unschedulable=False, owned=True, reason="xid-79", since=NOW - 100)
    nodes = {**pool(4), "h100-0": released}
    same = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, {}, NOW)
    assert NoteHumanRelease("h100-0", "xid-79") in same.actions and not kinds(same, Cordon)
    remembered = {**nodes, "h100-0": NodeState("h100-0", "h100", human_released="xid-79")}
    again = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, remembered, POLICY, {}, NOW)
    assert not kinds(again, Cordon) and any("a human released it" in s for s in again.skipped)
    new_fault = decide({**healthy(nodes), "h100-0": Observation("h100-0", (DBE,))}, remembered, POLICY, {},
                       NOW)
    assert [c.reason for c in kinds(new_fault, Cordon)] == ["ecc_dbe"]
    recovered = decide(healthy(nodes), remembered, POLICY, {}, NOW)
    assert ClearHumanRelease("h100-0") in recovered.actions


def test_breaker_trips_at_the_threshold_and_holds() -> None:
    nodes = pool(10)
    five = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in range(5)}}
    at_limit = decide(five, nodes, POLICY, {}, NOW)
    assert len(kinds(at_limit, Cordon)) == 5 and at_limit.breakers == {}  # 50% of 10 is allowed
    six = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in range(6)}}
    over = decide(six, nodes, POLICY, {}, NOW)
    assert kinds(over, Cordon) == [] and over.breakers["h100"].tripped and over.breakers["h100"].since == NOW
    assert "6 of 10 nodes" in over.breakers["h100"].reason
    # Held cordons count too: 4 held + 2 new > 5.
    held = {**nodes, **{f"h100-{i}": replace(nodes[f"h100-{i}"], unschedulable=True, owned=True, reason="x",
                                               since=NOW) for i in range(4)}}
    more = {**healthy(nodes), "h100-8": Observation("h100-8", (XID79,)), "h100-9": Observation("h100-9", (DBE,))}
    assert decide(more, held, POLICY, {}, NOW).breakers["h100"].tripped
    # Once tripped: nothing is cordoned or released, even a single fault or a healthy held node.
    tripped = over.breakers
    later = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, tripped, NOW + 9999)
    assert not kinds(later, Cordon) and later.breakers == tripped
    ready = {**nodes, "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                          healthy_checks=5)}
    assert not kinds(decide(healthy(ready), ready, POLICY, tripped, NOW), Release)


def test_breaker_counts_every_unschedulable_node_whoever_cordoned_it() -> None:
    """Issue 13: cordons by humans or the autoscaler were not counted. 5 of 10 down already (4 by
    someone else, 1 ours): one more fault would leave 6 unschedulable, past 50%."""
    nodes = pool(10)
    nodes.update({f"h100-{i}": replace(nodes[f"h100-{i}"], unschedulable=True) for i in range(4)})
    nodes["h100-4"] = replace(nodes["h100-4"], unschedulable=True, owned=True, reason="xid-79", since=NOW)
    decision = decide({**healthy(nodes), "h100-9": Observation("h100-9", (XID79,))}, nodes, POLICY, {}, NOW)
    assert kinds(decision, Cordon) == [] and decision.breakers["h100"].tripped
    assert "(5 already)" in decision.breakers["h100"].reason


def test_breaker_limit_rounds_up_and_allows_one_node() -> None:
    """Issue 13: floor() meant a 1-node pool could never be cordoned and 2 faults in a 3-node pool
    cordoned neither."""
    one = pool(1, "l4")
    single = decide({"l4-0": Observation("l4-0", (XID79,))}, one, POLICY, {}, NOW)
    assert [c.node for c in kinds(single, Cordon)] == ["l4-0"] and single.breakers == {}
    three = pool(3, "a100")
    two = decide({**healthy(three), "a100-0": Observation("a100-0", (XID79,)),
                  "a100-1": Observation("a100-1", (DBE,))}, three, POLICY, {}, NOW)
    assert len(kinds(two, Cordon)) == 2 and two.breakers == {}  # ceil(1.5) = 2
    tight = replace(POLICY, max_unhealthy_percent=10)
    assert len(kinds(decide({**healthy(three), "a100-2": Observation("a100-2", (XID79,))}, three, tight, {}, NOW),
                     Cordon)) == 1  # at least one node, whatever the percentage


def test_breaker_is_per_pool() -> None:
    """Issue 13: one global flag let a 1-node pool's trip freeze a 100-node pool."""
    nodes = {**pool(10, "h100"), **pool(2, "a100")}
    obs = {**healthy(nodes), "a100-0": Observation("a100-0", (XID79,)), "h100-0": Observation("h100-0", (XID79,))}
    decision = decide(obs, nodes, POLICY, {}, NOW)  # 1 of 2 a100 is 50%: allowed
    assert {c.node for c in kinds(decision, Cordon)} == {"a100-0", "h100-0"}
    both = {**obs, "a100-1": Observation("a100-1", (XID79,))}
    tripped = decide(both, nodes, POLICY, {}, NOW)
    assert set(tripped.breakers) == {"a100"} and [c.node for c in kinds(tripped, Cordon)] == ["h100-0"]
    # While a100 is tripped, h100 keeps cordoning and releasing.
    held = {**nodes, "h100-5": NodeState("h100-5", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                         healthy_checks=5)}
    later = decide({**healthy(held), "h100-1": Observation("h100-1", (DBE,))}, held, POLICY, tripped.breakers, NOW)
    assert [c.node for c in kinds(later, Cordon)] == ["h100-1"] and kinds(later, Release) == [Release("h100-5")]
    assert any("pool a100: breaker tripped" in line for line in later.skipped)


def test_a_breaker_saved_before_pools_holds_every_pool() -> None:
    nodes = {**pool(10, "h100"), **pool(2, "a100")}
    obs = {**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}
    legacy = {ALL_POOLS: Breaker(True, "old", NOW)}
    assert kinds(decide(obs, nodes, POLICY, legacy, NOW), Cordon) == []


def test_a_pool_tripping_this_loop_releases_nothing_and_says_nothing_about_releases() -> None:
    nodes = pool(4)
    nodes["h100-0"] = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                healthy_checks=5)
    obs = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in (1, 2, 3)}}
    decision = decide(obs, nodes, POLICY, {}, NOW)
    assert decision.breakers["h100"].tripped
    assert not kinds(decision, Release) and not [e for e in kinds(decision, Event) if e.reason == "GPUHealthReleased"]


def test_flapping_node_is_labelled_for_repair_and_never_released() -> None:
    nodes = {**pool(10), "h100-0": NodeState("h100-0", "h100", history=(NOW - 3000, NOW - 1500, NOW - 99999))}
    decision = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, {}, NOW)
    (cordon,) = kinds(decision, Cordon)
    assert cordon.repair and cordon.history == (NOW - 3000, NOW - 1500, NOW)  # the old one left the window
    held = {**nodes, "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79",
                                         since=0, healthy_checks=10, needs_repair=True)}
    assert not kinds(decide(healthy(held), held, POLICY, {}, NOW), Release)


def test_corroboration_and_warn_only_signals() -> None:
    nodes = pool(10)
    alone = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID155,))}, nodes, POLICY, {}, NOW)
    assert not kinds(alone, Cordon)
    paired = {"h100-0": Observation("h100-0", (XID155, Evidence("health_fail", "cordon", gpu="7"), NVLINK))}
    assert [c.reason for c in kinds(decide(paired, nodes, POLICY, {}, NOW, lasting(paired)), Cordon)] == [
        "health_fail"]  # NVLink noise on GPU 2 is no second opinion on 155 (issue 13)
    warn_obs = {**healthy(nodes), "h100-1": Observation("h100-1", (NVLINK,))}
    warn = decide(warn_obs, nodes, POLICY, {}, NOW, lasting(warn_obs))
    assert not kinds(warn, Cordon)
    (event,) = kinds(warn, Event)
    assert event.kind == "Warning" and "nvlink_errors on GPU 2" in event.message


@pytest.mark.parametrize(("second", "cordons"), [
    (Evidence("ecc_dbe", "cordon", gpu="2"), "ecc_dbe,xid-155"),
    (Evidence("uncorrectable_remapped_rows", "count", gpu="2"), "xid-155"),
    (Evidence("health_warn", "count", gpu="2"), "xid-155"),
    (Evidence("uncorrectable_remapped_rows", "count", gpu=""), "xid-155"),  # kernel line: no GPU index
    (Evidence("uncorrectable_remapped_rows", "count", gpu="5"), ""),  # another GPU
    (Evidence("thermal", "count", gpu="2"), ""),  # heat: issue 13's false corroboration
    (Evidence("xid-63", "count", gpu="2"), ""),  # a recoverable row-remap event
    (NVLINK, ""),
])
def test_xid_155_is_corroborated_only_by_its_class_signals(second: Evidence, cordons: str) -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-0": Observation("h100-0", (XID155, second))}
    decision = decide(obs, nodes, POLICY, {}, NOW, lasting(obs))
    assert [c.reason for c in kinds(decision, Cordon)] == ([cordons] if cordons else [])


def test_a_signal_with_a_for_acts_only_after_it_lasted() -> None:
    """Issue 13: a 2.5 s blip of health_fail (`for: 2m`) cordoned a node. Now it must fire on
    every loop for 2 minutes; a loop without it starts the clock over; a loop where Prometheus
    did not answer for it keeps the clock."""
    nodes = pool(4)
    failing = {**healthy(nodes), "h100-0": Observation("h100-0", (Evidence("health_fail", "cordon", "1"),))}
    quiet = healthy(nodes)
    blind = {**healthy(nodes), "h100-0": Observation("h100-0", unknown_signals=("health_fail",))}
    first = decide(failing, nodes, POLICY, {}, NOW)
    assert not kinds(first, Cordon) and first.pending == {"h100-0": {("health_fail", "1"): NOW}}
    assert "h100-0: health unknown (health_fail), nothing done" in first.skipped
    assert not decide(quiet, nodes, POLICY, {}, NOW + 60, first.pending).pending  # the blip ended
    kept = decide(blind, nodes, POLICY, {}, NOW + 60, first.pending)
    assert kept.pending == first.pending
    assert kinds(decide(failing, nodes, POLICY, {}, NOW + 120, kept.pending), Cordon)
    assert not kinds(decide(failing, nodes, POLICY, {}, NOW + 119, kept.pending), Cordon)
    # XIDs are events, not levels: they act on the first loop.
    assert kinds(decide({**quiet, "h100-1": Observation("h100-1", (XID79,))}, nodes, POLICY, {}, NOW), Cordon)


def test_one_unknown_signal_blocks_release_but_not_a_cordon_on_another() -> None:
    """Issue 13: Loki's series-limit error made every node unknown, so a Prometheus XID 79 was ignored."""
    nodes = {**pool(4), "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="health_fail",
                                            since=0, healthy_checks=3)}
    loki_failed = {n: Observation(n, unknown_signals=("kernel_log",)) for n in nodes}
    loki_failed["h100-1"] = Observation("h100-1", (XID79,), unknown_signals=("kernel_log",))
    decision = decide(loki_failed, nodes, POLICY, {}, NOW)
    assert [c.node for c in kinds(decision, Cordon)] == ["h100-1"]
    assert not kinds(decision, Release) and not kinds(decision, SetHealthyChecks)


def test_healthy_counts_stop_at_the_threshold_and_repair_nodes_are_not_rewritten() -> None:
    """Issue 13: a needs-repair node, or one waiting for a reset, was patched every loop."""
    waiting = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=0,
                        healthy_checks=3, boot_id="a", cordon_boot_id="a")
    repair = NodeState("h100-1", "h100", unschedulable=True, owned=True, reason="health_fail", since=0,
                       healthy_checks=0, needs_repair=True)
    nodes = {**pool(4), "h100-0": waiting, "h100-1": repair}
    decision = decide(healthy(nodes), nodes, POLICY, {}, NOW)
    assert not kinds(decision, SetHealthyChecks) and not kinds(decision, Release)
    counting = {**nodes, "h100-0": replace(waiting, healthy_checks=1)}
    assert kinds(decide(healthy(nodes), counting, POLICY, {}, NOW), SetHealthyChecks) == [SetHealthyChecks("h100-0", 2)]


def test_the_gpu_healthy_condition_is_written_only_when_it_changes() -> None:
    nodes = {**pool(4), "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79",
                                            since=0, healthy_checks=3, boot_id="a", cordon_boot_id="a")}
    obs = {**healthy(nodes), "h100-1": Observation("h100-1", (XID79,)),
           "h100-2": Observation("h100-2", unknown_signals=("exporter",))}
    decision = decide(obs, nodes, POLICY, {}, NOW)
    written = {w.node: w.condition for w in kinds(decision, SetCondition)}
    assert written["h100-0"] == NodeCondition("False", "CordonedByHealthReconciler", "cordoned for xid-79; held "
                                              "until a GPU reset or node reboot is seen (bootID change)")
    assert written["h100-1"] == NodeCondition("False", "GPUFault", "fault signals: xid-79 on GPU 3")
    assert written["h100-2"] == NodeCondition("Unknown", "GPUHealthUnknown", "unknown or still settling: exporter")
    assert written["h100-3"] == NodeCondition("True", "GPUsHealthy", "no fault signal")
    assert [w.node for w in kinds(decision, SetCondition)] == ["h100-0", "h100-1", "h100-2", "h100-3"]  # faults first
    again = {name: replace(node, condition=written[name]) for name, node in nodes.items()}
    assert not kinds(decide(obs, again, POLICY, {}, NOW + 30), SetCondition)


def test_condition_writes_are_capped_per_loop_faults_first() -> None:
    nodes = pool(CONDITION_WRITES_PER_LOOP + 100)
    obs = {**healthy(nodes), "h100-99": Observation("h100-99", (XID79,))}
    decision = decide(obs, nodes, Policy(max_unhealthy_percent=100), {}, NOW)
    writes = kinds(decision, SetCondition)
    assert len(writes) == CONDITION_WRITES_PER_LOOP and writes[0].node == "h100-99"
    assert "100 GPUHealthy condition updates deferred to the next loops" in decision.skipped


def test_decide_is_pure() -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-3": Observation("h100-3", (XID79,))}
    assert decide(obs, nodes, POLICY, {}, NOW) == decide(obs, nodes, POLICY, {}, NOW)


@pytest.mark.parametrize("code", [46, 62, 109, 110, 136, 143, 156, 158])
def test_xids_nvidia_resolves_with_a_reset_cordon_and_wait_for_one(code: int) -> None:
    """Issue 14: these were unclassified (counted only). Now they cordon, and the cordon is lifted
    only after a GPU reset or reboot."""
    from generator.signals import needs_reset, xid_class

    cls = xid_class(code)
    assert cls is not None and cls.action == "cordon" and needs_reset(f"xid-{code}")
    nodes = pool(4)
    obs = {**healthy(nodes), "h100-2": Observation("h100-2", (Evidence(f"xid-{code}", cls.action, gpu="1"),))}
    assert [c.reason for c in kinds(decide(obs, nodes, POLICY, {}, NOW), Cordon)] == [f"xid-{code}"]
