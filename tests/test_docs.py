"""Issue 29: the manual is a docs site beside the code, built strictly, with reference pages generated
from the code and checked current; the README is a front page."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.docs.reference import pages, stale_pages
from tests.conftest import REPO


def test_generated_reference_pages_are_current() -> None:
    import difflib

    stale = stale_pages(REPO)
    shown = "".join(line for rel in stale for line in list(difflib.unified_diff(
        (REPO / rel).read_text().splitlines(True), pages()[rel].splitlines(True), rel, "now"))[:40])
    assert stale == [], f"run `python3 -m generator.docs.reference --write`:\n{shown}"
    assert set(pages()) == {f"docs/reference/{name}.md" for name in ("config", "alerts", "cli", "diff-json",
                                                                      "risks", "python-api", "job-kinds", "releases",
                                                                      "member-rights")}


def test_reference_pages_cover_every_command_and_key() -> None:
    from generator.cli import cli
    from generator.config.cluster import ClusterConfig

    text = pages()["docs/reference/cli.md"]
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        assert f"## `fleetgen {name}`" in text
    config = pages()["docs/reference/config.md"]
    for field in ClusterConfig.model_fields.values():
        assert f"| `{field.alias}` |" in config


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    links = re.findall(r"\]\(((?!https?:)[^)#]+)\)", readme)
    assert links and all((REPO / link).is_file() for link in links), [x for x in links if not (REPO / x).is_file()]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """mkdocs itself judges the site: a broken link, a page missing from the nav or a bad anchor fails."""
    if shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists():
        pytest.fail("mkdocs and mkdocs-material are part of the test extras")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    for page in ("index.html", "getting-started/index.html", "reference/config/index.html",
                 "reference/cli/index.html", "how-to/reviews/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_the_member_rights_page_lists_every_rule_a_cluster_grants() -> None:
    """Every rule of the rendered member roles is a row of the rights table the page is made from, and the page
    says where each holds: nothing granted goes unlisted, and a cluster-file switch is named."""
    from generator.compile.member_rights import RIGHTS

    page = (REPO / "docs/reference/member-rights.md").read_text()
    listed = {(r.api_group, tuple(r.resources), tuple(r.verbs)) for r in RIGHTS}
    for rel in ("prod-east/teams/clusterrole-fleetgen-team-member.yaml",
                "prod-east/teams/ml-research/clusterrole-fleetgen-members-ml-research.yaml",
                "prod-east/teams/clusterrole-fleetgen-priority-reader.yaml"):
        for rule in yaml.safe_load((REPO / "rendered" / rel).read_text())["rules"]:
            assert (rule["apiGroups"][0], tuple(rule["resources"]), tuple(rule["verbs"])) in listed, (rel, rule)
    assert "`tenancy.membersReadNodes: true`" in page and "`operators.trainer: true`" in page
