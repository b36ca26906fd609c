"""Issue 52: the work area (.fleetgen/: staging, journal, switch) and the render index are fleetgen's
own, and a pull request cannot stand in for them.

A commit can plant anything under .fleetgen/ (links at every component a switch renames through)
and, where the cache folder lies inside the repository, the render index. Every test here failed
on the code before the fix: the first ones moved a file out of the repository or into
.github/CODEOWNERS, the others passed a tampered tree or ended in a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from generator import emit, incremental, proofs, repofiles
from tests.conftest import REPO, git, interrupted_switch, run, snapshot

SCRIPT = b"#!/bin/sh\necho planted\n"


@pytest.fixture
def owned(fleet_root: Path) -> Path:
    """The example fleet with fleet.yaml, so a render writes .github/CODEOWNERS too; rendered."""
    shutil.copy(REPO / "fleet.yaml", fleet_root / "fleet.yaml")
    assert run(fleet_root, "render").code == 0
    return fleet_root


def _bin(tmp_path: Path) -> Path:
    """A folder outside the repository that a user runs programs from (~/.local/bin)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    return folder


# What a pull request commits under .fleetgen/: a journal and a stage with one component linked
# out of the repository. Each returns the journal; `outside` is the linked folder.

def _old_removes_git(root: Path, outside: Path) -> dict[str, object]:
    """`old` linked out, the journal removing `rendered/git`, an executable committed there."""
    (root / "rendered/git").write_bytes(SCRIPT)
    (root / "rendered/git").chmod(0o755)
    (root / ".fleetgen/stage-x").mkdir()
    (root / ".fleetgen/stage-x/old").symlink_to(outside, target_is_directory=True)
    return {"stage": "stage-x", "replace": [], "remove": ["git"]}


def _old_takes_a_cluster(root: Path, outside: Path) -> dict[str, object]:
    """`old` linked out, the journal replacing `rendered/dev`: the whole cluster moves out."""
    (root / ".fleetgen/stage-x/new/dev").mkdir(parents=True)
    (root / ".fleetgen/stage-x/old").symlink_to(outside, target_is_directory=True)
    return {"stage": "stage-x", "replace": ["dev"], "remove": []}


def _files_bring_codeowners(root: Path, outside: Path) -> dict[str, object]:
    """`files` linked out: a file outside the repository is renamed into .github/CODEOWNERS."""
    (outside / "0").write_text("* @attacker\n")
    (root / ".fleetgen/stage-x").mkdir()
    (root / ".fleetgen/stage-x/files").symlink_to(outside, target_is_directory=True)
    return {"stage": "stage-x", "replace": [], "remove": [], "files": [".github/CODEOWNERS"]}


def _old_files_take_codeowners(root: Path, outside: Path) -> dict[str, object]:
    """`old-files` linked out: the repository's CODEOWNERS is renamed out of it."""
    (root / ".fleetgen/stage-x/files").mkdir(parents=True)
    (root / ".fleetgen/stage-x/files/0").write_text("* @attacker\n")
    (root / ".fleetgen/stage-x/old-files").symlink_to(outside, target_is_directory=True)
    return {"stage": "stage-x", "replace": [], "remove": [], "files": [".github/CODEOWNERS"]}


PLANTS = [pytest.param(_old_removes_git, id="old-removes-git"),
          pytest.param(_old_takes_a_cluster, id="old-takes-a-cluster"),
          pytest.param(_files_bring_codeowners, id="files-bring-codeowners"),
          pytest.param(_old_files_take_codeowners, id="old-files-take-codeowners")]


