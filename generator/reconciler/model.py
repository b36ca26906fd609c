"""What the reconciler sees and what it may do: observations, node state, policy, actions.

Node state lives on the Node itself (annotations and a label), so the reconciler is stateless
between loops and any replica that wins the Lease can continue where another stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from generator.signals import HEALTH_TAINT_KEY, Action

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
LABEL_REPAIR = f"{PREFIX}/needs-repair"
TAINT_KEY = HEALTH_TAINT_KEY

State = Literal["healthy", "warn", "faulty", "unknown"]


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
    """A source covering this node was down, stale or partial: act on nothing."""
    gpus_reporting: int | None = None
    """GPUs the node's exporter reports (None: no source counts them). Compared with the Node's
    capacity, so a missing GPU is seen without kube-state-metrics."""

    @property
    def state(self) -> State:
        if self.unknown:
            return "unknown"
        if self.cordon_signals():
            return "faulty"
        if self.evidence:
            return "warn"
        return "healthy"

    def cordon_signals(self) -> tuple[str, ...]:
        """Signals that justify a cordon: cordon-class ones, and corroborate-class ones only when
        another signal fired on the same GPU."""
        out = {e.signal for e in self.evidence if e.action == "cordon"}
        for e in self.evidence:
            if e.action == "corroborate" and any(o is not e and o.gpu == e.gpu and o.action != "ignore"
                                                 for o in self.evidence):
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


@dataclass(frozen=True)
class Policy:
    """Safety limits (from the cluster's `health:` block)."""

    healthy_checks_to_release: int = 3
    cooldown_seconds: float = 900.0
    flap_count: int = 3
    flap_window_seconds: float = 86_400.0
    max_unhealthy_percent: float = 50.0
    dry_run: bool = False


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


def breaker_of(breakers: Breakers, pool: str) -> Breaker:
    """The breaker that governs `pool`."""
    return breakers.get(pool) or breakers.get(ALL_POOLS) or Breaker()


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
class Event:
    node: str
    kind: Literal["Normal", "Warning"]
    reason: str
    message: str


NodeAction = Cordon | Release | SetHealthyChecks | NoteHumanRelease | ClearHumanRelease | Event


@dataclass(frozen=True)
class Decision:
    """What one loop decided: actions to carry out (none in dry run) and the breakers after it."""

    actions: tuple[NodeAction, ...]
    breakers: Breakers
    """Every pool's breaker after this loop (tripped ones only; the rest are ok)."""
    skipped: tuple[str, ...] = field(default=())
    """Why something that would have been done was not (breaker, unknown, human, foreign cordon)."""
