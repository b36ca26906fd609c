"""What `fleetgen health status` and `health once` say: each pool, its breakers, the nodes held.

Read from the cluster as it is (nodes, the breaker ConfigMap), not from the reconciler's memory,
so an operator sees what a restarted replica would see.
"""

from __future__ import annotations

import datetime

from generator.reconciler.decide import breaker_limit
from generator.reconciler.loop import Reconciler
from generator.reconciler.model import Decision, breaker_of, drain_breaker_of


def utc(seconds: float | None) -> str:
    """A breaker's epoch seconds as RFC 3339 UTC ("?" when the ConfigMap does not say)."""
    if seconds is None:
        return "?"
    return datetime.datetime.fromtimestamp(float(seconds), tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_lines(rec: Reconciler) -> list[str]:
    """The breaker summary, a line per pool (and its drain breaker when drain is on), then every node
    the reconciler holds cordoned, with its reason and healthy checks since."""
    nodes = rec.executor.read(rec.pools)
    held = [n for n in nodes.values() if n.owned and n.unschedulable]
    breakers = rec.breaker.load()
    tripped = sorted(pool for pool in {p.name for p in rec.pools} | {k for k in breakers if ":" not in k}
                     if breaker_of(breakers, pool).tripped)
    out = ["breaker: " + (f"TRIPPED in {', '.join(tripped)}" if tripped else "ok")]
    for pool in rec.pools:
        members = [n for n in nodes.values() if n.pool == pool.name]
        down = sum(n.unschedulable for n in members)
        ours = sum(n.unschedulable and n.owned for n in members)
        state = breaker_of(breakers, pool.name)
        limit = breaker_limit(len(members), rec.policy.max_unhealthy_percent) if members else 0
        verdict = f"TRIPPED since {utc(state.since)}: {state.reason}" if state.tripped else "ok"
        out.append(f"pool {pool.name}: {down} of {len(members)} nodes unschedulable ({ours} by the reconciler), "
                   f"limit {limit}; breaker {verdict}")
        if rec.policy.drain:
            draining = sum(n.owned and n.unschedulable and not n.drained for n in members)
            drain_state = drain_breaker_of(breakers, pool.name)
            verdict = (f"TRIPPED since {utc(drain_state.since)}: {drain_state.reason}" if drain_state.tripped
                       else "ok")
            out.append(f"  drain: {draining} node(s) draining, limit "
                       f"{breaker_limit(len(members), rec.policy.drain_max_percent) if members else 0}; "
                       f"drain breaker {verdict}")
    out.append(f"{len(held)} of {len(nodes)} GPU nodes cordoned by the reconciler")
    for node in sorted(held, key=lambda n: n.name):
        repair = " (needs repair)" if node.needs_repair else ""
        drained = ", drained" if node.drained else ""
        out.append(f"  {node.name} [{node.pool}]: {node.reason}, {node.healthy_checks} healthy checks{drained}"
                   f"{repair}")
    return out + unreadable_lines(rec.executor.unreadable)


def unreadable_lines(unreadable: dict[str, str]) -> list[str]:
    """The Nodes the read skipped (a field of the wrong type), each with the field: nothing is done
    to them until they read again."""
    if not unreadable:
        return []
    return [f"{len(unreadable)} Node(s) unreadable, health unknown, nothing done to them:",
            *(f"  {name}: {why}" for name, why in sorted(unreadable.items()))]


def decision_lines(decision: Decision, dry_run: bool) -> list[str]:
    """One loop's decision: each action ("would" in a dry run), what was skipped and why, breakers."""
    out = [f"{'would ' if dry_run else ''}{type(action).__name__}: {action}" for action in decision.actions]
    out += [f"skipped: {line}" for line in decision.skipped]
    tripped = {pool: b for pool, b in sorted(decision.breakers.items()) if b.tripped}
    out.append("breaker: " + ("; ".join(f"TRIPPED in {pool} ({b.reason})" for pool, b in tripped.items()) or "ok"))
    return out
