"""Issue 15: pull-request previews a platform team can trust. One test per reported defect; each
fails on the code before the fix (named in its docstring)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from benchmarks.synth import synthesize
from tests.conftest import REPO, git, run
from tests.diffs import balanced, diff_json, markdown


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_a_flux_source_change_is_a_change_of_that_cluster(repo: Path) -> None:
    """Flux objects were keyed by the `gitops` folder: now by cluster, shown under it."""
    _edit(repo / "clusters/dev.yaml", "  engine: flux\n", "  engine: flux\n  revision: release-2\n")
    code, report = diff_json(repo)
    assert code == 1
    published, change = report["changes"]  # and the cluster file as dev publishes it (compile/published.py)
    assert (change["cluster"], change["kind"], change["name"]) == ("dev", "GitRepository", "dev-fleet")
    assert (published["cluster"], published["kind"], published["name"]) == ("dev", "ConfigMap", "fleetgen-fleet")
    assert [r["rule"] for r in report["risks"]] == ["gitops-source-changed"]
    assert report["clusters"] == {"dev": {"add": 0, "change": 2, "destroy": 0, "templates": 0}}


def test_two_files_with_one_identity_are_refused(tmp_path: Path, repo: Path) -> None:
    assert run(repo, "render").code == 0
    rendered = repo / "rendered"
    before = tmp_path / "before"
    shutil.copytree(rendered, before)
    source = rendered / "gitops/dev/gitrepository-dev-fleet.yaml"
    (rendered / "dev/platform/gitrepository-copy.yaml").write_text(source.read_text())
    source.write_text(source.read_text().replace("branch: main", "branch: next"))
    result = run(repo, "diff", "--from", str(before), "--to", str(rendered))
    assert result.code == 2 and "are the same object (GitRepository flux-system/dev-fleet in cluster dev)" in result.err


def test_a_pool_that_shrinks_is_a_change(repo: Path) -> None:
    """Halving prod-west's A100 pool (128 -> 64 GPUs) said "no changes" and exited 0. (With the
    root cohort lending unallocated GPUs, its quota changes too; without, no object does.) The
    MultiKueue manager over prod-west (hub) counts the same GPUs: its pool shrinks with it."""
    for cluster in ("prod-west", "hub"):
        _edit(repo / f"clusters/{cluster}.yaml", "kueue:\n", "kueue:\n  shareUnallocated: false\n")
    git(repo, "commit", "-qam", "no shared quota")
    _edit(repo / "clusters/prod-west.yaml", "    nodes: 16\n", "    nodes: 8\n")
    code, report = diff_json(repo)
    # Only the GPU ResourceQuotas of teams that may borrow the whole pool follow it (issue 28), and the
    # cluster file each cluster publishes (hub's pools are prod-west's).
    assert code == 1 and {c["kind"] for c in report["changes"]} == {"ResourceQuota", "ConfigMap"}
    assert sorted(c["cluster"] for c in report["changes"] if c["kind"] == "ConfigMap") == ["hub", "prod-west"]
    assert report["pools"] == [{"cluster": cluster, "pool": "a100", "product": "NVIDIA-A100-SXM4-80GB",
                                "before": {"gpus": 128, "limit": 128, "guaranteed": held},
                                "after": {"gpus": 64, "limit": 64, "guaranteed": held}, "formerly": None}
                               for cluster, held in (("hub", 8), ("prod-west", 56))]
    risk = next(r for r in report["risks"] if r["message"].startswith("prod-west"))
    assert risk["rule"] == "pool-capacity-reduced" and "128 to 64 GPUs" in risk["message"]
    assert "GPUs no team holds 72 → 8" in risk["message"]
    assert [r["rule"] for r in report["risks"]] == ["pool-capacity-reduced"] * 2
    (page,) = markdown(repo)
    assert page.startswith("### fleetgen diff: changes, review needed")
    assert "**128 → 64 GPUs**" in page
    assert "pool a100 128 -> 64 GPUs" in run(repo, "diff").out


def test_overcommit_is_judged_by_what_the_change_adds(repo: Path) -> None:
    """`pool-overcommitted` fired on every change to an overcommitted pool, whatever the
    cluster's `overcommit` allowed; now only when a change guarantees more GPUs without nodes."""
    cluster = repo / "clusters/prod-west.yaml"
    _edit(cluster, "overcommit: 1.0\n", "overcommit: 1.5\n") if "overcommit: 1.0\n" in cluster.read_text() else \
        cluster.write_text(cluster.read_text() + "overcommit: 1.5\n")
    _edit(cluster, "    nodes: 12\n", "    nodes: 10\n")  # l40s: 40 GPUs, 44 guaranteed: overcommitted by 4
    git(repo, "commit", "-qam", "overcommitted l40s")
    _edit(repo / "teams/vision.yaml", "l40s: {gpus: 8", "l40s: {gpus: 6")  # fewer guaranteed: no risk
    _, report = diff_json(repo)
    assert "pool-overcommitted" not in [r["rule"] for r in report["risks"]]
    _edit(repo / "teams/vision.yaml", "l40s: {gpus: 6", "l40s: {gpus: 12")
    _, report = diff_json(repo)
    (risk,) = [r for r in report["risks"] if r["rule"] == "pool-overcommitted"]
    assert "guarantees 48 GPUs (vision +4) of 40 that exist (overcommit 1.5 allows 60): 8 guaranteed GPUs have no " \
           "node (was 4)" in risk["message"]


