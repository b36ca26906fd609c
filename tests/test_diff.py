"""`fleetgen diff` on real git repositories: summaries, capacity, risks, exit codes, formats."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, git, run
from tests.diffs import balanced, diff_json, markdown, outside_code


def test_no_op(repo: Path) -> None:
    code, report = diff_json(repo)
    assert code == 0 and report["summary"] == {"add": 0, "change": 0, "destroy": 0, "templates": 0}
    assert report["changes"] == [] and report["risks"] == []
    (page,) = markdown(repo)
    assert page.startswith("### fleetgen diff: no changes")


def test_quota_change(repo: Path) -> None:
    path = repo / "teams/ml-research.yaml"
    path.write_text(path.read_text().replace("gpus: 64, borrowingLimit: 32", "gpus: 48, borrowingLimit: 32"))
    code, report = diff_json(repo)
    assert code == 1
    assert report["summary"] == {"add": 0, "change": 4, "destroy": 0, "templates": 0}
    by_kind = {c["kind"]: c for c in report["changes"]}
    change, cohort, quota = by_kind["ClusterQueue"], by_kind["Cohort"], by_kind["ResourceQuota"]
    # The team file prod-east publishes for the job SDK: its own entry, in that cluster only.
    published = by_kind["ConfigMap"]
    assert (published["cluster"], published["namespace"], published["name"]) == (
        "prod-east", "kube-public", "fleetgen-fleet")
    assert [f["path"] for f in published["fields"]] == ["data.team.ml-research.json"]
    # Its GPU ResourceQuota follows: 48 + a borrowing limit of 32 (issue 28).
    assert (quota["kind"], quota["namespace"]) == ("ResourceQuota", "ml-research")
    assert [(f["old"], f["new"]) for f in quota["fields"]] == [("96", "80")]
    assert (change["kind"], change["name"], change["cluster"], change["team"]) == (
        "ClusterQueue", "ml-research", "prod-east", "ml-research")
    # The 16 GPUs ml-research gives up join what the root cohort lends (issue 16).
    assert (cohort["kind"], cohort["name"]) == ("Cohort", "prod-east")
    assert [(f["old"], f["new"]) for f in cohort["fields"] if f["path"].endswith("[nvidia.com/gpu].nominalQuota")] \
        == [("32", "48")]
    gpu = next(f for f in change["fields"] if f["path"].endswith("[nvidia.com/gpu].nominalQuota"))
    assert (gpu["old"], gpu["new"], gpu["op"]) == ("64", "48", "changed")
    assert gpu["path"] == "spec.resourceGroups[0].flavors[h100].resources[nvidia.com/gpu].nominalQuota"
    row = next(r for r in report["capacity"] if r["team"] == "ml-research" and r["pool"] == "h100")
    assert row["before"]["guaranteed"] == 64 and row["after"]["guaranteed"] == 48
    # vision, llm-pretrain and platform-ci can borrow what ml-research no longer holds... and it lends less.
    assert [r["rule"] for r in report["risks"]] == ["quota-reduced"]
    assert "ml-research loses 16 guaranteed h100 GPUs (64 → 48)" in report["risks"][0]["message"]
    (page,) = markdown(repo)
    assert "**0 to add, 4 to change, 0 to destroy**" in page and balanced(page)
    assert "| ml-research **(changed)** | 64 → **48** |" in page
    assert "```mermaid\nxychart-beta" in page and "line [128, 64, 0, 32]" in page and "bar [128, 48, 0, 32]" in page
    summary_rows = re.findall(r"^\| (dev|prod-east|prod-west) \|", page, re.M)
    assert summary_rows == ["prod-east"]


def test_new_team(repo: Path) -> None:
    (repo / "teams/genomics.yaml").write_text(
        "name: genomics\nowners: ['@acme/genomics']\nmembers: {groups: [genomics]}\ndefaultPriority: standard\n"
        "quotas:\n  prod-west:\n    a100: {gpus: 16}\n")
    code, report = diff_json(repo)
    assert code == 1
    added = sorted((c["kind"], c["namespace"], c["name"]) for c in report["changes"] if c["action"] == "add")
    assert added == [("ClusterQueue", "", "genomics"), ("ClusterRole", "", "fleetgen-members-genomics"),
                     ("ClusterRoleBinding", "", "fleetgen-members-genomics"),
                     ("LimitRange", "genomics", "fleetgen-defaults"), ("LocalQueue", "genomics", "default"),
                     ("LocalQueue", "genomics", "genomics"),
                     ("MutatingAdmissionPolicy", "", "fleetgen-default-priority-genomics"),
                     ("MutatingAdmissionPolicyBinding", "", "fleetgen-default-priority-genomics"),
                     ("Namespace", "", "genomics"),
                     # prod-west runs KubeRay: its pods may reach the team's Ray heads' dashboard
                     ("NetworkPolicy", "genomics", "fleetgen-operator-ray-dashboard"),
                     ("NetworkPolicy", "genomics", "fleetgen-operator-ray-serve"),
                     ("NetworkPolicy", "genomics", "fleetgen-team-isolation"),
                     ("ResourceQuota", "genomics", "fleetgen-gpus"),
                     ("RoleBinding", "genomics", "genomics-members"),
                     ("RoleBinding", "genomics", "genomics-members-jobs")]
    assert report["summary"]["destroy"] == 0
    # One cause, one line: the team's arrival, not a line per object it adds (issue 29).
    assert [(r["severity"], r["rule"], r["message"]) for r in report["risks"]] == [
        ("low", "team-added", "prod-west: team genomics arrives: queue genomics, namespace genomics; "
                              "Group 'genomics' get roles edit, fleetgen-team-member there and role "
                              "fleetgen-members-genomics cluster-wide")]
    row = next(r for r in report["capacity"] if r["team"] == "genomics")
    assert row["before"] is None and row["after"]["guaranteed"] == 16


def test_deleted_team(repo: Path) -> None:
    (repo / "teams/recsys.yaml").unlink()
    code, report = diff_json(repo)
    assert code == 1
    destroyed = {(c["kind"], c["name"]) for c in report["changes"] if c["action"] == "destroy"}
    assert {("ClusterQueue", "recsys"), ("Namespace", "recsys")} <= destroyed
    removed = [r for r in report["risks"] if r["rule"] == "team-removed"]
    assert [(r["severity"], r["clusters"]) for r in removed] == [("high", ["prod-west"])], report["risks"]
    assert "namespace recsys deleted with every object and running job" in removed[0]["message"]
    # The leaving team's deleted queue and namespace, and its lost quota, are that one line.
    assert not {r["rule"] for r in report["risks"]} & {"namespace-deleted", "kueue-object-deleted", "quota-reduced"}


def test_a_routine_pull_request_reads_calm(repo: Path) -> None:
    """Issue 29: one quota raise, one new member, one new team gave 38 risk lines, 19 of them high,
    each RoleBinding twice. Now: one line per cause, none high (the rule is on the risk rules page)."""
    for rel, old, new in (("teams/speech.yaml", "l4: {gpus: 6, lendingLimit: 2}", "l4: {gpus: 7, lendingLimit: 2}"),
                          ("teams/vision.yaml", "groups: [vision, vision-contractors]}",
                           "groups: [vision, vision-contractors], users: [gina@acme.com]}")):
        text = (repo / rel).read_text()
        assert old in text, (rel, old)
        (repo / rel).write_text(text.replace(old, new))
    (repo / "teams/audio.yaml").write_text("name: audio\nowners: ['@acme/audio']\nmembers: {groups: [audio]}\n"
                                           "defaultPriority: standard\nquotas:\n  dev:\n    l4: {gpus: 1}\n")
    _, report = diff_json(repo)
    assert [(r["severity"], r["rule"], r["message"]) for r in report["risks"]] == [
        ("medium", "members-added", "dev, hub, prod-east, prod-west: team vision adds User 'gina@acme.com': roles "
                                    "edit, fleetgen-team-member in namespaces vision, vision-eval; role "
                                    "fleetgen-members-vision cluster-wide"),
        ("medium", "pool-overcommitted", "dev: pool l4 guarantees 16 GPUs (audio +1, speech +1) of 8 that exist "
                                         "(overcommit 2 allows 16): 8 guaranteed GPUs have no node (was 6), so Kueue "
                                         "can admit work that cannot be scheduled"),
        ("low", "team-added", "dev: team audio arrives: queue audio, namespace audio; Group 'audio' get "
                              "roles edit, fleetgen-team-member there and role fleetgen-members-audio "
                              "cluster-wide")]
    assert report["risks"][0]["clusters"] == ["dev", "hub", "prod-east", "prod-west"]
    (page,) = markdown(repo)
    assert "changes, review needed" in page and "high" not in page.split("#### Risks")[1].split("####")[0]


def test_every_risk_rule_is_documented_and_used() -> None:
    """The rulebook (the reference page's source) names exactly the rules the code can report."""
    from generator.diff.risks import RULEBOOK

    source = "".join((REPO / "generator/diff" / name).read_text()
                     for name in ("risks.py", "scheduling.py", "fleetgen_move.py"))
    source = source.replace(source[source.index("RULEBOOK: dict"):source.index("Every rule the diff can report")], "")
    unused = [rule for rule in RULEBOOK if f'"{rule}"' not in source]
    assert unused == [], f"documented but never reported: {unused}"


def test_every_field_of_the_json_report_is_described() -> None:
    """`fleetgen diff --format json` is read by machines written by people: its schema (and so
    docs/reference/diff-json.md) says what every field of every object means."""
    from generator.jsonschemas import schema_text

    def bare(node: Any, at: str) -> Iterator[str]:
        if isinstance(node, dict):
            for name, field in (node.get("properties") or {}).items():
                if not (isinstance(field, dict) and field.get("description")):
                    yield f"{at}.{name}"
            for key, value in node.items():
                yield from bare(value, f"{at}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from bare(value, f"{at}[{i}]")

    schema = json.loads(schema_text("diff"))
    assert len(schema["properties"]) >= 10 and schema["$defs"]
    assert list(bare(schema, "diff")) == []
    assert [name for name, model in schema["$defs"].items() if not model.get("description")] == []


def test_renamed_pool(repo: Path) -> None:
    for rel, old, new in (("clusters/prod-west.yaml", "  - name: a100\n", "  - name: a100-sxm\n"),
                          ("teams/ml-research.yaml", "    a100: {gpus: 16, borrowingLimit: 16}",
                           "    a100-sxm: {gpus: 16, borrowingLimit: 16}"),
                          ("teams/ml-research.yaml", "    pool: a100\n", "    pool: a100-sxm\n"),
                          ("teams/inference.yaml", "    a100: {gpus: 8}", "    a100-sxm: {gpus: 8}"),
                          ("teams/recsys.yaml", "    a100: {gpus: 24, lendingLimit: 24}",
                           "    a100-sxm: {gpus: 24, lendingLimit: 24}"),
                          ("teams/platform-ci.yaml", "    a100: {gpus: 8}", "    a100-sxm: {gpus: 8}")):
        path = repo / rel
        assert old in path.read_text(), (rel, old)
        path.write_text(path.read_text().replace(old, new))
    code, report = diff_json(repo)
    assert code == 1
    flavors = {(c["action"], c["name"]) for c in report["changes"] if c["kind"] == "ResourceFlavor"}
    assert flavors == {("add", "a100-sxm"), ("destroy", "a100")}
    changed_queues = {c["name"] for c in report["changes"] if c["kind"] == "ClusterQueue"}
    assert changed_queues == {"ml-research", "inference", "recsys", "platform-ci"}
    # a rename, recognised (issue 57): one line, the pool under its new name, no lost guarantees
    assert [(r["rule"], r["clusters"]) for r in report["risks"]] == [("pool-renamed", ["hub", "prod-west"])]
    assert {(p["cluster"], p["pool"], p["formerly"]) for p in report["pools"]} == {
        ("hub", "a100-sxm", "a100"), ("prod-west", "a100-sxm", "a100")}


@pytest.mark.slow
def test_huge_change_splits_into_parts_that_cover_everything(repo: Path) -> None:
    cluster = repo / "clusters/prod-west.yaml"
    cluster.write_text(cluster.read_text().replace("    nodes: 16\n", "    nodes: 400\n"))
    for i in range(120):
        (repo / f"teams/bulk-{i:03d}.yaml").write_text(
            f"name: bulk-{i:03d}\nowners: ['@acme/bulk']\nmembers: {{groups: [bulk-{i:03d}, everyone]}}\n"
            f"defaultPriority: standard\nquotas:\n  prod-west:\n    a100: {{gpus: 8}}\n")
    limit = 30_000
    parts = markdown(repo, "--max-comment-chars", str(limit))
    assert len(parts) > 1
    _, report = diff_json(repo)
    for i, part in enumerate(parts, 1):
        assert len(part) <= limit, (i, len(part))
        assert balanced(part), i
        assert part.startswith(f"**fleetgen diff, part {i}/{len(parts)}**") if i > 1 else \
            part.startswith("### fleetgen diff: ") and f"part 1/{len(parts)}" in part.split("\n")[2]
    text = "\n".join(parts)
    for change in report["changes"]:
        label = f"{change['kind']} {change['namespace'] + '/' if change['namespace'] else ''}{change['name']}"
        assert label.replace("_", "\\_") in text, label
    assert "### fleetgen diff" in parts[0] and "#### GPU capacity" in parts[0]
    assert text.index("#### GPU capacity") < text.index("#### More risks") < text.index("#### Changes")


def test_output_dir_and_full_diff(repo: Path, tmp_path: Path) -> None:
    path = repo / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 4"))
    out = tmp_path / "out"
    result = run(repo, "diff", "--format", "markdown", "--output-dir", str(out))
    assert result.code == 1
    assert sorted(p.name for p in out.iterdir()) == ["comment-1.md", "diff.json", "diff.txt"]
    assert "-        nominalQuota: '6'" in (out / "diff.txt").read_text()


def test_hostile_values_cannot_break_the_comment(repo: Path) -> None:
    path = repo / "teams/vision.yaml"
    hostile = "x``` </details></details> <script>| `"
    path.write_text(path.read_text().replace("groups: [vision, vision-contractors]",
                                             f"groups: [vision, vision-contractors, {json.dumps(hostile)}]"))
    (page,) = markdown(repo)
    assert balanced(page)
    prose = outside_code(page)
    assert "<script>" not in prose and "&lt;script&gt;" in prose
    assert "````diff" in page  # the fence outgrows the value's backticks


def test_from_to_rendered_trees(repo: Path, tmp_path: Path) -> None:
    assert run(repo, "render").code == 0
    before = tmp_path / "before"
    shutil.copytree(repo / "rendered", before)
    path = repo / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 4"))
    assert run(repo, "render").code == 0
    code, report = diff_json(repo, "--from", str(before), "--to", str(repo / "rendered"))
    assert code == 1 and report["capacity"] == [] and report["summary"]["change"] == 2  # and the published file
    assert "No capacity table" in markdown(repo, "--from", str(before), "--to", str(repo / "rendered"))[0]
    assert run(repo, "diff", "--from", str(before)).code == 2


def test_ignore_rules(repo: Path) -> None:
    path = repo / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 4"))
    code, report = diff_json(repo, "--ignore", "ClusterQueue:spec.resourceGroups*")
    assert code == 1 and [c["kind"] for c in report["changes"]] == ["ConfigMap"]  # the published team file
    code, report = diff_json(repo, "--ignore", "ClusterQueue:spec.resourceGroups*", "--ignore", "ConfigMap:data*")
    assert code == 0 and report["changes"] == []


def test_bad_ref_is_a_usage_error(repo: Path) -> None:
    result = run(repo, "diff", "--base", "no-such-ref")
    assert result.code == 2 and "git rev-parse" in result.err


def test_base_without_a_fleet_makes_everything_new(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "README").write_text("x")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "empty")
    for name in ("teams", "clusters"):
        shutil.copytree(REPO / name, root / name)
    code, report = diff_json(root)
    assert code == 1 and report["summary"]["destroy"] == 0 and report["summary"]["add"] > 100


def test_gitops_wiring() -> None:
    project = yaml.safe_load((REPO / "rendered/gitops/prod-east/appproject-prod-east.yaml").read_text())
    assert project["spec"]["destinations"] == [{"server": "https://kubernetes.default.svc", "namespace": "*"}]
    kinds = {k["kind"] for k in project["spec"]["clusterResourceWhitelist"]}
    assert kinds == {"Namespace", "ClusterQueue", "ResourceFlavor", "Cohort", "Topology", "WorkloadPriorityClass",
                     "AdmissionCheck", "ProvisioningRequestConfig", "MultiKueueCluster", "MultiKueueConfig",
                     "ClusterRole", "ClusterRoleBinding",  # the health reconciler's node rights
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",  # allowedPriorities
                     "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}  # defaultPriority
    app = yaml.safe_load((REPO / "rendered/gitops/prod-east/application-prod-east-fleet.yaml").read_text())
    assert app["spec"]["source"]["path"] == "rendered/prod-east" and app["spec"]["project"] == "prod-east"
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]
    assert {d["kind"] for d in app["spec"]["ignoreDifferences"]} == {"ClusterQueue", "LocalQueue"}
    # The bootstrap folder keeps itself in sync from git, in a project that may hold only Argo CD's own
    # objects in its namespace, and never prunes (removing a cluster is a person's act).
    own = yaml.safe_load((REPO / "rendered/gitops/prod-east/application-prod-east-gitops.yaml").read_text())
    assert own["spec"]["source"]["path"] == "rendered/gitops/prod-east" and own["spec"]["project"] == "prod-east-gitops"
    assert own["spec"]["syncPolicy"]["automated"]["prune"] is False
    own_project = yaml.safe_load((REPO / "rendered/gitops/prod-east/appproject-prod-east-gitops.yaml").read_text())
    assert own_project["spec"]["destinations"] == [{"server": "https://kubernetes.default.svc", "namespace": "argocd"}]
    assert {k["kind"] for k in own_project["spec"]["namespaceResourceWhitelist"]} == {"Application", "AppProject"}
    assert "clusterResourceWhitelist" not in own_project["spec"]  # none: Argo CD's default for a project
    flux = {p.stem.removeprefix("kustomization-"): yaml.safe_load(p.read_text())
            for p in (REPO / "rendered/gitops/prod-west").glob("kustomization-prod-west-fleet-*.yaml")}
    deps = {name: [d["name"] for d in k["spec"].get("dependsOn", [])] for name, k in flux.items()}
    f = "prod-west-fleet"
    assert deps == {f"{f}-platform": [], f"{f}-kueue": [f"{f}-platform"], f"{f}-teams": [f"{f}-kueue"],
                    f"{f}-monitoring": [f"{f}-platform"], f"{f}-health": [f"{f}-monitoring"], f"{f}-gitops": []}
    assert all(k["spec"]["prune"] is (name != f"{f}-gitops") for name, k in flux.items())
    assert flux[f"{f}-gitops"]["spec"]["path"] == "./rendered/gitops/prod-west"


def test_codeowners(repo: Path) -> None:
    assert run(repo, "render").code == 0
    text = (repo / ".github/CODEOWNERS").read_text()
    assert re.search(r"^/teams/ml-research\.yaml\s+@acme/ml-research-leads$", text, re.M)
    assert re.search(r"^/rendered/\*/teams/ml-research/\s+@acme/gpu-platform$", text, re.M)
    assert re.search(r"^/clusters/\s+@acme/gpu-platform$", text, re.M)
    (repo / ".github/CODEOWNERS").write_text("edited\n")
    check = run(repo, "render", "--check")
    assert check.code == 1 and "../.github/CODEOWNERS" in check.out
    fleet = repo / "fleet.yaml"
    fleet.write_text(fleet.read_text().replace("platformApprovesQuotas: true", "platformApprovesQuotas: false"))
    assert run(repo, "render").code == 0
    text = (repo / ".github/CODEOWNERS").read_text()
    assert re.search(r"^/rendered/\*/teams/ml-research/\s+@acme/ml-research-leads$", text, re.M)


def test_pre_commit_hooks() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"fleetgen-render-check", "fleetgen-render"}


