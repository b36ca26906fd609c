"""The decision: observations + node state + policy + breaker + clock -> actions. No I/O.

Rules, in the order they apply to each node:
0. A signal with a `for:` in the signals table (health_fail 2m, gpus_missing 5m ...) counts only
   once it has fired on every loop for that long; until then it is unknown, as in rule 1. A
   2-second scrape gap is not a missing GPU.
1. Unknown health never cordons on what is unknown, releases or counts: a node no source
   covers is left alone; a node with some signals unknown (a failed query, its exporter down)
   is still cordoned on the evidence that did arrive, but never counted healthy.
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
6. Cordon budget, per pool: at most `cordonsPerLoop` new cordons a loop; the others wait for the
   next loops, if their evidence is still there.
   Circuit breaker, per pool: if the pool's unschedulable nodes (whoever cordoned them) plus
   the new cordons would exceed `maxUnhealthyPercent` of its nodes (rounded up, at least one
   node), nothing new is cordoned in that pool and its breaker trips; while tripped, nothing in
   that pool is cordoned or released until `reset-breaker`. Other pools carry on.
7. Drain (off unless the cluster file turns it on): the pods of every node we hold are evicted
   through the eviction API until none is left; a pool's own drain breaker trips when more of
   its nodes would be draining at once than `drain.maxPercent` allows.
8. The Node condition `GPUHealthy` says what the reconciler concluded (True; False for a fault
   or while our cordon holds; Unknown). It is written only when status, reason or message
   changed, at most `CONDITION_WRITES_PER_LOOP` per loop (faults first), so 10k nodes turning
   Unknown when Prometheus goes away do not become 10k writes in one loop.
"""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import attrgetter

from generator.reconciler.model import (
    CONDITION_TYPE,
    DRAIN,
    Breaker,
    Breakers,
    ClearHumanRelease,
    Cordon,
    Decision,
    Drain,
    Event,
    Evidence,
    NodeAction,
    NodeCondition,
    NodeState,
    NoteHumanRelease,
    Observation,
    Pending,
    Policy,
    Release,
    SetCondition,
    SetHealthyChecks,
    breaker_of,
    condition,
    drain_breaker_of,
)
from generator.signals import CONDITIONS, needs_reset, persistence_seconds

WARNING_EVENTS_PER_NODE = 8
"""Events for one node's warnings in one loop: forged lines naming a thousand SXids are one summary."""
CONDITION_WRITES_PER_LOOP = 500
"""Most `GPUHealthy` condition writes in one loop; the rest follow in the next loops."""
_FOR = {c.name: persistence_seconds(c.name) for c in CONDITIONS}
_CONDITION_ORDER = {"False": 0, "Unknown": 1, "True": 2}
_POOL = attrgetter("pool")
_UNSCHEDULABLE = attrgetter("unschedulable")


def _reason(signals: tuple[str, ...]) -> str:
    return ",".join(signals)


def decide(observations: dict[str, Observation], nodes: dict[str, NodeState], policy: Policy,
           breakers: Breakers, now: float, pending: Pending | None = None,
           calm: AbstractSet[str] = frozenset()) -> Decision:
    """Everything this loop should do. Pure: same inputs, same decision.

    `calm`: nodes of the last decision's `calm` whose Observation and NodeState are the very ones
    that decision had (the caller knows what changed; `pending` must be that decision's). They are
    not looked at: they would take the quiet path with nothing to do again. The decision is the
    same as without them, and costs what changed instead of every node."""
    states = nodes.values()
    size = Counter(map(_POOL, states))
    down = Counter(compress(map(_POOL, states), map(_UNSCHEDULABLE, states)))  # ours, a human's, the autoscaler's
    rules = _NodeRules(policy, now, skipped=_tripped_pools(size, breakers))
    seen = rules.seen
    quiet: list[str] = []
    pending = pending or {}
    healthy = _healthy_condition
    for name in sorted(nodes.keys() - calm) if calm else sorted(nodes):
        node = nodes[name]
        obs = observations.get(name) or Observation(name, unknown=True)
        count = obs.gpus_reporting
        if (obs.quiet and not node.owned and not node.human_released and name not in pending
                and (count is None or count >= node.gpus)):
            # Most nodes, every loop: healthy with nothing of ours on them; only the condition may
            # have something to do (usually the very object the Node carries: see model.condition).
            want = healthy(count)
            if want is not node.condition and want != node.condition:
                seen[name] = (node, obs)
            else:
                quiet.append(name)
            continue
        rules.apply(name, node, obs, pending.get(name, {}))
    actions, skipped, candidates = rules.actions, rules.skipped, rules.candidates
    after = _trip(candidates, size, down, policy, breakers, now, skipped)
    stopped = {pool for pool in size if breaker_of(after, pool).tripped}
    actions.extend(_cordons(candidates, stopped, policy, skipped))
    released = _releases(rules.releases, stopped, actions)
    if policy.drain:
        cordoned = {cordon.node for node, cordon in candidates if node.pool not in stopped}
        actions.extend(_drains(nodes, cordoned, released, policy, after, now, skipped))
    actions.extend(_condition_writes(seen, released, policy, skipped))
    return Decision(tuple(actions), after, tuple(skipped), rules.still_pending,
                    frozenset(nodes.keys() & calm).union(quiet))


