"""What the reconciler sees and what it may do: observations, node state, policy, actions.

Node state lives on the Node itself (annotations and a label), so the reconciler is stateless
between loops and any replica that wins the Lease can continue where another stopped.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Literal

from generator.signals import HEALTH_TAINT_KEY, Action, corroborators

PREFIX = "health.fleetgen.io"
ANNOTATION_OWNED = f"{PREFIX}/cordoned"
"""Set by us when we cordon: our ownership mark (a cordon without it is someone else's)."""
ANNOTATION_REASON = f"{PREFIX}/reason"
ANNOTATION_SINCE = f"{PREFIX}/since"
ANNOTATION_HEALTHY = f"{PREFIX}/healthy-checks"
ANNOTATION_HISTORY = f"{PREFIX}/cordon-history"
ANNOTATION_EVIDENCE = f"{PREFIX}/evidence"
"""JSON list of the signals behind our cordon: signal (e.g. xid-79), GPU index and detail."""
ANNOTATION_BOOT = f"{PREFIX}/boot-id"
"""The Node's bootID when we cordoned it: a reset-class fault is released only once it changed."""
ANNOTATION_HUMAN = f"{PREFIX}/released-by-human"
"""The reason of our cordon that a human lifted: not re-cordoned for that same reason."""
ANNOTATION_DRAINED = f"{PREFIX}/drained"
"""Set once every pod of a node we cordoned was evicted (or needs none): no more eviction calls."""
LABEL_REPAIR = f"{PREFIX}/needs-repair"
TAINT_KEY = HEALTH_TAINT_KEY

State = Literal["healthy", "warn", "faulty", "unknown"]

CONDITION_TYPE = "GPUHealthy"
"""The Node condition the reconciler owns: True, False (a fault, or held by our cordon) or Unknown."""


@dataclass(frozen=True)
class NodeCondition:
    """The parts of our Node condition that are compared between loops (no timestamps: a write
    happens only when one of these changes)."""

    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


@functools.lru_cache(maxsize=1024)
def condition(status: Literal["True", "False", "Unknown"], reason: str, message: str) -> NodeCondition:
    """One object per distinct condition (most nodes carry the same few): less memory, and each
    loop's comparison of what a Node carries with what it should is usually an identity."""
    return NodeCondition(status, reason, message)


@dataclass(frozen=True)
class Evidence:
    """One signal about one GPU (or the node): which table entry fired and what it means."""

    signal: str
    """Stable name, e.g. `xid-79`, `ecc_dbe`, `gpus_missing`."""
    action: Action
    gpu: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Observation:
    """Everything the sources say about one node in this loop."""

    node: str
    evidence: tuple[Evidence, ...] = ()
    unknown: bool = False
    """Nothing is known about this node (no source covered it): act on nothing."""
    gpus_reporting: int | None = None
    """GPUs the node's exporter reports (None: no source counts them). Compared with the Node's
    capacity, so a missing GPU is seen without kube-state-metrics."""
    unknown_signals: tuple[str, ...] = ()
    """Signals nobody could read for this node this loop (a failed query, an exporter that is
    down), or that fired but have not yet lasted their `for:`. Evidence that did arrive still
    counts (a Prometheus XID 79 cordons while Loki is failing), but a node with any unknown signal
    is never counted healthy."""

    @property
    def quiet(self) -> bool:
        """No evidence and nothing unknown: healthy as far as this observation goes (most nodes)."""
        return not self.evidence and not self.unknown_signals and not self.unknown

    @property
    def state(self) -> State:
        if self.unknown:
            return "unknown"
        if self.cordon_signals():
            return "faulty"
        if self.unknown_signals:
            return "unknown"
        if self.evidence:
            return "warn"
        return "healthy"

    def cordon_signals(self) -> tuple[str, ...]:
        """Signals that justify a cordon: cordon-class ones, and corroborate-class ones only when
        one of their class's corroborating signals fired on the same GPU (or on an unattributed
        one: kernel-log lines carry no GPU index)."""
        if not self.evidence:  # most nodes, every loop
            return ()
        return self._cordon_signals

    @functools.cached_property
    def _cordon_signals(self) -> tuple[str, ...]:
        """Worked out once per Observation (`state` and the decision ask for it again and again)."""
        out = {e.signal for e in self.evidence if e.action == "cordon"}
        for e in self.evidence:
            if e.action == "corroborate":
                confirm = corroborators(e.signal)
                if any(o.signal in confirm and (o.gpu == e.gpu or not o.gpu or not e.gpu) for o in self.evidence):
                    out.add(e.signal)
        return tuple(sorted(out))


@dataclass(frozen=True)
class NodeState:
    """The parts of a Node the reconciler reads."""

    name: str
    pool: str
    unschedulable: bool = False
    owned: bool = False
    reason: str = ""
    since: float | None = None
    healthy_checks: int = 0
    history: tuple[float, ...] = ()
    human_released: str = ""
    needs_repair: bool = False
    gpus: int = 0
    """The Node's nvidia.com/gpu capacity (0: not advertised)."""
    boot_id: str = ""
    """status.nodeInfo.bootID now."""
    cordon_boot_id: str = ""
    """bootID when we cordoned it (annotation)."""
    condition: NodeCondition | None = None
    """Our `GPUHealthy` condition as the Node carries it now (None: never set)."""
    drained: bool = False
    """Our cordon's pods were all evicted (annotation)."""


@dataclass(frozen=True)
class Policy:
    """Safety limits (from the cluster's `health:` block)."""

    healthy_checks_to_release: int = 3
    cooldown_seconds: float = 900.0
    flap_count: int = 3
    flap_window_seconds: float = 86_400.0
    max_unhealthy_percent: float = 50.0
    dry_run: bool = False
    drain: bool = False
    """Evict the pods of nodes we cordoned (the cluster file's `health.drain.enabled`)."""
    drain_max_percent: float = 10.0
    """Drain breaker: most nodes of a pool being drained at once, as a share of the pool."""
    cordons_per_loop: int = 5
    """Most new cordons per pool in one loop; the rest wait for the next loops (a forged flood of
    faults takes the pool down slowly, visibly, and only up to the breaker)."""


@dataclass(frozen=True)
class Breaker:
    """One pool's circuit breaker: once tripped, nothing in that pool is cordoned or released until
    a human resets it. Other pools carry on."""

    tripped: bool = False
    reason: str = ""
    since: float | None = None


ALL_POOLS = "*"
"""Key of a breaker that holds every pool (a state saved before breakers were per pool)."""

Breakers = Mapping[str, Breaker]
"""Pool name -> its breaker; a pool that is absent has never tripped."""


DRAIN = "drain:"
"""Prefix of a pool's drain-breaker key (`drain:h100`): pool names are DNS labels, never with ':'."""


def breaker_of(breakers: Breakers, pool: str) -> Breaker:
    """The cordon breaker that governs `pool`."""
    return breakers.get(pool) or breakers.get(ALL_POOLS) or Breaker()


def drain_breaker_of(breakers: Breakers, pool: str) -> Breaker:
    """The drain breaker of `pool`: it stops evictions there, and nothing else."""
    return breakers.get(DRAIN + pool) or Breaker()


@dataclass(frozen=True)
class Cordon:
    node: str
    reason: str
    evidence: tuple[Evidence, ...]
    history: tuple[float, ...]
    repair: bool


@dataclass(frozen=True)
class Release:
    node: str


@dataclass(frozen=True)
class SetHealthyChecks:
    node: str
    count: int


@dataclass(frozen=True)
class NoteHumanRelease:
    """A human uncordoned a node we held: drop our ownership, remember the reason."""

    node: str
    reason: str


@dataclass(frozen=True)
class ClearHumanRelease:
    node: str


@dataclass(frozen=True)
class Drain:
    """Evict the pods of a node we cordoned (through the eviction API, so PodDisruptionBudgets
    hold); DaemonSet and mirror pods stay, as with `kubectl drain`."""

    node: str


@dataclass(frozen=True)
class SetCondition:
    """Write our `GPUHealthy` condition on the Node's status."""

    node: str
    condition: NodeCondition
    transition: bool = True
    """The status changes (lastTransitionTime is set); False when only reason or message do."""


@dataclass(frozen=True)
class Event:
    node: str
    kind: Literal["Normal", "Warning"]
    reason: str
    message: str


NodeAction = (Cordon | Release | SetHealthyChecks | NoteHumanRelease | ClearHumanRelease | Drain | SetCondition
              | Event)


Changed = AbstractSet[str] | None
"""The nodes whose Observation (or NodeState) may differ from the last loop's; None when any may."""
Pending = Mapping[str, Mapping[tuple[str, str], float]]
"""Node -> (signal, GPU) -> when it was first seen firing, for signals with a `for:`."""


@dataclass(frozen=True)
class Decision:
    """What one loop decided: actions to carry out (none in dry run) and the breakers after it."""

    actions: tuple[NodeAction, ...]
    breakers: Breakers
    """Every pool's breaker after this loop (tripped ones only; the rest are ok)."""
    skipped: tuple[str, ...] = field(default=())
    """Why something that would have been done was not (breaker, unknown, human, foreign cordon)."""
    pending: Pending = field(default_factory=dict)
    """Signals seen firing but not yet for their `for:`, with when they were first seen: the next
    loop's input (held in memory; a new leader starts counting again, the safe direction)."""
    calm: frozenset[str] = field(default=frozenset())
    """Nodes healthy with nothing of ours on them and nothing to write (most nodes): while neither
    their Observation nor their Node changes, the next loop has nothing to do for them either."""
