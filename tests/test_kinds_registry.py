"""One test per job kind, over the registry (generator.kinds.KINDS): a kind that lacks one of its facts, or
whose facts disagree with what renders, fails here instead of in a copy of its own.

For every kind: its example profile renders to the committed golden template through its builder; every
field it refuses is refused at its line with its reason, as are a leader and the variables others set;
the SDK reads a canned status of its object; `--kind` offers it; the reference lists it; and the facts
config keeps below the registry (the operators' Kueue integrations) agree with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.checks import load_fleet
from generator.config.cluster import KUEUE_CHART_FRAMEWORKS
from generator.config.fleet import read_fleet
from generator.config.platform import Operators
from generator.jobs.shape import shape_problems
from generator.kinds import BY_OBJECT, KINDS, OPERATORS, companion_service, operator_kinds
from generator.kinds.base import Kind
from tests.conftest import REPO, edit, run

IDS = [k.name for k in KINDS]
VALUES = {"launcher": "none", "failFastExitCodes": "[3]", "masterPort": "29501", "maxRestarts": "2",
          "topology": "{mode: preferred, level: topology.kubernetes.io/zone}", "maxExecutionTime": "1h",
          "terminationGracePeriodSeconds": "20", "command": "[python, x.py]", "args": "[--x]",
          "leader": "{command: [python, lead.py]}"}
"""A value for each field some kind refuses (a kind refusing a field not here fails the refusal test)."""
CANNED: dict[str, tuple[dict[str, Any], tuple[str, str] | None, int, int]] = {
    # kind: (its object's status, what `ended` reads, `active`, `restarts`)
    "jobset": ({"conditions": [{"type": "Completed", "status": "True", "message": "all done"}],
                "replicatedJobsStatus": [{"active": 2}, {"active": 1}], "restarts": 1},
               ("succeeded", "all done"), 3, 1),
    "job": ({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
             "active": 0, "failed": 2}, ("failed", "BackoffLimitExceeded"), 0, 2),
    "rayjob": ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "oom", "failed": 1},
               ("failed", "FAILED: oom"), 0, 1),
    "trainjob": ({"conditions": [{"type": "Complete", "status": "False"}], "jobsStatus": [{"active": 4}]},
                 None, 4, 0),
    "raycluster": ({"state": "failed", "reason": "head pod failed", "readyWorkerReplicas": 1},
                   ("failed", "head pod failed"), 1, 0),
    "deployment": ({"readyReplicas": 2}, None, 2, 0),
    "leaderworkerset": ({"readyReplicas": 1}, None, 1, 0),
}
"""A status each kind's controller could write, and what the SDK must read from it."""


def _examples() -> dict[str, tuple[str, str, int]]:
    """(team, cluster, profile index) of the first example profile of each kind in the repository's fleet."""
    fleet = load_fleet(REPO)
    found: dict[str, tuple[str, str, int]] = {}
    for name, team in sorted(fleet.teams.items()):
        for i, profile in enumerate(team.config.job_profiles):
            found.setdefault(profile.kind, (name, profile.cluster, i))
    return found


