"""Property: no value in a team file can change the shape of the output.

Arbitrary text goes into any field of a team file, both as YAML data (quoted by a dumper) and
spliced raw into the YAML text (as a careless or hostile author would write it). Either the
render fails with located findings and writes nothing, or it succeeds and:
- the kinds rendered are the same as before, and no new namespace appears except the value
  itself where the field *is* a namespace of this team;
- every other team's files are byte-identical (shared objects change only where the team's own
  entry is: its cohort, its policies, its entry in the published fleet files);
- every file parses back to exactly one document;
- nothing is written outside rendered/.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator import render
from generator.compile.manifest import is_object_file
from generator.errors import InputError, UsageError
from tests.conftest import REPO, snapshot

TEAM = "teams/vision.yaml"
# (path in the team file, whether the value is a namespace of the team)
FIELDS: list[tuple[tuple[Any, ...], bool]] = [
    (("name",), False), (("owners", 0), False), (("members", "groups", 0), False),
    (("members", "users"), False), (("namespaces", 0), True), (("namespaces", 1), True), (("cohort",), False),
    (("defaultPriority",), False), (("fairSharingWeight",), False), (("quotas", "prod-east", "h100", "gpus"), False),
    (("quotas", "prod-east", "h100", "borrowingLimit"), False), (("extraKey",), False),
]
QUOTA_KEY_FIELDS = [("quotas",), ("quotas", "prod-east")]

hostile = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["../../etc", "..", "a/b", "kube-system", "default", "x\n---\nkind: ClusterRoleBinding",
                     "'; rm -rf /", "{{ 7*7 }}", "${HOME}", "*alias", "&anchor x", "!!python/object:os.system",
                     "ml-research", "vision\u200b", "vіsion", "a" * 64, "a" * 63, "!", "null", "~", "yes", "0x10",
                     "1e3", "- item", "key: value", "#comment", "%YAML 1.2", "|\n  block"]),
)




def _baseline() -> tuple[set[str], set[str], dict[str, bytes]]:
    tree = snapshot(REPO / "rendered")
    objects = [yaml.safe_load(v) for k, v in tree.items() if is_object_file(k)]
    kinds = {o["kind"] for o in objects}
    namespaces = {o["metadata"].get("namespace") for o in objects} - {None}
    return kinds, namespaces, tree


BASE_KINDS, BASE_NAMESPACES, BASE_TREE = _baseline()


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _outside(root: Path) -> set[Path]:
    """Files outside rendered/, less fleetgen's own work area (which must hold no leftovers)."""
    work = root / ".fleetgen"
    assert not list(work.glob("stage-*")) and not (work / "journal.json").exists()
    return {p for p in root.rglob("*") if p.relative_to(root).parts[0] not in ("rendered", ".fleetgen")}


def _own_cohort(tree: dict[str, bytes], rel: str) -> bool:
    """A cohort only the team's ClusterQueue is in carries the team's weight: the team's own object."""
    cluster, folder, name = rel.split("/")[0], rel.split("/")[1], Path(rel).name
    if folder != "kueue" or not name.startswith("cohort-"):
        return False
    cohort = yaml.safe_load(tree[rel])["metadata"]["name"]
    members = [q["metadata"]["name"] for q in (yaml.safe_load(v) for k, v in tree.items()
                                               if k.startswith(f"{cluster}/teams/") and "/clusterqueue-" in k)
               if (q["spec"].get("cohortName") or q["spec"].get("cohort")) == cohort]
    return members == ["vision"]


def _own_policy(rel: str) -> bool:
    """The team's admission policies (beside the shared objects in `teams/`, named after the team)."""
    path = Path(rel)
    return path.parent.name == "teams" and "admissionpolicy" in path.name and path.name.endswith("-vision.yaml")


def _own_publication(rel: str, old: bytes | None, new: bytes) -> bool:
    """The fleet files a cluster publishes (compile/published.py): the team's own entry may change,
    as data inside one string; every other entry, and the rest of the object, may not."""
    if Path(rel).name != "configmap-fleetgen-fleet.yaml" or old is None:
        return False
    before, after = yaml.safe_load(old), yaml.safe_load(new)
    before["data"].pop("team.vision.json", None), after["data"].pop("team.vision.json", None)
    return bool(before == after)


