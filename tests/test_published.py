"""The fleet files each cluster publishes, and jobs defined in Python from them (fast tier; the
real API server's RBAC and Kueue's admission of such jobs are in tests/test_jobs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.checks import load_fleet
from generator.checks.fleet import profile_problems
from generator.compile.manifest import Manifest
from generator.compile.published import NAME, NAMESPACE, published_data
from generator.connection import Connection, explain, word
from generator.jobs import ClusterError, ConfigurationError, Job
from generator.jobs.published import fleet_from_data
from generator.validate.limits import MAX_DATA_BYTES, validate_limits
from tests.conftest import REPO, add_tenancy

FLEET = load_fleet(REPO)


def rendered(cluster: str, kind: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "rendered" / cluster / "teams" / f"{kind}-{name}.yaml").read_text())


@pytest.mark.parametrize("cluster", sorted(FLEET.clusters))
def test_each_cluster_publishes_its_file_and_its_teams_files(cluster: str) -> None:
    body = rendered(cluster, "configmap", NAME)
    assert body["metadata"]["namespace"] == NAMESPACE
    data = body["data"]
    teams = {t.config.name for t in FLEET.teams_in(cluster)}
    assert {k for k in data if k.startswith("team.")} == {f"team.{t}.json" for t in teams}
    assert json.loads(data[f"cluster.{cluster}.json"]) == FLEET.clusters[cluster].source.data
    for team in teams:
        published = json.loads(data[f"team.{team}.json"])
        written = FLEET.teams[team].source.data
        assert published["quotas"] == {cluster: written["quotas"][cluster]}
        assert published.get("jobProfiles") == ([p for p in written["jobProfiles"] if p["cluster"] == cluster]
                                                if "jobProfiles" in written else None)
        assert {k: v for k, v in published.items() if k not in ("quotas", "jobProfiles")} == \
            {k: v for k, v in written.items() if k not in ("quotas", "jobProfiles", "members")}
    # Read back, it is the same cluster (a manager with its workers' pools) and the same teams.
    back = fleet_from_data(data)
    assert back.clusters[cluster].config.model_dump() == FLEET.clusters[cluster].config.model_dump()
    assert {n: t.config.quotas[cluster] for n, t in back.teams.items()} == \
        {t: FLEET.teams[t].config.quotas[cluster] for t in teams}
    # Every authenticated user may read it, and only it: no team file names who.
    role = rendered(cluster, "role", "fleetgen-fleet-reader")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NAME],
                              "verbs": ["get"]}]
    binding = rendered(cluster, "rolebinding", "fleetgen-fleet-reader")
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [("Group", "system:authenticated")]


def test_a_cluster_may_publish_nothing(tmp_path: Path) -> None:
    import shutil

    from generator.compile import compile_cluster

    for name in ("teams", "clusters"):
        shutil.copytree(REPO / name, tmp_path / name)
    add_tenancy(tmp_path, "dev", "  publishFleet: false\n")
    fleet = load_fleet(tmp_path)
    assert not [m for m in compile_cluster(fleet, "dev") if m.kubernetes and m.namespace == NAMESPACE]
    assert [m.name for m in compile_cluster(fleet, "prod-west") if m.kubernetes and m.namespace == NAMESPACE] == [
        NAME, "fleetgen-fleet-reader", "fleetgen-fleet-reader"]


def test_the_same_rules_judge_a_profile_from_the_published_files() -> None:
    data = published_data(FLEET.clusters["prod-west"], FLEET.teams_in("prod-west"))
    back = fleet_from_data(data)
    team = FLEET.teams["ml-research"].config
    for profile in (p for p in team.job_profiles if p.cluster == "prod-west"):
        big = profile.model_copy(update={"nodes": 64})
        assert profile_problems(back, team, big) == profile_problems(FLEET, team, big)
        assert profile_problems(back, team, big), "64 A100 nodes are beyond ml-research's share"


@pytest.mark.parametrize(("change", "said"), [
    ({"team.x_y.json": "{}"}, "team.x_y.json: not a file fleetgen publishes"),
    ({"team.ml-research.json": "{not json"}, "team.ml-research.json: not JSON"),
    ({"team.ml-research.json": json.dumps({"name": "vision"})}, "team.ml-research.json:"),
    ({"cluster.prod-west.json": json.dumps({"name": "prod-west", "nodePools": "many"})}, "cluster.prod-west.json:"),
    ({"cluster.dev.json": json.dumps({"name": "dev"})}, "holds 2 cluster files"),
    ({"team.ml-research.json": "x" * (2 << 20)}, "more than the 1048576 allowed"),
    ({"team.ml-research.json": "[" * 100_000 + "]" * 100_000}, "team.ml-research.json: nesting deeper than 32"),
    ({"team.ml-research.json": '{"name": "ml-research", "name": "vision"}'}, "duplicate key 'name'"),
    ({"cluster.prod-west.json": '{"name": NaN}'}, "cluster.prod-west.json: NaN is not a JSON number"),
])
def test_a_hostile_published_file_is_named_never_a_traceback(change: dict[str, str], said: str) -> None:
    data = {**published_data(FLEET.clusters["prod-west"], FLEET.teams_in("prod-west")), **change}
    with pytest.raises(ClusterError, match="are not valid") as caught:
        fleet_from_data(data)
    assert said in str(caught.value)


def test_a_deep_parts_index_is_named_never_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from generator.compile.published import INDEX_KEY
    from generator.jobs import published as reader

    stored = {**published_data(FLEET.clusters["prod-west"], FLEET.teams_in("prod-west")),
              INDEX_KEY: "[" * 100_000 + "]" * 100_000}
    monkeypatch.setattr(reader, "_read", lambda api, name: dict(stored))
    with pytest.raises(ClusterError, match="parts.json: not a list of fleetgen-fleet-N names"):
        reader.published_fleet(object())


def with_namespaces(team: str, namespaces: list[str], cluster: str = "prod-west") -> dict[str, str]:
    """prod-west's published files, `team` claiming `namespaces` there."""
    data = published_data(FLEET.clusters[cluster], FLEET.teams_in(cluster))
    key = f"team.{team}.json"
    return {**data, key: json.dumps({**json.loads(data[key]), "namespaces": namespaces})}