def _tripped_pools(pools: Iterable[str], breakers: Breakers) -> list[str]:
    """A line for each pool whose breaker is tripped: nothing there is cordoned or released."""
    return [f"pool {pool}: breaker tripped ({held.reason}): no cordon or release until reset-breaker"
            for pool in sorted(pools) if (held := breaker_of(breakers, pool)).tripped]


@dataclass
class _NodeRules:
    """Rules 0 to 5, node by node: what each node that is not quiet asks for before the pools'
    budgets and breakers (rule 6) decide which cordons and releases happen."""

    policy: Policy
    now: float
    actions: list[NodeAction] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    candidates: list[tuple[NodeState, Cordon]] = field(default_factory=list)
    """Cordons the node's evidence asks for; rule 6 lets some of them through."""
    releases: list[tuple[NodeState, int]] = field(default_factory=list)
    """Our cordons that may be lifted, with the node's healthy checks; unless the pool's breaker is tripped."""
    seen: dict[str, tuple[NodeState, Observation]] = field(default_factory=dict)
    """Nodes whose `GPUHealthy` condition is worked out again, with what the decision made of them."""
    still_pending: dict[str, dict[tuple[str, str], float]] = field(default_factory=dict)

    def apply(self, name: str, node: NodeState, obs: Observation, before: Mapping[tuple[str, str], float]) -> None:
        """One node that is not quiet; `before`: when its signals were first seen (rule 0)."""
        obs = _persisted(_with_gpu_count(obs, node), before, self.still_pending, self.now)
        self.seen[name] = (node, obs)
        state = obs.state
        if state == "unknown":
            self.skipped.append(f"{name}: health unknown ({', '.join(obs.unknown_signals) or 'no source'}), "
                                "nothing done")
            return
        if node.owned and not node.unschedulable:
            node = self._released_by_human(name, node, obs)
        if state == "faulty":
            self._faulty(name, node, obs)
            return
        if state == "warn":
            self.actions.extend(_warnings(name, obs.evidence))
        if node.human_released and state == "healthy":
            self.actions.append(ClearHumanRelease(name))
        if node.owned and node.unschedulable and state == "healthy" and not node.needs_repair:
            self._held_and_healthy(name, node)

    def _released_by_human(self, name: str, node: NodeState, obs: Observation) -> NodeState:
        """Rule 2: our cordon was lifted by someone else; the node as no longer ours, released for its reason."""
        self.actions.append(NoteHumanRelease(name, node.reason))
        self.actions.append(Event(name, "Normal", "GPUHealthHumanRelease",
                                  f"uncordoned by someone else while held for {node.reason}; not re-cordoning for it"))
        node = NodeState(name, node.pool, history=node.history, human_released=node.reason, condition=node.condition)
        self.seen[name] = (node, obs)
        return node

    def _faulty(self, name: str, node: NodeState, obs: Observation) -> None:
        """Rule 3: a cordon candidate, unless the node is held already or a human released it for this."""
        reason = _reason(obs.cordon_signals())
        if node.owned:
            if node.healthy_checks:
                self.actions.append(SetHealthyChecks(name, 0))
            return
        if node.unschedulable:
            self.skipped.append(f"{name}: faulty ({reason}) but already cordoned by someone else")
            return
        if node.human_released and set(reason.split(",")) <= set(node.human_released.split(",")):
            self.skipped.append(f"{name}: faulty ({reason}) but a human released it for that reason")
            return
        recent = tuple(t for t in node.history if self.now - t < self.policy.flap_window_seconds) + (self.now,)
        repair = len(recent) >= self.policy.flap_count
        self.candidates.append((node, Cordon(name, reason, obs.evidence, recent, repair)))

    def _held_and_healthy(self, name: str, node: NodeState) -> None:
        """Rule 5: one more healthy check for a node we hold; a release once it has enough, has cooled
        down and needs no reset."""
        # The count stops at the threshold: a node waiting for cooldown or a reset is not
        # patched every loop to say the same thing again.
        needed = self.policy.healthy_checks_to_release
        checks = min(node.healthy_checks + 1, needed)
        cooled = node.since is None or self.now - node.since >= self.policy.cooldown_seconds
        waiting = _awaits_reset(node)
        if checks >= needed and cooled and not waiting:
            self.releases.append((node, checks))
            return
        if waiting and checks >= needed and cooled:
            self.skipped.append(f"{name}: healthy, but held for {node.reason} until a GPU reset or reboot "
                                f"(bootID unchanged)")
        if checks != node.healthy_checks:
            self.actions.append(SetHealthyChecks(name, checks))