@pytest.mark.parametrize("committed", [True, False], ids=["git-checkout", "no-git"])
@pytest.mark.parametrize("plant", PLANTS)
def test_a_planted_stage_linked_out_of_the_repository_moves_nothing(
        owned: Path, tmp_path: Path, plant: Callable[[Path, Path], dict[str, object]], committed: bool) -> None:
    """The attack of issue 52: `fleetgen render` (or the pre-commit hook) on a pull request's
    checkout. In a git checkout git says the stage was committed; without git (an unpacked
    archive) the cache folder holds no token for it. Either way: one line, exit 2, nothing moved."""
    root, outside = owned, _bin(tmp_path)
    (root / emit.WORK).mkdir(exist_ok=True)
    journal = plant(root, outside)
    (root / emit.WORK / emit.JOURNAL).write_text(json.dumps(journal))
    if committed:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A", "-f")
        git(root, "commit", "-q", "-m", "pull request")
    before = snapshot(root / "rendered"), (root / ".github/CODEOWNERS").read_bytes()
    result = run(root, "render")
    assert result.code == 2, result.out + result.err
    lines = result.err.strip().splitlines()
    said = "is tracked by git" if committed else "this checkout's fleetgen did not make"
    assert len(lines) == 1 and said in lines[0], result.err
    assert sorted(p.name for p in outside.iterdir()) == (["0"] if plant is _files_bring_codeowners else [])
    assert (snapshot(root / "rendered"), (root / ".github/CODEOWNERS").read_bytes()) == before


def test_anything_git_tracks_under_the_work_area_is_refused(fleet_root: Path) -> None:
    """A committed file under .fleetgen/, link or not: refused before the lock file is opened."""
    git(fleet_root, "init", "-q", "-b", "main")
    (fleet_root / emit.WORK).mkdir()
    (fleet_root / emit.WORK / "lock").write_text("committed\n")
    git(fleet_root, "add", "-A", "-f")
    git(fleet_root, "commit", "-q", "-m", "pull request")
    for args in (["render"], ["render", "--check"], ["render", "--full"]):
        result = run(fleet_root, *args)
        assert result.code == 2, (args, result.out, result.err)
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0] == (
            ".fleetgen/lock is tracked by git; .fleetgen/ is fleetgen's own scratch area, which fleetgen "
            f"never takes from a commit: {emit.WORK_FIX}"), result.err
    assert (fleet_root / emit.WORK / "lock").read_text() == "committed\n"


def test_a_linked_lock_file_is_refused_by_name(fleet_root: Path, tmp_path: Path) -> None:
    """Without git to ask (an unpacked archive), a link planted as .fleetgen/lock: the kernel
    refuses to open it (O_NOFOLLOW through the work area's descriptor), and render and --check
    both say which path is a link; the file it points to is not written."""
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (fleet_root / emit.WORK).mkdir()
    (fleet_root / emit.WORK / emit.LOCK).symlink_to(victim)
    for args in (["render"], ["render", "--check"]):
        result = run(fleet_root, *args)
        assert result.code == 2 and result.err.strip().splitlines() == [
            f"{emit.WORK}/{emit.LOCK} is a symbolic link; fleetgen does not follow links in the repository (one "
            "could read or write outside it): replace it with the real file or folder"], (args, result.err)
    assert victim.read_text() == "keep\n"


# --- a stage that is fleetgen's own, swapped for links afterwards: the kernel refuses ----------

SWAPS = ["old", "files", "old-files"]


@pytest.mark.parametrize("component", SWAPS)
def test_every_rename_of_a_genuine_switch_refuses_a_link_on_the_way(owned: Path, tmp_path: Path,
                                                                     component: str) -> None:
    """A render killed before its switch, then one component of its own stage replaced by a link
    out of the repository (by a racing process, say): the next run's renames go through folders
    opened with O_NOFOLLOW|O_DIRECTORY, so the kernel refuses the link and nothing moves."""
    root, outside = owned, _bin(tmp_path)
    wanted = {**snapshot(root / "rendered"), "dev/extra.yaml": b"# new\n"}
    owners = (root / ".github/CODEOWNERS").read_bytes()
    interrupted_switch(root, wanted, ["dev"], 0, {".github/CODEOWNERS": owners + b"# new\n"})
    (stage,) = (root / emit.WORK).glob("stage-*")
    (stage / "old-files").mkdir(exist_ok=True)
    shutil.copytree(stage / component, outside / component)
    shutil.rmtree(stage / component)
    (stage / component).symlink_to(outside / component, target_is_directory=True)
    planted = snapshot(outside)
    before = snapshot(root / "rendered"), (root / ".github/CODEOWNERS").read_bytes()
    with pytest.raises(repofiles.UnsafePath, match=f"{emit.WORK}/{stage.name}/{component} is a symbolic link"):
        emit.recover(root)
    assert snapshot(outside) == planted
    assert (snapshot(root / "rendered"), (root / ".github/CODEOWNERS").read_bytes()) == before


