"""The decision: observations + node state + policy + breaker + clock -> actions. No I/O.

Rules, in the order they apply to each node:
1. Unknown health (a source down, stale or partial) never cordons, releases or counts.
2. A node we cordoned that is schedulable again was uncordoned by a human: we drop ownership
   and remember the reason, and never re-cordon for that same reason (a new reason may).
3. Faulty: cordon and taint, unless someone else already cordoned it (not ours to own). A
   node cordoned `flapCount` times within `flapWindow` is labelled for repair and never released
   automatically.
4. Warn-only signals produce Events, nothing else.
5. Healthy: our cordon is lifted after `healthyChecksToRelease` consecutive healthy loops and
   `cooldown` since the cordon, unless labelled for repair.
6. Circuit breaker, per pool: if our cordons (held plus new) would exceed
   `maxUnhealthyPercent` of the pool's nodes, nothing new is cordoned and the breaker trips;
   while tripped, nothing at all is cordoned or released until `reset-breaker`.
"""

from __future__ import annotations

import math
from collections import defaultdict

from generator.reconciler.model import (
    Breaker,
    ClearHumanRelease,
    Cordon,
    Decision,
    Event,
    NodeAction,
    NodeState,
    NoteHumanRelease,
    Observation,
    Policy,
    Release,
    SetHealthyChecks,
)


def _reason(signals: tuple[str, ...]) -> str:
    return ",".join(signals)


def decide(observations: dict[str, Observation], nodes: dict[str, NodeState], policy: Policy, breaker: Breaker,
           now: float) -> Decision:
    """Everything this loop should do. Pure: same inputs, same decision."""
    actions: list[NodeAction] = []
    skipped: list[str] = []
    candidates: list[tuple[NodeState, Cordon]] = []
    if breaker.tripped:
        skipped.append(f"breaker tripped ({breaker.reason}): no cordon or release until reset-breaker")
    for name in sorted(nodes):
        node = nodes[name]
        obs = observations.get(name, Observation(name, unknown=True))
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
            if checks >= policy.healthy_checks_to_release and cooled and not node.needs_repair:
                if not breaker.tripped:
                    actions.append(Release(name))
                    actions.append(Event(name, "Normal", "GPUHealthReleased",
                                         f"healthy for {checks} checks: cordon for {node.reason} lifted"))
            else:
                actions.append(SetHealthyChecks(name, checks))
    breaker = _breaker(candidates, nodes, policy, breaker, now, skipped)
    if not breaker.tripped:
        for _, cordon in candidates:
            actions.append(cordon)
            message = f"cordoned and tainted for {cordon.reason}"
            if cordon.repair:
                message += f"; cordoned {len(cordon.history)} times recently: labelled for repair"
            actions.append(Event(cordon.node, "Warning", "GPUHealthCordoned", message))
    elif candidates:
        skipped.extend(f"{c.node}: would cordon for {c.reason}, breaker tripped" for _, c in candidates)
    if breaker.tripped:  # nothing but bookkeeping and events while tripped
        actions = [a for a in actions if not isinstance(a, (Cordon, Release))]
    return Decision(tuple(actions), breaker, tuple(skipped))


def _breaker(candidates: list[tuple[NodeState, Cordon]], nodes: dict[str, NodeState], policy: Policy,
             breaker: Breaker, now: float, skipped: list[str]) -> Breaker:
    if breaker.tripped or not candidates:
        return breaker
    size: dict[str, int] = defaultdict(int)
    held: dict[str, int] = defaultdict(int)
    for node in nodes.values():
        size[node.pool] += 1
        held[node.pool] += node.owned and node.unschedulable
    new: dict[str, int] = defaultdict(int)
    for node, _ in candidates:
        new[node.pool] += 1
    for pool in sorted(new):
        limit = math.floor(size[pool] * policy.max_unhealthy_percent / 100)
        if held[pool] + new[pool] > limit:
            reason = (f"pool {pool}: {held[pool] + new[pool]} of {size[pool]} nodes would be cordoned, more than "
                      f"{policy.max_unhealthy_percent:g}% ({limit})")
            skipped.append(f"breaker trips: {reason}")
            return Breaker(True, reason, now)
    return breaker