def _warnings(name: str, evidence: tuple[Evidence, ...]) -> list[Event]:
    """Rule 4: an Event a warning signal, at most WARNING_EVENTS_PER_NODE and a line for the rest."""
    events = [Event(name, "Warning", "GPUHealthWarning",
                    f"{e.signal}{' on GPU ' + e.gpu if e.gpu else ''}: {e.detail}".rstrip(": "))
              for e in evidence[:WARNING_EVENTS_PER_NODE]]
    if len(evidence) > WARNING_EVENTS_PER_NODE:
        events.append(Event(name, "Warning", "GPUHealthWarning",
                            f"and {len(evidence) - WARNING_EVENTS_PER_NODE} more warning signals"))
    return events


def _cordons(candidates: list[tuple[NodeState, Cordon]], stopped: set[str], policy: Policy,
             skipped: list[str]) -> list[NodeAction]:
    """Rule 6: the cordons (each with its Event) that neither a tripped breaker nor the pool's budget
    of cordons per loop holds back; what is held back is said in `skipped`."""
    out: list[NodeAction] = []
    budget: dict[str, int] = defaultdict(lambda: policy.cordons_per_loop)
    for node, cordon in candidates:
        if node.pool in stopped:
            skipped.append(f"{cordon.node}: would cordon for {cordon.reason}, breaker of pool {node.pool} tripped")
            continue
        if budget[node.pool] <= 0:
            skipped.append(f"{cordon.node}: would cordon for {cordon.reason}, but pool {node.pool} had its "
                           f"{policy.cordons_per_loop} cordons this loop: next loop")
            continue
        budget[node.pool] -= 1
        out.append(cordon)
        message = f"cordoned and tainted for {cordon.reason}"
        if cordon.repair:
            message += f"; cordoned {len(cordon.history)} times recently: labelled for repair"
        out.append(Event(cordon.node, "Warning", "GPUHealthCordoned", message))
    return out


def _releases(releases: list[tuple[NodeState, int]], stopped: set[str], actions: list[NodeAction]) -> set[str]:
    """Rule 6: lift the cordons of nodes whose pool's breaker is not tripped (the others keep their
    count); the nodes released."""
    released: set[str] = set()
    for node, checks in releases:
        if node.pool not in stopped:
            released.add(node.name)
            actions.append(Release(node.name))
            actions.append(Event(node.name, "Normal", "GPUHealthReleased",
                                 f"healthy for {checks} checks: cordon for {node.reason} lifted"))
        elif node.healthy_checks != checks:
            actions.append(SetHealthyChecks(node.name, checks))
    return released


def _drains(nodes: dict[str, NodeState], cordoned: set[str], released: set[str], policy: Policy,
            breakers: dict[str, Breaker], now: float, skipped: list[str]) -> list[Drain]:
    """Drains of our cordoned (and just cordoned) nodes not yet drained. The drain breaker of a
    pool trips when more of its nodes would be draining at once than `drain_max_percent` allows
    (rounded up, at least one): then nothing in that pool is evicted until a human resets it."""
    todo: dict[str, list[str]] = defaultdict(list)
    size: dict[str, int] = defaultdict(int)
    for node in nodes.values():
        size[node.pool] += 1
        ours = (node.owned and node.unschedulable and node.name not in released) or node.name in cordoned
        if ours and not node.drained:
            todo[node.pool].append(node.name)
    out: list[Drain] = []
    for pool in sorted(todo):
        if drain_breaker_of(breakers, pool).tripped:
            skipped.append(f"pool {pool}: drain breaker tripped: {len(todo[pool])} node(s) left undrained")
            continue
        limit = breaker_limit(size[pool], policy.drain_max_percent)
        if len(todo[pool]) > limit:
            reason = (f"pool {pool}: {len(todo[pool])} of {size[pool]} nodes would be draining at once, more than "
                      f"{policy.drain_max_percent:g}% ({limit})")
            skipped.append(f"drain breaker trips: {reason}")
            breakers[DRAIN + pool] = Breaker(True, reason, now)
            continue
        out.extend(Drain(name) for name in sorted(todo[pool]))
    return out