def _root_share(rel: str, old: bytes | None, new: bytes) -> bool:
    """The root Cohort holds the GPUs no team holds (`kueue.shareUnallocated`): any team's quota
    moves its nominalQuotas, by design (issue 16), and nothing else of it may change."""
    cluster = rel.split("/")[0]
    if rel != f"{cluster}/kueue/cohort-{cluster}.yaml" or old is None:
        return False

    def shape(text: bytes) -> Any:
        doc = yaml.safe_load(text)
        for group in doc["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                for resource in flavor["resources"]:
                    resource["nominalQuota"] = "?"
        return doc

    return bool(shape(old) == shape(new))


def _check(root: Path, field_is_namespace: bool, value: Any) -> None:
    outside_before = _outside(root)
    try:
        result = render.build(root)
        render.write(result)
    except InputError as exc:
        assert exc.findings
        for finding in exc.findings:
            assert finding.file.startswith(("teams/", "clusters/")) and finding.message
            assert finding.line is None or finding.line >= 1
        assert snapshot(root / "rendered") == BASE_TREE
        return
    except UsageError as exc:  # pragma: no cover - not expected for team-file content
        raise AssertionError(f"usage error from team content: {exc}") from exc
    tree = snapshot(root / "rendered")
    kinds, namespaces = set(), set()
    for rel, content in tree.items():
        docs = list(yaml.safe_load_all(content))
        assert len(docs) == 1, rel
        if not is_object_file(rel):
            continue
        kinds.add(docs[0]["kind"])
        namespaces.add(docs[0]["metadata"].get("namespace"))
        if "/teams/vision/" not in rel and "/templates/vision/" not in rel and not _own_cohort(tree, rel) \
                and not _own_policy(rel) and not _own_publication(rel, BASE_TREE.get(rel), content) \
                and not _root_share(rel, BASE_TREE.get(rel), content):
            assert BASE_TREE.get(rel) == content, f"{rel} of another team or shared object changed"
    namespaces.discard(None)
    assert kinds == BASE_KINDS
    allowed = BASE_NAMESPACES | ({value} if field_is_namespace and isinstance(value, str) else set())
    assert namespaces <= allowed, namespaces - allowed
    assert _outside(root) == outside_before


class _Workspace:
    """One fleet copy reused across examples; rendered/ is restored only after a write."""

    def __init__(self) -> None:
        self.root: Path | None = None
        self.team_text = (REPO / TEAM).read_text()

    def fresh(self) -> Path:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="fleetgen-prop-"))
            atexit.register(shutil.rmtree, self.root, True)  # hypothesis tests take no tmp_path
            for name in ("teams", "clusters", "rendered"):
                shutil.copytree(REPO / name, self.root / name)
        (self.root / TEAM).write_text(self.team_text)
        if snapshot(self.root / "rendered") != BASE_TREE:
            shutil.rmtree(self.root / "rendered")
            shutil.copytree(REPO / "rendered", self.root / "rendered")
        return self.root


WORKSPACE = _Workspace()


def _fresh_root() -> Path:
    return WORKSPACE.fresh()


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FIELDS), value=st.one_of(hostile, st.integers(-5, 10**12), st.floats(allow_nan=True)))
def test_value_as_yaml_data(field: tuple[tuple[Any, ...], bool], value: Any) -> None:
    root = _fresh_root()
    data = yaml.safe_load((root / TEAM).read_text())
    _set(data, field[0], value)
    (root / TEAM).write_text(yaml.safe_dump(data, allow_unicode=True))
    _check(root, field[1], value)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key_field=st.sampled_from(QUOTA_KEY_FIELDS), key=hostile)
def test_value_as_mapping_key(key_field: tuple[Any, ...], key: str) -> None:
    root = _fresh_root()
    data = yaml.safe_load((root / TEAM).read_text())
    target = data
    for part in key_field:
        target = target[part]
    target[key] = {"h100": {"gpus": 1}} if key_field == ("quotas",) else {"gpus": 1}
    (root / TEAM).write_text(yaml.safe_dump(data, allow_unicode=True))
    _check(root, False, key)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=st.sampled_from(["name: vision", "cohort: research-vision", "defaultPriority: standard",
                             "namespaces: [vision, vision-eval]", "fairSharingWeight: 2"]),
       value=hostile)
def test_value_spliced_raw_into_yaml_text(line: str, value: str) -> None:
    root = _fresh_root()
    text = (root / TEAM).read_text()
    key = line.split(":")[0]
    assert line in text
    (root / TEAM).write_text(text.replace(line, f"{key}: {value}", 1))
    _check(root, key == "namespaces", value)
