"""Issue 29: versioned releases. The changelog's newest section, the README's pinned tag and the images
the manifests name all follow `generator.__version__`; pre-commit reads our hook files as valid."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from generator import __version__
from tests.conftest import REPO
from tests.doc_blocks import REVIEWS, reviews_yaml_block


def test_the_changelog_leads_with_this_version() -> None:
    sections = re.findall(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert sections and sections[0][0] == __version__, "add a CHANGELOG.md section for the version you set"
    assert [s[1] for s in sections] == sorted((s[1] for s in sections), reverse=True)


def test_the_readme_pins_this_release() -> None:
    assert f"rev: v{__version__}" in REVIEWS.read_text()
    for page in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        assert not re.search(r"rev: v(?!" + re.escape(__version__) + r"\b)\d", page.read_text()), page


@pytest.fixture
def pre_commit() -> str:
    found = shutil.which("pre-commit")
    if found is None:
        pytest.fail("pre-commit is part of the test extras")
    return found


def test_pre_commit_reads_our_hook_manifest_and_the_readme_config(pre_commit: str, tmp_path: Path) -> None:
    manifest = subprocess.run([pre_commit, "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
                              capture_output=True, text=True)
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(reviews_yaml_block("- [pre-commit](https://pre-commit.com) hooks"))
    checked = subprocess.run([pre_commit, "validate-config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