def test_every_rendered_kind_is_permitted_by_its_argo_cd_project() -> None:
    """Argo CD refuses a whole sync when one task's kind is not in the AppProject's whitelists
    (issue 30: a PodDisruptionBudget stopped prod-east). Every object that an Application of
    `rendered/gitops` syncs from a folder of this repository (a cluster's tree, a bootstrap folder, the
    Argo CD settings) must be permitted by that Application's project, in its scope and namespace."""
    from tests.upstream.fleet import group_of

    def docs(folder: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
        for path in sorted(folder.rglob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            if isinstance(doc, dict) and "apiVersion" in doc and "/templates/" not in path.as_posix() \
                    and not doc["apiVersion"].startswith("kustomize."):
                yield path, doc

    gitops = list(docs(REPO / "rendered/gitops"))
    projects = {(d["metadata"]["namespace"], d["metadata"]["name"]): d["spec"] for _, d in gitops
                if d["kind"] == "AppProject"}
    checked = set()
    for app_path, app in gitops:
        path = app["spec"]["source"].get("path") if app["kind"] == "Application" else None
        if path is None:
            continue  # a platform chart's Application: its project permits every kind
        spec = projects[(app["metadata"]["namespace"], app["spec"]["project"])]
        cluster = {(k["group"], k["kind"]) for k in spec.get("clusterResourceWhitelist") or []}
        namespaced = {(k["group"], k["kind"]) for k in spec.get("namespaceResourceWhitelist") or []}
        namespaces = {d["namespace"] for d in spec["destinations"]}
        for obj_path, doc in docs(REPO / path):
            key, ns = (group_of(doc), doc["kind"]), doc["metadata"].get("namespace")
            where = f"{obj_path.relative_to(REPO)} (synced by {app_path.name})"
            assert key in (namespaced if ns else cluster), f"{where}: {key} is not permitted by its project"
            assert ns is None or "*" in namespaces or ns in namespaces, f"{where}: namespace {ns} not a destination"
            checked.add(path)
    assert {"rendered/prod-east", "rendered/gitops/prod-east", "rendered/gitops/argocd-settings/argocd"} <= checked