def test_a_genuine_interrupted_switch_is_still_finished(owned: Path) -> None:
    """The stage is this checkout's own (its token in the cache folder): the next run finishes it,
    CODEOWNERS included, and forgets the token."""
    root = owned
    wanted = {**snapshot(root / "rendered"), "dev/extra.yaml": b"# new\n"}
    owners = (root / ".github/CODEOWNERS").read_bytes() + b"# new\n"
    interrupted_switch(root, wanted, ["dev"], 1, {".github/CODEOWNERS": owners})
    (stage,) = (root / emit.WORK).glob("stage-*")
    assert (root / emit.WORK / emit.JOURNAL).is_file() and proofs.issued_stages(root) == [stage.name]
    emit.recover(root)
    assert snapshot(root / "rendered") == wanted and (root / ".github/CODEOWNERS").read_bytes() == owners
    assert not list((root / emit.WORK).glob("stage-*")) and not (root / emit.WORK / emit.JOURNAL).exists()
    assert proofs.issued_stages(root) == []


# --- the render index: input like any other -----------------------------------------------------

TAMPERED = "rendered/dev/teams/speech/clusterqueue-speech.yaml"


def _forge_entry(root: Path) -> None:
    """Tamper with a rendered file and make the index's entry for it say so (what a forged index
    does: its content hash is the tampered file's)."""
    path = root / TAMPERED
    path.write_bytes(path.read_bytes().replace(b"nominalQuota: '6'", b"nominalQuota: '600'"))
    index = incremental.Index.load(root)
    entries = index._top_entries("dev")
    assert entries is not None
    st = path.stat()
    entries[TAMPERED.removeprefix("rendered/")] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                                                   incremental.content_hash(path.read_bytes()))
    walked = incremental.stat_top(str(root / "rendered"), "dev")
    assert walked is not None
    index.tops["dev"] = incremental.TopRecord(walked.digest, 0, len(entries))
    index._layouts["dev"], index._entries["dev"] = walked.paths, entries
    index._dirty.add("dev")
    index.save(root)


def test_an_index_edited_without_the_key_cannot_pass_a_tampered_tree(fleet_root: Path) -> None:
    """The per-file entries of a folder, rewritten in the cache folder by hand (no seal: the
    writer does not hold the key): not used, the folder is compiled and compared."""
    assert run(fleet_root, "render").code == 0
    record = incremental._top_file(incremental._record_dir(fleet_root), "dev")
    head, newline, body = record.read_text().rpartition("\n")
    data = json.loads(body)
    path = fleet_root / TAMPERED
    path.write_bytes(path.read_bytes().replace(b"nominalQuota: '6'", b"nominalQuota: '600'"))
    st = path.stat()
    data["files"][TAMPERED.removeprefix("rendered/")] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                                                        incremental.content_hash(path.read_bytes())]
    record.write_text(head + newline + json.dumps(data, separators=(",", ":")))
    result = run(fleet_root, "render", "--check")
    assert result.code == 1 and f"~ {TAMPERED.removeprefix('rendered/')}" in result.out, result.out