def test_changing_a_tas_flavors_node_labels_is_flagged_immutable(repo: Path) -> None:
    """Kueue refuses new nodeLabels or tolerations on a flavor with a topologyName (its CRD's
    transition rules, resourceflavor_types.go:49-50 at v0.19.2): a sync fails."""
    _edit(repo / "clusters/prod-east.yaml", "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}",
          "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, node.acme.io/tier: gold}")
    _, report = diff_json(repo)
    immutable = [r["message"] for r in report["risks"] if r["rule"] == "immutable-field"]
    assert any("ResourceFlavor h100" in m and "spec.nodeLabels" in m for m in immutable), report["risks"]


def test_moving_a_clusters_gitops_destination_is_a_risk(repo: Path) -> None:
    _edit(repo / "clusters/prod-east.yaml", "  engine: argocd\n",
          "  engine: argocd\n  destination: https://prod-east.k8s.acme.io:6443\n")
    _, report = diff_json(repo)
    moved = [r for r in report["risks"] if r["rule"] == "gitops-destination-changed"]
    assert moved and all(r["severity"] == "high" for r in moved)
    assert any("Application argocd/prod-east-fleet" in r["message"] for r in moved), moved


def test_switching_gitops_engine_is_a_risk(repo: Path) -> None:
    _edit(repo / "clusters/dev.yaml", "  engine: flux\n", "  engine: argocd\n")
    _, report = diff_json(repo)
    (risk,) = [r for r in report["risks"] if r["rule"] == "gitops-engine-changed"]
    assert risk["message"].startswith("dev: GitOps moves from flux to argocd")


def test_an_invalid_fleet_gets_an_error_comment(repo: Path, tmp_path: Path) -> None:
    """An invalid fleet got no comment at all (the old one stayed, looking current)."""
    _edit(repo / "teams/speech.yaml", "gpus: 6", "gpus: six")
    out = tmp_path / "out"
    result = run(repo, "diff", "--format", "markdown", "--output-dir", str(out), "--head-sha", "0123456789abcdef")
    assert result.code == 2
    assert sorted(p.name for p in out.iterdir()) == ["comment-1.md"]
    comment = (out / "comment-1.md").read_text()
    assert comment.startswith("### fleetgen diff: the fleet in this pull request does not load")
    assert "head `0123456789ab`" in comment and re.search(r"made \d{4}-\d\d-\d\d \d\d:\d\d UTC", comment)
    assert "teams/speech.yaml" in comment and "six" in comment


