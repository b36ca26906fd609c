"""`fleetgen explain`: plain-text tables of quotas and pool allocation."""

from __future__ import annotations

from generator.capacity import pool_capacities
from generator.config.fleet import Fleet


def table(header: list[str], rows: list[list[str]]) -> str:
    """A left-aligned text table (numbers right-aligned)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if c[:1].isdigit() or c[:1] == "-" and c[1:2].isdigit() else c.ljust(w)
                         for c, w in zip(cells, widths, strict=True)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def explain_team(fleet: Fleet, name: str) -> str:
    """Guaranteed, borrowable and lendable GPUs of one team per cluster and pool."""
    team = fleet.teams[name].config
    rows = []
    for pool in pool_capacities(fleet):
        share = next((t for t in pool.teams if t.team == name), None)
        if share is None:
            continue
        limit = "no limit" if share.borrowing_limit is None else str(share.borrowing_limit)
        rows.append([pool.cluster, pool.pool, str(share.guaranteed), f"{share.borrowable} ({limit})",
                     str(share.lendable), f"{pool.allocated}/{pool.gpus}", f"{pool.utilisation:.0%}"])
    head = (f"team {name}: namespaces {', '.join(team.namespace_names)}; cohort {team.cohort or '(root)'}; "
            f"default priority {team.default_priority or '(none)'}")
    stops = {"Hold": "stopped (Hold: admits nothing new, admitted jobs finish)",
             "HoldAndDrain": "stopped (HoldAndDrain: admitted jobs evicted, nothing admitted)"}
    head += "".join(f"\nin {cluster}: queue {stops[policy]}" for cluster, policy in sorted(team.stop_policy.items())
                    if policy in stops)
    if not rows:
        return head + "\nno GPU quota in any cluster"
    return head + "\n\n" + table(["cluster", "pool", "guaranteed", "borrowable (limit)", "lendable",
                                  "pool allocated", "pool used"], rows)


def explain_cluster(fleet: Fleet, name: str) -> str:
    """Each pool's capacity, allocation and the teams that hold it."""
    cfg = fleet.clusters[name].config
    parts = [f"cluster {name}: Kubernetes {cfg.kubernetes_version}, Kueue {cfg.kueue.version}, "
             f"overcommit {cfg.overcommit:g}"]
    for pool in (p for p in pool_capacities(fleet) if p.cluster == name):
        rows = [[t.team, str(t.guaranteed), str(t.borrowable), str(t.lendable)] for t in pool.teams]
        parts.append(f"\npool {pool.pool} ({pool.product}): {pool.gpus} GPUs, quota limit {pool.limit}, "
                     f"allocated {pool.allocated} ({pool.utilisation:.0%}), free {pool.limit - pool.allocated}"
                     + (f", {pool.shared} lent by the root cohort" if pool.shared
                        else ", held by no quota (kueue.shareUnallocated: false)"
                        if pool.gpus > pool.allocated else ""))
        if pool.cohorts:
            parts.append("held by cohorts for their teams: " + ", ".join(f"{c.cohort} {c.gpus}" for c in pool.cohorts))
        parts.append(table(["team", "guaranteed", "borrowable", "lendable"], rows) if rows else "no team quotas")
    return "\n".join(parts)
