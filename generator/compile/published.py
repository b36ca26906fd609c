"""The fleet files a cluster was rendered from, published on it for the job SDK.

A notebook has no checkout of the fleet repository, yet defining a job takes the team's pools,
priorities and quota shares, and checking it takes the same rules `fleetgen render` applies. So each
cluster carries its own cluster file and the files of the teams with a quota in it (their quotas and
profiles for this cluster only), as parsed data (canonical JSON), in the ConfigMap
`kube-public/fleetgen-fleet`: readable by those teams' members
(a Role and RoleBinding beside it), by nobody else, and changed only when one of those files is.

A MultiKueue manager's pools are its workers' (config/fleet.py `with_worker_pools`): they are
published beside its file as `pools.<cluster>.json`, as render merged them.
"""

from __future__ import annotations

import json
from typing import Any

from generator.compile.manifest import Manifest, labels
from generator.compile.tenancy import RBAC
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig

NAMESPACE = "kube-public"
"""Present on every cluster (the API server creates it) and meant for what a cluster tells its users."""
NAME = "fleetgen-fleet"
READER = "fleetgen-fleet-reader"
EVERYONE = "system:authenticated"
FOLDER = ("teams",)
PART_BYTES = 512 * 1024
"""Data per ConfigMap: half the API server's limit, so one more team never pushes a part over it.
10,000 teams in one cluster (tests/test_scale.py) publish about 2 MiB: five parts."""
INDEX_KEY = "parts.json"
"""In the first part, when there are more: the names of the others."""
MAX_PARTS = 64
"""Parts the SDK reads at most (32 MiB of files, about 150,000 teams in one cluster); render refuses
more (generator/validate/limits.py), so a hostile index cannot make the SDK read without end."""


def data_key(kind: str, name: str) -> str:
    """The ConfigMap key of one file: `cluster.<name>.json`, `team.<name>.json` or `pools.<name>.json`."""
    return f"{kind}.{name}.json"


def canonical(data: Any) -> str:
    """One text for one value on any machine: sorted keys, UTF-8 kept, a line per value (so a change
    to one quota is one changed line in a diff preview, not a new 5,000-character line)."""
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def team_data(data: dict[str, Any], cluster: str) -> dict[str, Any]:
    """A team file as this cluster needs it: its quotas and job profiles here, the rest as written.
    A change to the team's quota in another cluster then changes nothing in this one. Its members
    are left out: who they are is not needed to define a job."""
    out = {k: v for k, v in data.items() if k != "members"}
    out["quotas"] = {k: v for k, v in (data.get("quotas") or {}).items() if k == cluster}
    if "jobProfiles" in data:
        out["jobProfiles"] = [p for p in data["jobProfiles"] or []
                              if isinstance(p, dict) and p.get("cluster") == cluster]
    return out


def published_data(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> dict[str, str]:
    """The ConfigMap's data: each file as it was read, and a manager's merged pools."""
    cfg = cluster.config
    out = {data_key("cluster", cfg.name): canonical(cluster.source.data)}
    if cfg.multikueue is not None:
        out[data_key("pools", cfg.name)] = canonical(
            [p.model_dump(mode="json", by_alias=True, exclude_defaults=True) for p in cfg.node_pools])
    for team in teams:
        out[data_key("team", team.config.name)] = canonical(team_data(team.source.data, cfg.name))
    return dict(sorted(out.items()))


def parts(data: dict[str, str]) -> list[dict[str, str]]:
    """The data split over ConfigMaps of at most PART_BYTES each (the API server holds one to 1 MiB):
    the cluster's files first, then the teams' in name order, a new part when the next does not fit.
    The first part lists the others under INDEX_KEY."""
    out: list[dict[str, str]] = [{}]
    size = 0
    for key, value in data.items():  # cluster and pools keys sort before team keys
        grows = len(key) + len(value.encode())
        if out[-1] and key.startswith("team.") and size + grows > PART_BYTES:
            out.append({})
            size = 0
        out[-1][key] = value
        size += grows
    if len(out) > 1:
        out[0][INDEX_KEY] = canonical(part_names(len(out))[1:])
    return out


def part_names(count: int) -> list[str]:
    """`fleetgen-fleet`, then `fleetgen-fleet-1`, `fleetgen-fleet-2`, ..."""
    return [NAME, *(f"{NAME}-{i}" for i in range(1, count))]


def compile_published(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The ConfigMaps, and read access to them (those objects only) for every authenticated user."""
    cfg = cluster.config
    if not cfg.tenancy.publish_fleet:
        return []
    meta = {"namespace": NAMESPACE, "labels": labels(cfg.name)}
    where = cluster.at("tenancy", "publishFleet")
    split = parts(published_data(cluster, teams))
    names = part_names(len(split))
    return [
        *(Manifest(FOLDER, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta},
                            "data": part}, where) for name, part in zip(names, split, strict=True)),
        Manifest(FOLDER, {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": READER, **meta},
                          "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": names,
                                     "verbs": ["get"]}]}, where),
        Manifest(FOLDER, {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding", "metadata": {"name": READER, **meta},
                          "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": READER},
                          "subjects": [{"kind": "Group", "apiGroup": RBAC, "name": EVERYONE}]}, where),
    ]