@pytest.mark.parametrize(("namespaces", "said"), [
    (["kube-system"], "namespaces[0]: namespace 'kube-system' is reserved for the platform"),
    (["kueue-system"], "namespaces[0]: namespace 'kueue-system' belongs to the platform: platform (HelmRelease kueue)"),
    (["ml-research-x", "vision"], "namespaces[1]: namespace 'vision' already belongs to team 'vision'"),
    (["ml-research", "ml-research"], "namespaces[1]: namespace 'ml-research' is listed twice"),
    (["recsys-batch"], "namespaces[0]: namespace 'recsys-batch' is not one team 'ml-research' may claim in "
                       "cluster 'prod-west'"),
])
def test_published_files_must_keep_each_teams_namespaces_its_own(namespaces: list[str], said: str) -> None:
    """The cross-file checks `render` runs judge the published files again: what the ConfigMap holds
    now may not be what was rendered, and a job made from it goes to the team's first namespace."""
    with pytest.raises(ClusterError, match="are not valid") as caught:
        fleet_from_data(with_namespaces("ml-research", namespaces))
    assert f"team.ml-research.json: {said}" in str(caught.value), str(caught.value)
    assert "a platform engineer should render and sync the cluster again" in str(caught.value)


@pytest.mark.parametrize("cluster", sorted(FLEET.clusters))
def test_every_clusters_published_files_pass_the_checks_of_one_cluster(cluster: str) -> None:
    """The checks that need other clusters (a MultiKueue manager's workers) are left out: a cluster
    publishes itself only, and the manager hub's files, which they would refuse, are read back whole."""
    from generator.checks.fleet import check_fleet, check_one_cluster

    back = fleet_from_data(published_data(FLEET.clusters[cluster], FLEET.teams_in(cluster)))
    assert sorted(back.teams) == sorted(t.config.name for t in FLEET.teams_in(cluster))
    assert check_one_cluster(back) == []
    assert bool(check_fleet(back)) == (back.clusters[cluster].config.multikueue is not None)


def test_a_configmap_the_api_server_would_refuse_is_a_finding() -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": {"team.a.json": "x" * MAX_DATA_BYTES}}
    findings = validate_limits([Manifest(("teams",), body, ("clusters/prod-west.yaml", 3))])
    assert [(f.file, f.line) for f in findings] == [("clusters/prod-west.yaml", 3)]
    assert "the API server refuses more than 1048576" in findings[0].message
    body["data"] = {"team.a.json": "x" * 1000}
    assert validate_limits([Manifest(("teams",), body, ("clusters/prod-west.yaml", 3))]) == []


