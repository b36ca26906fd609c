"""The fleet files a cluster publishes (compile/published.py), read back for a notebook without a checkout.

The ConfigMap is an API server's answer, so it is hostile until checked: every key must name one
file, every value must parse within the input reader's limits (config/yamlsource.py `parse_json`)
and pass the same model validation `fleetgen render` applies, and a file's name must match its key.
What comes back is a Fleet of this one cluster and its teams: enough for a team's profiles, pools,
priorities and quota shares, and for the per-job rules (`checks.fleet.profile_problems`). The
cross-file checks `render` runs (checks/fleet.py) run on it again: they ran on the fleet the cluster
was rendered from, not on what anyone may have written into the ConfigMap since, and they are what
keeps a team's namespaces its own (not reserved, not the platform's, not another team's), so a job
made from them goes only to a namespace of the team it was made for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from generator.checks.fleet import check_one_cluster
from generator.compile.published import INDEX_KEY, MAX_PARTS, NAME, NAMESPACE
from generator.config.cluster import ClusterConfig, NodePool
from generator.config.fleet import Fleet, Loaded
from generator.config.team import TeamConfig
from generator.config.yamlsource import Source, parse_json
from generator.connection import ClusterError, Connection, explain, flags_of, timeout, word
from generator.errors import Finding, InputError

KEY = re.compile(r"^(cluster|team|pools)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.json$")
WHERE = f"ConfigMap {NAMESPACE}/{NAME}"
PART = re.compile(rf"^{NAME}-[1-9][0-9]{{0,2}}$")


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:5])


def _said(finding: Finding) -> str:
    """A finding of the cross-file checks on a published file, as one clause naming key and field."""
    file = finding.file.removeprefix(f"{WHERE}: ")
    return f"{file}: {finding.field + ': ' if finding.field else ''}{finding.message} ({finding.hint})"


def fleet_from_data(data: dict[str, Any]) -> Fleet:
    """The Fleet in a published ConfigMap's `data`; ClusterError naming each bad key and why."""
    files: dict[str, dict[str, Any]] = {"cluster": {}, "team": {}, "pools": {}}
    problems = []
    for key, text in sorted(data.items()):
        match = KEY.match(str(key))
        if match is None or not isinstance(text, str):
            problems.append(f"{key}: not a file fleetgen publishes")
            continue
        try:
            files[match.group(1)][match.group(2)] = parse_json(text, key)
        except InputError as exc:
            problems.extend(_said(f) for f in exc.findings)
    if len(files["cluster"]) != 1:
        problems.append(f"holds {len(files['cluster'])} cluster files, not one")
    loaded: dict[str, dict[str, Loaded[Any]]] = {"cluster": {}, "team": {}}
    for kind, model in (("cluster", ClusterConfig), ("team", TeamConfig)):
        for name, value in files[kind].items():
            shown = f"{WHERE}: {kind}.{name}.json"
            try:
                config = model.model_validate(value, by_alias=True, by_name=False)
            except ValidationError as exc:
                problems.append(f"{kind}.{name}.json: {_problems(exc)}")
                continue
            if config.name != name:
                problems.append(f"{kind}.{name}.json: names {config.name!r}")
                continue
            loaded[kind][name] = Loaded(config, Source(shown, value, {}))
    for name, pools in files["pools"].items():
        cluster = loaded["cluster"].get(name)
        try:
            merged = [NodePool.model_validate(p, by_alias=True, by_name=False) for p in pools]
        except (ValidationError, TypeError) as exc:
            problems.append(f"pools.{name}.json: {_problems(exc) if isinstance(exc, ValidationError) else exc}")
            continue
        if cluster is not None:  # a MultiKueue manager's pools are its workers', merged at render time
            loaded["cluster"][name] = Loaded(cluster.config.model_copy(update={"node_pools": merged}),
                                             cluster.source)
    if not problems:
        (name, cluster), = loaded["cluster"].items()
        teams = {n: t for n, t in loaded["team"].items() if name in t.config.quotas}
        fleet = Fleet(Path(f"cluster:{name}"), {name: cluster}, teams)
        problems = [_said(f) for f in sorted(set(check_one_cluster(fleet)))]
    if problems:
        raise ClusterError(f"the fleet files published in {WHERE} are not valid ({'; '.join(problems)}): "
                           "a platform engineer should render and sync the cluster again")
    return fleet


def published_fleet(api: Connection) -> Fleet:
    """This cluster's fleet files, as published at render time; ClusterError if they cannot be read."""
    data = _read(api, NAME)
    index = data.pop(INDEX_KEY, None)
    if index is not None:
        try:
            names = parse_json(index, INDEX_KEY) if isinstance(index, str) else None
        except InputError:
            names = None
        if not (isinstance(names, list) and len(names) < MAX_PARTS
                and all(isinstance(n, str) and PART.match(n) for n in names)):
            raise ClusterError(f"the fleet files published in {WHERE} are not valid ({INDEX_KEY}: not a list of "
                               f"{NAME}-N names): a platform engineer should render and sync the cluster again")
        for name in names:
            more = _read(api, name)
            if set(more) & set(data):
                raise ClusterError(f"the fleet files published in {WHERE} are not valid ({name} repeats a file "
                                   "of another part): a platform engineer should render and sync the cluster again")
            data.update(more)
    return fleet_from_data(data)


def _read(api: Connection, name: str) -> dict[str, Any]:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    where = f"ConfigMap {NAMESPACE}/{name}"
    try:
        found = client.CoreV1Api(api.client).read_namespaced_config_map(name, NAMESPACE,
                                                                        _request_timeout=timeout(api))
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterError(f"this cluster publishes no fleet files ({where} is missing): it was not rendered by "
                               "this fleetgen version, or not synced yet; " + word(
                                   api, "run in a checkout of the fleet repository (--root DIR)",
                                   "pass root= a checkout of the fleet repository")) from None
        if exc.status == 403:
            raise ClusterError(f"you may not read {where}: every authenticated user may, unless the cluster "
                               "file sets tenancy.publishFleet: false") from None
        raise explain(exc, api.client.configuration.host, f"read {where}", flags_of(api)) from None
    except (HTTPError, OSError) as exc:
        raise explain(exc, api.client.configuration.host, f"read {where}", flags_of(api)) from None
    return dict(found.data or {})