def test_every_part_names_the_head_and_the_time(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _edit(repo / "teams/speech.yaml", "gpus: 6", "gpus: 4")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    result = run(repo, "diff", "--format", "markdown", "--head-sha", "feedbeef" * 5)
    assert "_head `feedbeeffeed`, made 2023-11-14 22:13 UTC_" in result.out


def _big_change(root: Path, clusters: int, teams: int) -> None:
    synthesize(root, clusters, teams)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    for path in sorted((root / "teams").glob("*.yaml")):
        path.write_text(path.read_text().replace("borrowingLimit: 8", "borrowingLimit: 12"))


@pytest.mark.slow
@pytest.mark.parametrize("budget", [60_000, 8_000])
def test_every_part_fits_its_budget_whatever_the_fleet(tmp_path: Path, budget: int) -> None:
    """Part 1 had no budget (143,399 characters at 20 clusters x 100 teams): GitHub refused it and
    nothing was posted. Now every part fits, and together they name every changed object."""
    root = tmp_path / "fleet"
    _big_change(root, 12, 40)
    out = tmp_path / "out"
    result = run(root, "diff", "--format", "json", "--output-dir", str(out), "--max-comment-chars", str(budget))
    assert result.code == 1, result.err
    report = json.loads(result.out)
    parts = [p.read_text() for p in sorted(out.glob("comment-*.md"), key=lambda p: int(p.stem.split("-")[1]))]
    assert len(parts) > 1
    text = "\n".join(parts)
    for i, part in enumerate(parts, 1):
        assert len(part) <= budget, (i, len(part))
        assert balanced(part), i
        if i > 1:
            assert part.startswith(f"**fleetgen diff, part {i}/{len(parts)}** (continued; made ")
    assert parts[0].startswith("### fleetgen diff: ") and "#### Risks" in parts[0]
    for change in report["changes"]:
        label = f"{change['kind']} {change['namespace'] + '/' if change['namespace'] else ''}{change['name']}"
        assert label.replace("_", "\\_") in text, label
    assert len([c for c in report["changes"] if c["kind"] == "ClusterQueue"]) == 12 * 40
    # and the GPU ResourceQuota of each of its two namespaces, and each cluster's published team files
    assert len(report["changes"]) == 12 * 40 * 3 + 12


def test_the_markdown_budget_has_a_floor(repo: Path) -> None:
    result = run(repo, "diff", "--format", "markdown", "--max-comment-chars", "100")
    assert result.code == 2 and "4000" in result.err


def _charts(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, flags=re.S)


def test_charts_for_small_pools_only_and_never_empty(repo: Path) -> None:
    """An empty pool gave `x-axis []`, which Mermaid refuses; 50 teams gave an unreadable chart."""
    _edit(repo / "clusters/prod-west.yaml", "nodePools:\n", "nodePools:\n"
          "  - name: spare\n    gpu: {product: NVIDIA-L4, perNode: 4, resource: nvidia.com/gpu}\n    nodes: 2\n"
          "    cpuPerNode: '46'\n    memoryPerNode: 180Gi\n    nodeLabels: {nvidia.com/gpu.product: NVIDIA-L4}\n")
    (page,) = markdown(repo)
    assert "**prod-west / spare** (NVIDIA-L4): **0 → 8 GPUs**" in page and "No team has a quota in this pool." in page
    assert all("x-axis []" not in chart for chart in _charts(page))


def mermaid_errors(charts: list[str]) -> list[str]:
    from tests.preview import node_check

    return [entry["error"] for entry in node_check("mermaid.mjs", charts)]


def test_every_chart_parses_with_mermaid(repo: Path) -> None:
    _edit(repo / "teams/ml-research.yaml", "gpus: 64, borrowingLimit: 32", "gpus: 48, borrowingLimit: 32")
    _edit(repo / "teams/speech.yaml", "gpus: 6", "gpus: 4")
    (page,) = markdown(repo)
    charts = _charts(page)
    assert len(charts) >= 2
    assert mermaid_errors(charts) == [""] * len(charts)
    # The parser is not lenient: the old empty chart, and a broken one, are refused.
    assert all(mermaid_errors(['xychart-beta\n  x-axis []\n  bar []\n', "xychart-beta\n  bar [1, \n"]))


def test_more_than_twelve_teams_get_a_table_only(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    _big_change(root, 1, 40)
    for path in sorted((root / "teams").glob("*.yaml")):
        path.write_text(re.sub(r"gpus: (\d+)", lambda m: f"gpus: {int(m.group(1)) + 1}", path.read_text(), count=1))
    result = run(root, "diff", "--format", "markdown")
    assert result.code == 1
    tables = re.findall(r"\| team \| guaranteed \| borrowable \| lendable \|\n\|---\|---\|---\|---\|\n((?:\|.*\n)+)",
                        result.out)
    assert tables and max(len(t.splitlines()) for t in tables) > 12
    assert sum(1 for t in tables if len(t.splitlines()) <= 12) == len(_charts(result.out))
    assert all(chart.count('", "') < 12 for chart in _charts(result.out))


def _with_generator(repo: Path, edit: tuple[str, str, str] | None) -> None:
    """Commit this project's generator into `repo` (optionally edited: file, old, new) as the base,
    then put the running generator back in the work tree, as a pull request changing it would."""
    shutil.copytree(REPO / "generator", repo / "generator", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    assert run(repo, "render").code == 0
    if edit:
        _edit(repo / "generator" / edit[0], edit[1], edit[2])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base with its generator")
    shutil.rmtree(repo / "generator")
    shutil.copytree(REPO / "generator", repo / "generator", ignore=shutil.ignore_patterns("__pycache__"))


def test_a_chart_version_bump_shows_in_the_preview(repo: Path) -> None:
    """The base was rebuilt with the head's generator, so a generator or versions.yaml change
    showed "no changes". Now the base is rendered by its own generator."""
    _with_generator(repo, ("versions.yaml", "  version: 79.5.0\n", "  version: 79.4.0\n"))
    code, report = diff_json(repo)
    assert code == 1
    moved = {(c["cluster"], c["kind"], f["old"], f["new"]) for c in report["changes"] for f in c["fields"]
             if f["path"] in ("spec.source.targetRevision", "spec.chart.spec.version")}
    assert ("prod-east", "Application", "79.4.0", "79.5.0") in moved
    assert ("prod-west", "HelmRelease", "79.4.0", "79.5.0") in moved
    assert report["notes"] == ["the base was rendered by its own generator"]
    assert report["before"].endswith(", rendered by its own generator")


def test_a_base_generator_that_cannot_run_falls_back_to_its_committed_tree(repo: Path) -> None:
    _with_generator(repo, ("versions.yaml", "  version: 79.5.0\n", "  version: [79.4.0\n"))  # unreadable
    code, report = diff_json(repo)
    assert code == 0  # its committed rendered/ was made before the edit: the same as the head's
    (note,) = report["notes"]
    assert note.startswith("the base's own generator could not run (") and "committed rendered/" in note


def test_only_clusters_whose_inputs_differ_are_compiled(repo: Path, tmp_path: Path) -> None:
    """A one-team change re-rendered every cluster of both trees; now only the clusters that
    team (before or after) has quota in, with the same result as comparing everything."""
    _edit(repo / "teams/speech.yaml", "gpus: 6", "gpus: 4")
    _, report = diff_json(repo)
    assert report["notes"] == ["the base has no generator/: it was rendered by this fleetgen",
                               "3 cluster(s) whose inputs are unchanged were not compiled"]
    assert run(repo, "render").code == 0
    head = tmp_path / "head"
    shutil.copytree(repo, head, ignore=shutil.ignore_patterns(".git"))
    git(repo, "stash", "-q")
    assert run(repo, "render").code == 0
    _, full = diff_json(repo, "--from", str(repo), "--to", str(head))
    assert report["changes"] == full["changes"] and report["capacity"] == full["capacity"]
    assert report["risks"] == full["risks"]


def test_committed_trees_give_the_same_preview_reading_only_what_differs(repo: Path) -> None:
    """`--rendered` (the workflow's call once `render --check` passed) compares the committed
    rendered/ trees, reading only the files git lists as different, with the same result."""
    assert run(repo, "diff", "--rendered").code == 2  # the base has no rendered/: said, not guessed
    assert run(repo, "render").code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "rendered")
    _edit(repo / "teams/speech.yaml", "gpus: 6", "gpus: 4")
    _edit(repo / "clusters/dev.yaml", "  engine: flux\n", "  engine: flux\n  revision: release-2\n")
    _, compiled = diff_json(repo)
    assert run(repo, "render").code == 0
    _, committed = diff_json(repo, "--rendered")
    for key in ("summary", "clusters", "changes", "capacity", "pools", "risks"):
        assert committed[key] == compiled[key], key
    assert committed["notes"][0].startswith("compared rendered/ as committed (3 file(s) differ)")


def test_a_committed_preview_is_the_same_forked_spawned_or_on_one_core(repo: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleets of a `--rendered` diff load in a forked helper (Linux, no other thread), a
    spawned one (elsewhere, or under a threaded caller), or this process (one core): one report."""
    import multiprocessing

    from generator.diff import run as diff_run

    assert run(repo, "render").code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "rendered")
    _edit(repo / "teams/speech.yaml", "gpus: 6", "gpus: 4")
    assert run(repo, "render").code == 0
    reports = {}
    for how in ("fork", "spawn", "one core"):
        with monkeypatch.context() as patch:
            if how == "one core":
                patch.setattr(diff_run.os, "cpu_count", lambda: 1)
                patch.setattr(diff_run, "pool_context", lambda: pytest.fail("no helper on one core"))
            else:
                patch.setattr(diff_run, "pool_context", lambda how=how: multiprocessing.get_context(how))
            code, reports[how] = diff_json(repo, "--rendered")
        assert code == 1, how
        assert reports[how]["capacity"] and reports[how]["changes"], how
    assert reports["fork"] == reports["spawn"] == reports["one core"]


def test_a_committed_preview_of_a_fleet_that_fails_its_checks_names_the_file_and_line(repo: Path) -> None:
    """The fleets of a `--rendered` diff load in a helper process: a finding there is still the
    error, at file and line, exit 2, and nothing is printed as if the diff had run."""
    assert run(repo, "render").code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "rendered")
    _edit(repo / "teams/speech.yaml", "l4: {gpus: 6, lendingLimit: 2}",
          "l4: {gpus: 6, lendingLimit: 2}\n    a100x: {gpus: 1}")
    result = run(repo, "diff", "--rendered", "--format", "json")
    assert result.code == 2, result
    assert re.search(r"^teams/speech\.yaml:10: quotas\.", result.err, re.M), result.err
    assert result.out == ""


def test_committed_trees_of_a_fleet_in_a_subfolder_show_files_added_untracked_and_removed(tmp_path: Path) -> None:
    """The committed preview of a fleet below a repository's top: git's status of each differing file
    says which side holds it (a new team's files untracked, a removed team's deleted, one changed),
    and the base's inputs come from the subfolder's own trees; the same result as compiling."""
    top = tmp_path / "mono"
    fleet = top / "platform" / "fleet"
    fleet.mkdir(parents=True)
    for name in ("teams", "clusters"):
        shutil.copytree(REPO / name, fleet / name)
    shutil.copy(REPO / "fleet.yaml", fleet / "fleet.yaml")
    assert run(fleet, "render").code == 0
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    (fleet / "teams/recsys.yaml").unlink()
    shutil.copy(fleet / "teams/speech.yaml", fleet / "teams/speech2.yaml")
    _edit(fleet / "teams/speech2.yaml", "name: speech\n", "name: speech2\n")
    _edit(fleet / "teams/speech2.yaml", "l4: {gpus: 6, lendingLimit: 2}", "l4: {gpus: 2}")
    _edit(fleet / "teams/vision.yaml", "h100: {gpus: 32, borrowingLimit: 64}", "h100: {gpus: 24, borrowingLimit: 64}")
    code, compiled = diff_json(fleet)
    assert code == 1, compiled
    assert run(fleet, "render").code == 0
    code, committed = diff_json(fleet, "--rendered")
    assert code == 1
    for key in ("summary", "clusters", "changes", "capacity", "pools", "risks"):
        assert committed[key] == compiled[key], key
    actions = {c["action"] for c in committed["changes"]}
    assert actions == {"add", "change", "destroy"}, actions


def test_a_pool_that_shrinks_shrinks_what_the_root_cohort_lends(repo: Path) -> None:
    _edit(repo / "clusters/prod-west.yaml", "    nodes: 16\n", "    nodes: 8\n")
    code, report = diff_json(repo)
    # the MultiKueue manager over prod-west lends the same GPUs (the GPU ResourceQuotas follow the pool too)
    hub, change = [c for c in report["changes"] if c["kind"] == "Cohort"]
    assert code == 1 and (change["kind"], change["name"]) == ("Cohort", "prod-west")
    assert ("72", "8") in [(f["old"], f["new"]) for f in change["fields"]]
    assert (hub["cluster"], hub["kind"], hub["name"]) == ("hub", "Cohort", "hub")
    assert ("120", "56") in [(f["old"], f["new"]) for f in hub["fields"]]


@pytest.mark.parametrize("edit", [
    ("teams/speech.yaml", "gpus: 6", "gpus: 4"),  # a team's quota: every cluster it is in
    ("clusters/prod-west.yaml", "    nodes: 16\n", "    nodes: 8\n"),  # a MultiKueue worker: hub counts it too
    ("clusters/dev.yaml", "    nodes: 2\n", "    nodes: 3\n"),  # a cluster alone
])
def test_the_capacity_table_works_out_only_clusters_whose_inputs_are_not_shared(
        tmp_path: Path, edit: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The two sides of a `--rendered` preview share every byte-identical file's loaded object;
    a cluster whose file and teams are all shared is left out of the capacity table's work, with
    the same table as working out every cluster of both sides."""
    from generator.capacity import pool_capacities
    from generator.config.fleet import LoadCache, read_fleet
    from generator.diff import impact

    before, after = tmp_path / "before", tmp_path / "after"
    for side in (before, after):
        for name in ("teams", "clusters"):
            shutil.copytree(REPO / name, side / name)
    _edit(after / edit[0], edit[1], edit[2])
    cache: LoadCache = {}
    shared = read_fleet(before, cache=cache), read_fleet(after, cache=cache)
    worked: list[str | None] = []
    monkeypatch.setattr(impact, "pool_capacities", lambda fleet, cluster=None: worked.append(cluster) or
                        pool_capacities(fleet, cluster))
    table = impact.capacity_impact(*shared)
    assert table and len(worked) < 2 * len(shared[0].clusters)
    worked.clear()
    assert impact.capacity_impact(read_fleet(before), read_fleet(after)) == table  # nothing shared
    assert len(worked) == 2 * len(shared[0].clusters)