def test_more_parts_than_the_sdk_reads_is_a_finding() -> None:
    """Render refuses a cluster whose fleet files need more ConfigMaps than the SDK reads (MAX_PARTS)."""
    from generator.compile.published import MAX_PARTS, part_names

    def made(count: int) -> list[Manifest]:
        return [Manifest(("teams",), {"apiVersion": "v1", "kind": "ConfigMap", "data": {},
                                      "metadata": {"name": name, "namespace": NAMESPACE}},
                         ("clusters/prod-west.yaml", 3)) for name in part_names(count)]

    assert validate_limits(made(MAX_PARTS)) == []
    [finding] = validate_limits(made(MAX_PARTS + 1))
    assert (finding.file, finding.line) == ("clusters/prod-west.yaml", 3)
    assert f"published in {MAX_PARTS + 1} ConfigMaps; the job SDK reads at most {MAX_PARTS}" in finding.message


def test_define_builds_what_the_profile_would() -> None:
    """A job written in Python with a profile's values is that profile's JobSet, name aside."""
    profile = next(p for p in FLEET.teams["ml-research"].config.job_profiles if p.name == "pretrain-4node")
    from_file = Job.from_profile("ml-research", "pretrain-4node", root=REPO, name="same")
    env = {e.name: e.value for e in profile.env}
    defined = Job.define("ml-research", "same", profile.image, list(profile.command), nodes=profile.nodes,
                         pool=profile.pool, cluster=profile.cluster, args=list(profile.args), env=env,
                         priority=profile.priority, max_restarts=profile.max_restarts,
                         shared_memory=profile.shared_memory, max_execution_time=profile.max_execution_time,
                         termination_grace_period_seconds=profile.termination_grace_period_seconds, root=REPO)
    a, b = from_file.body, defined.body
    a["metadata"]["labels"].pop("fleetgen.io/profile"), b["metadata"]["labels"].pop("fleetgen.io/profile")
    assert profile.topology is None and profile.leader is None and a == b


WEST = {"pool": "a100", "cluster": "prod-west"}