def test_an_index_committed_with_the_repository_is_never_taken(fleet_root: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache folder inside the repository (FLEETGEN_CACHE_DIR=.cache, say, for a CI cache): a
    pull request commits an index there, key and all, that vouches for its tampered tree. git
    says the files are tracked, and none of them is trusted."""
    monkeypatch.setenv("FLEETGEN_CACHE_DIR", str(fleet_root / ".cache"))
    git(fleet_root, "init", "-q", "-b", "main")
    assert run(fleet_root, "render").code == 0
    _forge_entry(fleet_root)
    assert run(fleet_root, "render", "--check").code == 0  # not yet committed: the user's own cache
    git(fleet_root, "add", "-A", "-f", "teams", "clusters", "rendered", ".cache")
    git(fleet_root, "commit", "-q", "-m", "pull request")
    result = run(fleet_root, "render", "--check")
    assert result.code == 1 and f"~ {TAMPERED.removeprefix('rendered/')}" in result.out, result.out


def _short_entry(root: Path, index: incremental.Index) -> None:
    entries = index._top_entries("dev")
    assert entries is not None
    rel = TAMPERED.removeprefix("rendered/")
    entries[rel] = (entries[rel][0],)  # type: ignore[assignment]
    walked = incremental.stat_top(str(root / "rendered"), "dev")
    assert walked is not None
    index._layouts["dev"], index._entries["dev"] = walked.paths, entries
    index._dirty.add("dev")
    os.utime(root / TAMPERED)  # new stat data: the entry is consulted


def _short_codeowners(root: Path, index: incremental.Index) -> None:
    index.codeowners = ((root / ".github/CODEOWNERS").stat().st_size,)  # type: ignore[assignment]


@pytest.mark.parametrize("malform", [_short_entry, _short_codeowners], ids=["file-entry", "codeowners"])
def test_a_malformed_index_is_ignored_never_a_traceback(owned: Path, malform: Callable[
        [Path, incremental.Index], None]) -> None:
    """Entries of the wrong shape (here recorded by the index itself, as a bug or a torn write
    would): the record is not used, and render and --check do the full work."""
    index = incremental.Index.load(owned)
    malform(owned, index)
    index.save(owned)
    for args in (["render", "--check"], ["render"]):
        result = run(owned, *args)
        assert result.code == 0 and "Traceback" not in result.err and "internal error" not in result.err, result


def test_a_render_that_cannot_record_its_stage_stages_nothing(fleet_root: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """No writable cache folder, no proof of a stage: the render stops before staging, in one
    clear line (exit 2), rather than leave a switch that the next run could not tell from a
    planted one."""
    blocker = fleet_root.parent / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("FLEETGEN_CACHE_DIR", str(blocker / "cache"))
    (fleet_root / "teams/speech.yaml").write_text((fleet_root / "teams/speech.yaml").read_text()
                                                  .replace("gpus: 6", "gpus: 5"))
    before = snapshot(fleet_root / "rendered")
    result = run(fleet_root, "render")
    assert result.code == 2 and "Traceback" not in result.err, result.err
    last = result.err.strip().splitlines()[-1]  # after the build's notes and warnings
    assert last.startswith("cannot record the render's stage in ") and "FLEETGEN_CACHE_DIR" in last, result.err
    assert snapshot(fleet_root / "rendered") == before and not list((fleet_root / emit.WORK).glob("stage-*"))


# --- init's journal: input like any other -------------------------------------------------------

@pytest.mark.parametrize("moves", [[["aside", "schemas"]], [["in", "../outside"]], [["in", ".github/workflows"]],
                                   [["swap", "teams"]], [["aside", "teams", "x"]], "teams", [["aside", 1]]],
                         ids=["not-switched", "leaves", "workflows", "kind", "three", "not-a-list", "not-text"])
def test_an_init_journal_naming_other_moves_is_refused_even_for_a_proven_stage(fleet_root: Path,
                                                                               moves: object) -> None:
    """The journal of an init's switch names its stage, token and moves; a move other than the paths and
    kinds `fleetgen init` makes is refused (one line, exit 2) before anything is moved, even when the
    stage and token are genuine."""
    stage, token = emit.issue_init_stage(fleet_root)
    (fleet_root / emit.WORK / stage / "new/teams").mkdir(parents=True)
    (fleet_root / emit.WORK / emit.JOURNAL).write_text(json.dumps({"stage": stage, "token": token, "moves": moves}))

    def state() -> dict[str, bytes]:  # all but the lock file, which a render writes its pid into
        return {rel: data for rel, data in snapshot(fleet_root).items() if rel != f"{emit.WORK}/{emit.LOCK}"}

    before = state()
    result = run(fleet_root, "render")
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert "fleetgen acts only on a journal it wrote itself" in result.err and '"moves"' in result.err, result.err
    assert state() == before and proofs.issued_stages(fleet_root) == [stage]
