"""The labels fleetgen puts on every object it writes, job templates included: who manages it, and
which cluster and team it belongs to. Below the compilers and the job kinds, which both label."""

from __future__ import annotations

MANAGED_BY = {"app.kubernetes.io/managed-by": "fleetgen"}
TEAM_LABEL = "fleetgen.io/team"
"""On every object of a team, its namespaces included, and on nothing of the platform."""


def labels(cluster: str, team: str | None = None) -> dict[str, str]:
    """Labels on every object: who manages it and which cluster (and team) it belongs to."""
    out = dict(MANAGED_BY)
    out["fleetgen.io/cluster"] = cluster
    if team is not None:
        out[TEAM_LABEL] = team
    return out