@pytest.mark.parametrize(("team", "kwargs", "said"), [
    ("ml-research", {"gpus_per_node": 9, **WEST}, "gpus_per_node: 9 GPUs per pod, but nodes of pool 'a100' have 8"),
    ("ml-research", {"nodes": 64, **WEST}, "nodes: the job needs 512 GPUs but team 'ml-research'"),
    ("ml-research", {"pool": "h100", "cluster": "prod-west"}, "pool: team 'ml-research' has no quota in pool 'h100'"),
    ("ml-research", {"priority": "urgent", **WEST}, "priority: priority 'urgent' is not defined"),
    ("ml-research", {"nodes": 0, **WEST}, "nodes: Input should be greater than or equal to 1"),
    ("ml-research", {"env": {"NODE_RANK": "3"}, **WEST}, "env[0].name: NODE_RANK is set by fleetgen"),
    ("ml-research", {"pool": "a100"}, "cluster= is needed: team 'ml-research' has quotas in"),
    ("inference", {}, "pool= is needed: team 'inference' has quotas in pools a100, l40s of prod-west"),
])
def test_define_refuses_in_python_terms(team: str, kwargs: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Job.define(team, "mine", "ghcr.io/acme/x:1", ["python", "train.py"], root=REPO, **kwargs)
    assert said in str(caught.value), str(caught.value)


def test_define_from_the_published_files_without_a_checkout(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    data = published_data(FLEET.clusters["prod-west"], FLEET.teams_in("prod-west"))
    monkeypatch.setattr("generator.jobs.published.published_fleet", lambda api: fleet_from_data(data))
    monkeypatch.chdir(tmp_path)  # no fleet here: only the cluster's files can answer
    job = Job.define("ml-research", "mine", "ghcr.io/acme/x:1", ["python", "train.py"], nodes=2, pool="a100",
                     api=object())
    assert job.root is None and job.fleet is not None and job.profile is not None
    assert job.body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    assert Job.from_profile("ml-research", "pretrain-4node", api=object()).body["spec"]["replicatedJobs"]
    with pytest.raises(Exception, match="unknown team 'llm-pretrain' with a quota on this cluster"):
        Job.define("llm-pretrain", "x", "ghcr.io/acme/x:1", ["python"], api=object())


def test_advice_names_arguments_in_python_and_flags_on_the_command_line() -> None:
    from kubernetes.client.exceptions import ApiException

    gone = ApiException(status=409, reason="Conflict")
    assert "choose another name=, or cancel() the old one first" in str(explain(gone, "h", "submit"))
    assert "choose another --name" in str(explain(gone, "h", "submit", flags=True))
    assert word(True, "--x", "x=") == "--x" and word(object(), "--x", "x=") == "x="


def test_a_log_stream_that_fails_midway_is_a_cluster_error() -> None:
    """Failures of a generator (a log stream) arrive while it is iterated, after the call returned."""
    from types import SimpleNamespace

    from kubernetes.client.exceptions import ApiException

    from generator.connection import guarded

    class Streams:
        api = Connection(SimpleNamespace(configuration=SimpleNamespace(host="https://h")))

        @guarded("read the logs of job x")
        def logs(self) -> Any:
            yield "first"
            raise ApiException(status=400, reason="unsupported log format")

    lines = Streams().logs()
    assert next(lines) == "first"
    with pytest.raises(ClusterError, match="read the logs of job x failed: 400"):
        next(lines)


def test_connect_reads_kubeconfig_when_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client reads $KUBECONFIG once, at import; a notebook sets it later."""
    from generator.jobs import connect

    config = {"apiVersion": "v1", "kind": "Config", "current-context": "prod-east",
              "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "prod-east", "context": {"cluster": "c", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    assert connect(context="prod-east").client.configuration.host == "https://10.0.0.1:6443"


def test_queue_usage_reads_kueues_status_defensively() -> None:
    from generator.jobs.queues import QueueInfo, _gpus

    queue = {"status": {"flavorsUsage": [
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "16"}, {"name": "cpu", "total": "10"}]},
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "not-a-number"}]},
        "garbage", {"name": "l40s", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]}}
    assert _gpus(queue, "a100", "nvidia.com/gpu") == 16 and _gpus({}, "a100", "nvidia.com/gpu") == 0
    info = QueueInfo("ml-research", ("ml-research",), "ml-research", "prod-west", "a100", "A100", 16, 16, 20)
    assert (info.free, info.free_at_most) == (0, 12)
    assert str(info).endswith("16 guaranteed + 16 borrowable; 20 in use, 0 free, up to 12 if the cohort is idle")
    unknown = QueueInfo("t", ("t",), "t", "c", "p", "P", 8, 0, None)
    assert unknown.free is None and str(unknown).endswith("8 guaranteed + 0 borrowable; in use unknown")


def test_a_large_fleet_is_published_in_parts_and_read_back_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 teams publish about 2 MiB, twice what one ConfigMap may hold: parts of at most 512 KiB,
    the first listing the others, all readable by the one Role, merged back by the SDK."""
    from generator.compile import published
    from generator.jobs import published as reader

    data = published_data(FLEET.clusters["prod-west"], FLEET.teams_in("prod-west"))
    monkeypatch.setattr(published, "PART_BYTES", 600)  # the example's five teams then need parts
    split = published.parts(data)
    names = published.part_names(len(split))
    assert len(split) > 2 and names[1:] == [f"fleetgen-fleet-{i}" for i in range(1, len(split))]
    assert json.loads(split[0].pop(published.INDEX_KEY)) == names[1:]
    assert {k: v for part in split for k, v in part.items()} == data
    assert all(k.startswith(("cluster.", "pools.")) for k in split[0]) or len(split[0]) > 1
    stored = dict(zip(names, split, strict=True))
    stored[NAME] = {**stored[NAME], published.INDEX_KEY: json.dumps(names[1:])}
    monkeypatch.setattr(reader, "_read", lambda api, name: dict(stored[name]))
    assert sorted(reader.published_fleet(object()).teams) == sorted(t.config.name for t in FLEET.teams_in("prod-west"))
    stored[NAME][published.INDEX_KEY] = json.dumps(["kube-root-ca.crt"])  # only parts may be named
    with pytest.raises(ClusterError, match="parts.json: not a list of fleetgen-fleet-N names"):
        reader.published_fleet(object())
    stored[NAME][published.INDEX_KEY] = json.dumps(names[1:] + names[1:2])
    with pytest.raises(ClusterError, match="repeats a file of another part"):
        reader.published_fleet(object())
