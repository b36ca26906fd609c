"""The reconciler's decision, rule by rule: a pure function, tested without I/O."""

from __future__ import annotations

from dataclasses import replace

from generator.reconciler.decide import decide
from generator.reconciler.model import (
    Breaker,
    ClearHumanRelease,
    Cordon,
    Event,
    Evidence,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
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


def test_fatal_xid_cordons_with_reason_and_event() -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-3": Observation("h100-3", (XID79,))}
    decision = decide(obs, nodes, POLICY, Breaker(), NOW)
    (cordon,) = kinds(decision, Cordon)
    assert cordon.node == "h100-3" and cordon.reason == "xid-79" and cordon.evidence == (XID79,)
    assert cordon.history == (NOW,) and not cordon.repair
    assert any(e.reason == "GPUHealthCordoned" and e.node == "h100-3" for e in kinds(decision, Event))
    assert not decision.breaker.tripped


def test_unknown_never_cordons_or_releases_or_counts() -> None:
    nodes = pool(4)
    nodes["h100-0"] = replace(nodes["h100-0"], unschedulable=True, owned=True, reason="xid-79", since=0,
                              healthy_checks=2)
    obs = {name: Observation(name, unknown=True) for name in nodes}
    obs["h100-1"] = Observation("h100-1", (XID79,), unknown=True)  # evidence, but a source is down
    decision = decide(obs, nodes, POLICY, Breaker(), NOW)
    assert decision.actions == ()
    assert any("health unknown" in s for s in decision.skipped)
    assert decide({}, nodes, POLICY, Breaker(), NOW).actions == ()  # no observation at all = unknown


def test_release_after_healthy_checks_and_cooldown_only() -> None:
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=NOW - 1000,
                     healthy_checks=1)
    nodes = {**pool(4), "h100-0": held}
    first = decide(healthy(nodes), nodes, POLICY, Breaker(), NOW)
    assert kinds(first, SetHealthyChecks) == [SetHealthyChecks("h100-0", 2)] and not kinds(first, Release)
    second = decide(healthy(nodes), {**nodes, "h100-0": replace(held, healthy_checks=2)}, POLICY, Breaker(), NOW)
    assert kinds(second, Release) == [Release("h100-0")]
    # Enough checks but still cooling down: hold.
    young = replace(held, healthy_checks=2, since=NOW - 60)
    third = decide(healthy(nodes), {**nodes, "h100-0": young}, POLICY, Breaker(), NOW)
    assert not kinds(third, Release) and kinds(third, SetHealthyChecks) == [SetHealthyChecks("h100-0", 3)]


def test_faulty_again_resets_the_healthy_count() -> None:
    held = NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79", since=NOW, healthy_checks=2)
    decision = decide({"h100-0": Observation("h100-0", (XID79,))}, {"h100-0": held}, POLICY, Breaker(), NOW)
    assert decision.actions == (SetHealthyChecks("h100-0", 0),)


def test_only_our_own_cordons_are_lifted() -> None:
    foreign = NodeState("h100-0", "h100", unschedulable=True)  # cordoned by a human or another tool
    nodes = {**pool(4), "h100-0": foreign}
    for _ in range(5):
        decision = decide(healthy(nodes), nodes, POLICY, Breaker(), NOW)
        assert not kinds(decision, Release) and not kinds(decision, SetHealthyChecks)
    faulty = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, Breaker(), NOW)
    assert not kinds(faulty, Cordon)  # already cordoned: not ours to take over
    assert any("already cordoned by someone else" in s for s in faulty.skipped)


def test_human_uncordon_is_respected_for_the_same_finding_only() -> None:
    released = NodeState("h100-0", "h100", unschedulable=False, owned=True, reason="xid-79", since=NOW - 100)
    nodes = {**pool(4), "h100-0": released}
    same = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, Breaker(), NOW)
    assert NoteHumanRelease("h100-0", "xid-79") in same.actions and not kinds(same, Cordon)
    remembered = {**nodes, "h100-0": NodeState("h100-0", "h100", human_released="xid-79")}
    again = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, remembered, POLICY, Breaker(), NOW)
    assert not kinds(again, Cordon) and any("a human released it" in s for s in again.skipped)
    new_fault = decide({**healthy(nodes), "h100-0": Observation("h100-0", (DBE,))}, remembered, POLICY, Breaker(),
                       NOW)
    assert [c.reason for c in kinds(new_fault, Cordon)] == ["ecc_dbe"]
    recovered = decide(healthy(nodes), remembered, POLICY, Breaker(), NOW)
    assert ClearHumanRelease("h100-0") in recovered.actions


