"""The decision: observations + node state + policy + breaker + clock -> actions. No I/O.

Rules, in the order they apply to each node:
1. Unknown health (a source down, stale or partial) never cordons, releases or counts.
2. A node we cordoned that is schedulable again was uncordoned by a human: we drop ownership
   and remember the reason, and never re-cordon for that same reason (a new reason may).
3. Faulty: cordon and taint, unless someone else already cordoned it (not ours to own). A
   node cordoned `flapCount` times within `flapWindow` is labelled for repair and never released
   automatically.
4. Warn-only signals produce Events, nothing else.
5. Healthy means positive evidence: the exporter answers and reports every GPU the Node's
   capacity advertises (fewer is `gpus_missing`, a cordon-class fault). Our cordon is lifted
   after `healthyChecksToRelease` consecutive healthy loops and `cooldown` since the cordon,
   unless labelled for repair; a cordon for a reset-class fault (XID 48/79/154..., DBE, row-remap
   failure, missing GPUs) only once the Node's bootID changed (a GPU reset or a reboot).
6. Circuit breaker, per pool: if the pool's unschedulable nodes (whoever cordoned them) plus
   the new cordons would exceed `maxUnhealthyPercent` of its nodes (rounded up, at least one
   node), nothing new is cordoned in that pool and its breaker trips; while tripped, nothing in
   that pool is cordoned or released until `reset-breaker`. Other pools carry on.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

from generator.reconciler.model import (
    Breaker,
    Breakers,
    ClearHumanRelease,
    Cordon,
    Decision,
    Event,
    Evidence,
    NodeAction,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
    SetHealthyChecks,
    breaker_of,
)
from generator.signals import needs_reset


def _reason(signals: tuple[str, ...]) -> str:
    return ",".join(signals)


def decide(observations: dict[str, Observation], nodes: dict[str, NodeState], policy: Policy,
           breakers: Breakers, now: float) -> Decision:
    """Everything this loop should do. Pure: same inputs, same decision."""
    actions: list[NodeAction] = []
    skipped: list[str] = []
    candidates: list[tuple[NodeState, Cordon]] = []
    releases: list[tuple[NodeState, int]] = []
    for pool in sorted({n.pool for n in nodes.values()}):
        if (held := breaker_of(breakers, pool)).tripped:
            skipped.append(f"pool {pool}: breaker tripped ({held.reason}): no cordon or release until reset-breaker")
    for name in sorted(nodes):
        node = nodes[name]
        obs = _with_gpu_count(observations.get(name, Observation(name, unknown=True)), node)
        state = obs.state
        if state == "unknown":
            skipped.append(f"{name}: health unknown, nothing done")
            continue
        human_released = node.human_released
        if node.owned and not node.unschedulable:
            actions.append(NoteHumanRelease(name, node.reason))
            actions.append(Event(name, "Normal", "GPUHealthHumanRelease",
                                 f"uncordoned by someone else while held for {node.reason}; not re-cordoning for it"))
            human_released = node.reason
            node = NodeState(name, node.pool, history=node.history, human_released=node.reason)
        if state == "faulty":
            reason = _reason(obs.cordon_signals())
            if node.owned:
                if node.healthy_checks:
                    actions.append(SetHealthyChecks(name, 0))
                continue
            if node.unschedulable:
                skipped.append(f"{name}: faulty ({reason}) but already cordoned by someone else")
                continue
            if human_released and set(reason.split(",")) <= set(human_released.split(",")):
                skipped.append(f"{name}: faulty ({reason}) but a human released it for that reason")
                continue
            recent = tuple(t for t in node.history if now - t < policy.flap_window_seconds) + (now,)
            repair = len(recent) >= policy.flap_count
            candidates.append((node, Cordon(name, reason, obs.evidence, recent, repair)))
            continue
        if state == "warn":
            for e in obs.evidence:
                actions.append(Event(name, "Warning", "GPUHealthWarning",
                                     f"{e.signal}{' on GPU ' + e.gpu if e.gpu else ''}: {e.detail}".rstrip(": ")))
        if human_released and state == "healthy":
            actions.append(ClearHumanRelease(name))
        if node.owned and node.unschedulable and state == "healthy":
            checks = node.healthy_checks + 1
            cooled = node.since is None or now - node.since >= policy.cooldown_seconds
            waiting = _awaits_reset(node)
            if checks >= policy.healthy_checks_to_release and cooled and not node.needs_repair and not waiting:
                releases.append((node, checks))
            elif waiting and checks >= policy.healthy_checks_to_release and cooled:
                skipped.append(f"{name}: healthy, but held for {node.reason} until a GPU reset or reboot "
                               f"(bootID unchanged)")
                actions.append(SetHealthyChecks(name, checks))
            else:
                actions.append(SetHealthyChecks(name, checks))
    after = _trip(candidates, nodes, policy, breakers, now, skipped)
    stopped = {pool for pool in {n.pool for n in nodes.values()} if breaker_of(after, pool).tripped}
    for node, cordon in candidates:
        if node.pool in stopped:
            skipped.append(f"{cordon.node}: would cordon for {cordon.reason}, breaker of pool {node.pool} tripped")
            continue
        actions.append(cordon)
        message = f"cordoned and tainted for {cordon.reason}"
        if cordon.repair:
            message += f"; cordoned {len(cordon.history)} times recently: labelled for repair"
        actions.append(Event(cordon.node, "Warning", "GPUHealthCordoned", message))
    for node, checks in releases:  # nothing is released in a pool whose breaker is tripped
        if node.pool not in stopped:
            actions.append(Release(node.name))
            actions.append(Event(node.name, "Normal", "GPUHealthReleased",
                                 f"healthy for {checks} checks: cordon for {node.reason} lifted"))
    return Decision(tuple(actions), after, tuple(skipped))


def _with_gpu_count(obs: Observation, node: NodeState) -> Observation:
    """The observation with `gpus_missing` evidence when fewer GPUs report than the Node advertises."""
    if obs.unknown or obs.gpus_reporting is None or not node.gpus or obs.gpus_reporting >= node.gpus:
        return obs
    if any(e.signal == "gpus_missing" for e in obs.evidence):
        return obs
    missing = Evidence("gpus_missing", "cordon", "", f"{obs.gpus_reporting} of {node.gpus} GPUs report")
    return replace(obs, evidence=(*obs.evidence, missing))


def _awaits_reset(node: NodeState) -> bool:
    """Held for a reset-class fault and the node has not rebooted (or reset) since the cordon."""
    if not any(needs_reset(signal) for signal in node.reason.split(",")):
        return False
    return not node.cordon_boot_id or node.boot_id == node.cordon_boot_id


def breaker_limit(size: int, percent: float) -> int:
    """Most unschedulable nodes a pool of `size` may have: the percentage rounded up, at least one
    (floor() let a 1-node pool never be cordoned and 2 faults in a 3-node pool cordon neither)."""
    return max(1, math.ceil(size * percent / 100 - 1e-9))


def _trip(candidates: list[tuple[NodeState, Cordon]], nodes: dict[str, NodeState], policy: Policy,
          breakers: Breakers, now: float, skipped: list[str]) -> dict[str, Breaker]:
    """The breakers after this loop: a pool trips when its new cordons would take it past the limit."""
    after = {pool: b for pool, b in breakers.items() if b.tripped}
    size: dict[str, int] = defaultdict(int)
    down: dict[str, int] = defaultdict(int)
    for node in nodes.values():
        size[node.pool] += 1
        down[node.pool] += node.unschedulable  # ours, a human's or the autoscaler's: capacity is gone
    new: dict[str, int] = defaultdict(int)
    for node, _ in candidates:
        new[node.pool] += 1
    for pool in sorted(new):
        if breaker_of(after, pool).tripped:
            continue
        limit = breaker_limit(size[pool], policy.max_unhealthy_percent)
        if down[pool] + new[pool] > limit:
            reason = (f"pool {pool}: {down[pool] + new[pool]} of {size[pool]} nodes would be unschedulable "
                      f"({down[pool]} already), more than {policy.max_unhealthy_percent:g}% ({limit})")
            skipped.append(f"breaker trips: {reason}")
            after[pool] = Breaker(True, reason, now)
    return after