EXAMPLES = _examples()


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_its_example_profile_renders_its_golden_template_through_its_builder(kind: Kind) -> None:
    assert kind.name in EXAMPLES, f"the example fleet has no profile of kind {kind.name}: add one to a team file"
    team, cluster, i = EXAMPLES[kind.name]
    fleet = load_fleet(REPO)
    tcfg, ccfg = fleet.teams[team].config, fleet.clusters[cluster].config
    profile = tcfg.job_profiles[i]
    folder = REPO / "rendered" / cluster / "templates" / team
    built = kind.build(tcfg, ccfg, profile)
    assert built == yaml.safe_load((folder / f"{profile.name}.{kind.name}.yaml").read_text())
    assert (built["apiVersion"], built["kind"]) == (kind.api_version, kind.kind)
    assert BY_OBJECT[kind.kind] is kind
    service = companion_service(built)
    rendered_service = folder / f"{profile.name}.service.yaml"
    assert (service is None) == (not rendered_service.exists())
    if service is not None:
        assert service == yaml.safe_load(rendered_service.read_text())
    assert (folder / f"{profile.name}.sky.yaml").exists() == kind.skypilot
    assert kind.build(tcfg, ccfg, profile, name="renamed")["metadata"]["name"] == "renamed"
    assert shape_problems(built) == [], "the SDK would refuse the kind's own template"
    pods = sum(n for n, _ in kind.pod_groups(built))
    assert profile.nodes * (profile.replicas or 1) <= pods <= profile.nodes * (profile.replicas or 1) + 1


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_each_field_it_refuses_is_refused_at_its_line_with_why(kind: Kind, fleet_root: Path) -> None:
    team, _, i = EXAMPLES[kind.name]
    refused = [key for _, key in kind.refused.fields] if kind.refused else []
    keys = [k for k in refused if k != "leader"] + (["leader"] if "leader" in refused or kind.leader_refused else [])
    path = fleet_root / "teams" / f"{team}.yaml"
    doc = yaml.safe_load(path.read_text())
    profile = doc["jobProfiles"][i]
    profile.update({key: yaml.safe_load(VALUES[key]) for key in keys})
    env = sorted(kind.reserved_env)[:1]
    profile["env"] = [*profile.get("env", []), *({"name": name, "value": "x"} for name in env)]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    loaded = read_fleet(fleet_root).teams[team]
    result = run(fleet_root, "render")
    assert result.code == 2, result.out
    for key in keys:
        why = (f"{kind.what} has no {key}: {kind.refused.why}" if kind.refused and key in refused
               else kind.leader_refused[0].format(what=kind.what) if kind.leader_refused else "")
        file, line = loaded.at("jobProfiles", i, key)
        assert f"{file}:{line}: jobProfiles[{i}].{key}: {why}" in result.err, result.err
    if env:
        j = len(profile["env"]) - 1
        file, line = loaded.at("jobProfiles", i, "env", j, "name")
        assert f"{file}:{line}: jobProfiles[{i}].env[{j}].name: {env[0]} is set {kind.reserved_by}" in result.err, \
            result.err


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_sdk_reads_a_canned_status_of_it(kind: Kind) -> None:
    assert kind.name in CANNED, f"no canned status of {kind.name}: add what its controller writes"
    status, ended, active, restarts = CANNED[kind.name]
    team, cluster, i = EXAMPLES[kind.name]
    fleet = load_fleet(REPO)
    obj = {**kind.build(fleet.teams[team].config, fleet.clusters[cluster].config, _profile(kind)), "status": status}
    assert (kind.ended(obj), kind.active(obj), kind.restarts(obj)) == (ended, active, restarts)
    assert kind.ended({"kind": kind.kind}) is None and kind.active({"kind": kind.kind}) == 0
    assert kind.pods(obj, "x").endswith("=x") or "=x," in kind.pods(obj, "x")
    assert "=" in kind.rank(obj, "x", 0)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_its_facts_are_complete_and_agree_with_what_config_keeps(kind: Kind) -> None:
    assert kind.doc.startswith(f"`{kind.name}`: ")
    assert kind.what.startswith(("a ", "an ")) and kind.kind in kind.what.replace("batch Job", "Job")
    newest = max(KUEUE_CHART_FRAMEWORKS)
    assert set(kind.frameworks) <= set(KUEUE_CHART_FRAMEWORKS[newest]), "a Kueue integration Kueue does not have"
    assert kind.name_problems("x" * 64, _profile(kind)), "a 64-character name must be refused"
    assert not kind.name_problems("ok", _profile(kind))
    if kind.operator is not None:
        op = kind.operator
        assert op.key in Operators.model_fields, f"no operators.{op.key} switch in cluster files"
        assert op in OPERATORS and kind in operator_kinds(op)


def test_the_trainjob_names_the_platforms_runtime() -> None:
    from generator.config.platform import TRAINER_RUNTIME

    trainjob = next(k for k in KINDS if k.name == "trainjob")
    assert trainjob.refused is not None and f"({TRAINER_RUNTIME})" in trainjob.refused.why


def test_every_operator_has_its_switch_in_cluster_files_and_no_switch_lacks_one() -> None:
    assert {op.key for op in OPERATORS} == set(Operators.model_fields)


def test_every_kind_is_in_the_team_schema_and_its_reference_page() -> None:
    schema = (REPO / "schemas" / "team.schema.json").read_text()
    page = (REPO / "docs" / "reference" / "job-kinds.md").read_text()
    import json

    kind = json.loads(schema)["$defs"]["JobProfile"]["properties"]["kind"]
    assert kind["enum"] == IDS
    for k in KINDS:
        assert f"## `{k.name}`" in page and f"| `{k.name}` | {k.kind} " in page


def _profile(kind: Kind) -> Any:
    team, _, i = EXAMPLES[kind.name]
    return load_fleet(REPO).teams[team].config.job_profiles[i]


@pytest.mark.parametrize("written", ["pytorchjob", "RayJob", "ray-job"])
def test_a_kind_no_module_makes_is_refused_at_its_line(fleet_root: Path, written: str) -> None:
    edit(fleet_root, "teams/ml-research.yaml", "    kind: rayjob\n", f"    kind: {written}\n")
    line = next(n for n, text in enumerate((fleet_root / "teams/ml-research.yaml").read_text().splitlines(), 1)
                if text == f"    kind: {written}")
    result = run(fleet_root, "render")
    assert result.code == 2
    names = ", ".join(repr(k.name) for k in KINDS[:-1])
    assert f"teams/ml-research.yaml:{line}: jobProfiles[3].kind: must be one of {names} or " \
           f"{KINDS[-1].name!r} (got {written!r})\n    fix: use one of the listed values" in result.err, result.err