def test_breaker_trips_at_the_threshold_and_holds() -> None:
    nodes = pool(10)
    five = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in range(5)}}
    at_limit = decide(five, nodes, POLICY, Breaker(), NOW)
    assert len(kinds(at_limit, Cordon)) == 5 and not at_limit.breaker.tripped  # 50% of 10 is allowed
    six = {**healthy(nodes), **{f"h100-{i}": Observation(f"h100-{i}", (XID79,)) for i in range(6)}}
    over = decide(six, nodes, POLICY, Breaker(), NOW)
    assert kinds(over, Cordon) == [] and over.breaker.tripped and over.breaker.since == NOW
    assert "6 of 10 nodes" in over.breaker.reason
    # Held cordons count too: 4 held + 2 new > 5.
    held = {**nodes, **{f"h100-{i}": replace(nodes[f"h100-{i}"], unschedulable=True, owned=True, reason="x",
                                               since=NOW) for i in range(4)}}
    more = {**healthy(nodes), "h100-8": Observation("h100-8", (XID79,)), "h100-9": Observation("h100-9", (DBE,))}
    assert decide(more, held, POLICY, Breaker(), NOW).breaker.tripped
    # Once tripped: nothing is cordoned or released, even a single fault or a healthy held node.
    tripped = over.breaker
    later = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, tripped, NOW + 9999)
    assert not kinds(later, Cordon) and later.breaker == tripped
    ready = {**nodes, "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="x", since=0,
                                          healthy_checks=5)}
    assert not kinds(decide(healthy(ready), ready, POLICY, tripped, NOW), Release)


def test_breaker_is_per_pool() -> None:
    nodes = {**pool(10, "h100"), **pool(2, "a100")}
    obs = {**healthy(nodes), "a100-0": Observation("a100-0", (XID79,)), "h100-0": Observation("h100-0", (XID79,))}
    decision = decide(obs, nodes, POLICY, Breaker(), NOW)  # 1 of 2 a100 is 50%: allowed
    assert {c.node for c in kinds(decision, Cordon)} == {"a100-0", "h100-0"}


def test_flapping_node_is_labelled_for_repair_and_never_released() -> None:
    nodes = {**pool(10), "h100-0": NodeState("h100-0", "h100", history=(NOW - 3000, NOW - 1500, NOW - 99999))}
    decision = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID79,))}, nodes, POLICY, Breaker(), NOW)
    (cordon,) = kinds(decision, Cordon)
    assert cordon.repair and cordon.history == (NOW - 3000, NOW - 1500, NOW)  # the old one left the window
    held = {**nodes, "h100-0": NodeState("h100-0", "h100", unschedulable=True, owned=True, reason="xid-79",
                                         since=0, healthy_checks=10, needs_repair=True)}
    assert not kinds(decide(healthy(held), held, POLICY, Breaker(), NOW), Release)


def test_corroboration_and_warn_only_signals() -> None:
    nodes = pool(10)
    alone = decide({**healthy(nodes), "h100-0": Observation("h100-0", (XID155,))}, nodes, POLICY, Breaker(), NOW)
    assert not kinds(alone, Cordon)
    paired = Observation("h100-0", (XID155, Evidence("health_fail", "cordon", gpu="7"), NVLINK))
    assert [c.reason for c in kinds(decide({"h100-0": paired}, nodes, POLICY, Breaker(), NOW), Cordon)] == [
        "health_fail,xid-155"]  # 155 corroborated by NVLink errors on the same GPU 2
    warn = decide({**healthy(nodes), "h100-1": Observation("h100-1", (NVLINK,))}, nodes, POLICY, Breaker(), NOW)
    assert not kinds(warn, Cordon)
    (event,) = kinds(warn, Event)
    assert event.kind == "Warning" and "nvlink_errors on GPU 2" in event.message


def test_decide_is_pure() -> None:
    nodes = pool(10)
    obs = {**healthy(nodes), "h100-3": Observation("h100-3", (XID79,))}
    assert decide(obs, nodes, POLICY, Breaker(), NOW) == decide(obs, nodes, POLICY, Breaker(), NOW)
