"""Issue 28: what a pull request can plant in the repository, one test each.

The journal, the work area, CODEOWNERS, workflow commands, mentions, YAML tags, invisible
characters, non-regular files and a zero slice: every test here failed on the code before the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator import emit
from generator.diff.comment import md
from generator.terminal import safe_text
from tests.conftest import REPO, edit, fd_path, interrupted_switch, run, snapshot


@pytest.fixture
def fleet_with_owners(fleet_root: Path) -> Path:
    """The example fleet with fleet.yaml and its CODEOWNERS, rendered."""
    shutil.copy(REPO / "fleet.yaml", fleet_root / "fleet.yaml")
    (fleet_root / ".github").mkdir()
    shutil.copy(REPO / ".github/CODEOWNERS", fleet_root / ".github/CODEOWNERS")
    return fleet_root


def _plant(root: Path, journal: object) -> None:
    work = root / emit.WORK
    work.mkdir(exist_ok=True)
    (work / emit.JOURNAL).write_text(journal if isinstance(journal, str) else json.dumps(journal))


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    (victim / "data").mkdir(parents=True)
    (victim / "data/precious.txt").write_text("keep me")
    return victim


# --- the journal: hostile until checked -------------------------------------------------------

PLANTED = [
    pytest.param(lambda v: {"stage": f"../../{v.name}", "replace": [], "remove": ["dev"]}, "names the stage",
                 id="stage-outside"),
    pytest.param(lambda v: {"stage": "stage-x", "replace": [], "remove": ["../../victim/data"]}, '"remove"',
                 id="remove-outside"),
    pytest.param(lambda v: {"stage": "stage-x", "replace": ["../victim"], "remove": []}, '"replace"',
                 id="replace-outside"),
    pytest.param(lambda v: {"stage": "stage-x", "replace": [], "remove": [], "files": ["../victim/data"]},
                 '"files"', id="files-outside"),
    pytest.param(lambda v: ["stage-x"], "exactly the keys", id="a-list"),
    pytest.param(lambda v: {"stage": 1, "replace": [], "remove": []}, "names the stage", id="stage-a-number"),
    pytest.param(lambda v: {"stage": "stage-x", "replace": "dev", "remove": []}, '"replace"', id="replace-text"),
    pytest.param(lambda v: "{not json", "is not JSON", id="not-json"),
    pytest.param(lambda v: {"stage": "stage-gone", "replace": [], "remove": ["dev"]}, "does not exist",
                 id="stage-missing"),
]


@pytest.mark.parametrize("check", [False, True], ids=["render", "check"])
@pytest.mark.parametrize(("journal", "said"), PLANTED)
def test_a_planted_journal_is_refused_and_nothing_moves(fleet_root: Path, tmp_path: Path, journal: object,
                                                         said: str, check: bool) -> None:
    victim = _victim(tmp_path)
    (fleet_root / emit.WORK / "stage-x" / "new").mkdir(parents=True)
    _plant(fleet_root, journal(victim))  # type: ignore[operator]
    before = snapshot(fleet_root / "rendered")
    result = run(fleet_root, "render", *(["--check"] if check else []))
    assert result.code == 2, result.out + result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "fleetgen acts only on a journal it wrote itself" in lines[0]
    assert "Traceback" not in result.err
    assert (victim / "data/precious.txt").read_text() == "keep me"
    assert snapshot(fleet_root / "rendered") == before


def test_a_journal_through_a_linked_stage_is_refused(fleet_root: Path, tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    work = fleet_root / emit.WORK
    work.mkdir()
    (work / "stage-abc").symlink_to(victim)
    _plant(fleet_root, {"stage": "stage-abc", "replace": ["data"], "remove": []})
    result = run(fleet_root, "render")
    assert result.code == 2 and "symbolic link" in result.err
    assert (victim / "data/precious.txt").read_text() == "keep me"
    assert (work / "stage-abc").is_symlink()  # recover() drops only real stage folders


def test_check_never_finishes_a_switch_it_only_reports_it(fleet_root: Path) -> None:
    """A genuine interrupted switch: --check moves nothing and says so; render then finishes it."""
    wanted = {**snapshot(fleet_root / "rendered"), "dev/extra.yaml": b"# from the interrupted render\n"}
    interrupted_switch(fleet_root, wanted, ["dev"], 0)
    work = fleet_root / emit.WORK
    (stage,) = work.glob("stage-*")
    before = snapshot(fleet_root / "rendered")
    result = run(fleet_root, "render", "--check")
    assert "a render was interrupted during its switch" in result.err
    assert snapshot(fleet_root / "rendered") == before and (work / emit.JOURNAL).is_file() and stage.is_dir()
    assert run(fleet_root, "render").code == 0
    assert not (work / emit.JOURNAL).exists()
    assert run(fleet_root, "render", "--check").code == 0


# --- CODEOWNERS inside the transaction ---------------------------------------------------------

def test_codeowners_and_tree_switch_together_or_not_at_all(fleet_with_owners: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = fleet_with_owners
    assert run(root, "render").code == 0
    edit(root, "teams/speech.yaml", 'owners: ["@acme/speech"]', 'owners: ["@acme/speech-new"]')
    edit(root, "teams/speech.yaml", "l4: {gpus: 6", "l4: {gpus: 5")
    before_tree, before_owners = snapshot(root / "rendered"), (root / ".github/CODEOWNERS").read_bytes()
    real = os.rename
    renamed: list[str] = []

    def rename(src: object, dst: object, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        src, dst = fd_path(src, src_dir_fd), fd_path(dst, dst_dir_fd)
        renamed.append(dst)
        if dst.endswith("rendered/dev") and "/new/" in src:  # CODEOWNERS switched first; the tree fails
            raise OSError(30, "Read-only file system")
        real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    result = run(root, "render")
    monkeypatch.setattr(os, "rename", real)
    assert result.code == 2 and any(r.endswith("CODEOWNERS") for r in renamed)
    assert snapshot(root / "rendered") == before_tree
    assert (root / ".github/CODEOWNERS").read_bytes() == before_owners  # rolled back with the tree
    assert run(root, "render").code == 0
    assert "@acme/speech-new" in (root / ".github/CODEOWNERS").read_text()


def test_removing_fleet_yaml_is_refused_while_its_codeowners_remains(fleet_with_owners: Path) -> None:
    root = fleet_with_owners
    (root / "fleet.yaml").unlink()
    for args in (["render"], ["render", "--check"]):
        result = run(root, *args)
        assert result.code == 2, result.out
        assert "fleet.yaml: is missing, but .github/CODEOWNERS was generated from it" in result.err
    (root / ".github/CODEOWNERS").unlink()  # both gone: a deliberate choice
    assert run(root, "render", "--check").code == 0


# --- text that reaches a CI log or a pull-request comment --------------------------------------

@pytest.mark.parametrize("line", ["team x ##[error]pwned", "a ##vso[task.setvariable variable=x]1", "::error::x"])
def test_workflow_commands_are_defused_anywhere_in_a_line(line: str) -> None:
    for color in (False, True):
        out = safe_text(line, color)
        assert "##[" not in out and "##vso[" not in out and not out.lstrip().startswith("::"), out


@pytest.mark.parametrize(("text", "live"), [("ping @acme/platform", "@acme"), ("see #123", "#123"),
                                            ("GH-42 fixed", "GH-42"), ("org/repo#7", "#7")])
def test_mentions_and_references_in_team_text_stay_inert(text: str, live: str) -> None:
    out = md(text)
    assert live not in out and "&#8203;" in out


# --- input files ------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "tag"), [('!!int "0x10"', "!!int"), ("!!str 010", "!!str"),
                                            ("!!float 1_0", "!!float")])
def test_yaml_tags_are_refused_in_team_files(fleet_root: Path, value: str, tag: str) -> None:
    edit(fleet_root, "teams/speech.yaml", "l4: {gpus: 6,", f"l4: {{gpus: {value},")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert result.err.startswith(f"teams/speech.yaml:9: quotas.dev.l4.gpus: unsupported YAML tag '{tag}'"), result.err


@pytest.mark.parametrize("char", ["\ufe0f", "\u2800", "\ua789", "\u3164", "\u034f"])
def test_invisible_and_lookalike_characters_are_refused_in_subjects(fleet_root: Path, char: str) -> None:
    edit(fleet_root, "teams/speech.yaml", "members: {groups: [speech]}", f'members: {{groups: ["spe{char}ech"]}}')
    result = run(fleet_root, "render")
    assert result.code == 2, result.out
    assert f"U+{ord(char):04X}" in result.err and "members.groups[0]" in result.err


def test_a_fifo_in_place_of_a_team_file_is_refused_not_waited_on(fleet_root: Path) -> None:
    (fleet_root / "teams/speech.yaml").unlink()
    os.mkfifo(fleet_root / "teams/speech.yaml")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "generator", "--root", str(fleet_root), "render", "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and time.monotonic() - started < 60
    assert "teams/speech.yaml: is not a regular file" in proc.stderr, proc.stderr


def test_a_topology_slice_of_size_zero_is_a_finding(fleet_root: Path) -> None:
    edit(fleet_root, "teams/ml-research.yaml", "slice: {level: cloud.provider.com/topology-block, size: 4}",
         "slice: {level: cloud.provider.com/topology-block, size: 0}")
    result = run(fleet_root, "render")
    assert result.code == 2 and "ZeroDivisionError" not in result.err
    assert result.err.startswith("teams/ml-research.yaml:51: jobProfiles[2].topology.slice.size:"), result.err