def _persisted(obs: Observation, before: Mapping[tuple[str, str], float],
               pending: dict[str, dict[tuple[str, str], float]], now: float) -> Observation:
    """The observation without signals that have not yet fired for their `for:` (a fault-class
    one among them makes the node unknown; a warning is simply not a warning yet); records when
    each such signal was first seen in `pending` (what the next loop gets)."""
    if obs.unknown:  # nothing known: keep the clocks running as they were
        if before:
            pending[obs.node] = dict(before)
        return obs
    kept: list[Evidence] = []
    settling: set[str] = set()
    mine: dict[tuple[str, str], float] = {}
    for e in obs.evidence:
        hold = _FOR.get(e.signal, 0.0)
        if hold <= 0:
            kept.append(e)
            continue
        first = mine[(e.signal, e.gpu)] = before.get((e.signal, e.gpu), now)
        if now - first >= hold:
            kept.append(e)
        elif e.action in ("cordon", "corroborate"):  # a fault not yet lasting: neither fault nor health
            settling.add(e.signal)
    for key, first in before.items():  # a signal nobody could read this loop did not stop firing
        if key[0] in obs.unknown_signals and key not in mine:
            mine[key] = first
    if mine:
        pending[obs.node] = mine
    if len(kept) == len(obs.evidence):
        return obs
    return replace(obs, evidence=tuple(kept), unknown_signals=tuple(sorted({*obs.unknown_signals, *settling})))


def _condition(node: NodeState, obs: Observation, released: bool, policy: Policy) -> NodeCondition:
    """What `GPUHealthy` should say about the node after this loop."""
    state = obs.state
    if state == "faulty":
        cordon = set(obs.cordon_signals())
        faults = sorted({(e.signal, e.gpu) for e in obs.evidence if e.signal in cordon})
        return NodeCondition("False", "GPUFault", "fault signals: " + ", ".join(
            f"{signal} on GPU {gpu}" if gpu else signal for signal, gpu in faults))
    if node.owned and node.unschedulable and not released:
        if node.needs_repair:
            until = "labelled for repair: a human releases it"
        elif _awaits_reset(node):
            until = "until a GPU reset or node reboot is seen (bootID change)"
        else:
            until = (f"until healthy for {policy.healthy_checks_to_release} checks and "
                     f"{policy.cooldown_seconds:g}s after the cordon")
        return NodeCondition("False", "CordonedByHealthReconciler", f"cordoned for {node.reason}; held {until}")
    if state == "unknown":
        return NodeCondition("Unknown", "GPUHealthUnknown", "unknown or still settling: " + (
            ", ".join(obs.unknown_signals) or "no source covers this node"))
    if state == "warn":
        return NodeCondition("True", "GPUWarnings", "warnings: " + ", ".join(sorted({e.signal for e in obs.evidence})))
    return _healthy_condition(obs.gpus_reporting)


def _condition_writes(seen: dict[str, tuple[NodeState, Observation]], released: set[str], policy: Policy,
                      skipped: list[str]) -> list[SetCondition]:
    """Condition writes where the Node says something else, faults first, capped per loop."""
    changed = []
    for name, (node, obs) in seen.items():
        want = _condition(node, obs, name in released, policy)
        if want != node.condition:
            changed.append(SetCondition(name, want, node.condition is None or node.condition.status != want.status))
    changed.sort(key=lambda w: (_CONDITION_ORDER[w.condition.status], w.node))
    if len(changed) > CONDITION_WRITES_PER_LOOP:
        skipped.append(f"{len(changed) - CONDITION_WRITES_PER_LOOP} {CONDITION_TYPE} condition updates "
                       "deferred to the next loops")
    return changed[:CONDITION_WRITES_PER_LOOP]


@functools.lru_cache(maxsize=256)
def _healthy_condition(gpus_reporting: int | None) -> NodeCondition:
    """`GPUHealthy` of a healthy node (one per GPU count: compared with every node every loop)."""
    count = f"{gpus_reporting} GPUs report, " if gpus_reporting is not None else ""
    return condition("True", "GPUsHealthy", f"{count}no fault signal")


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


def _trip(candidates: list[tuple[NodeState, Cordon]], size: Mapping[str, int], down: Mapping[str, int],
          policy: Policy, breakers: Breakers, now: float, skipped: list[str]) -> dict[str, Breaker]:
    """The breakers after this loop: a pool trips when its new cordons would take it past the limit
    (`size`: nodes per pool; `down`: unschedulable nodes per pool)."""
    after = {pool: b for pool, b in breakers.items() if b.tripped}
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
