"""The render index (issue 33): `render` and `render --check` skip what inputs, generator and tree
show unchanged since the last render, and give exactly what the full path gives."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from generator import incremental
from generator.validate.pipeline import Options
from tests.conftest import REPO, edit, run, snapshot

FAST = "inputs, generator and tree unchanged since the last render"


def test_second_render_is_a_no_op(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    before = {p: p.stat().st_mtime_ns for p in (fleet_root / "rendered").rglob("*.yaml")}
    again = run(fleet_root, "render")
    assert again.code == 0 and FAST in again.out
    assert {p: p.stat().st_mtime_ns for p in (fleet_root / "rendered").rglob("*.yaml")} == before


def test_any_input_change_does_the_full_work(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")
    result = run(fleet_root, "render")
    # its ClusterQueue, and its file as dev publishes it
    assert result.code == 0 and FAST not in result.out and "2 changed" in result.out
    assert "nominalQuota: '5'" in (fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml").read_text()


def test_a_hand_edited_tree_is_repaired(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    good = snapshot(fleet_root / "rendered")
    target = fleet_root / "rendered/prod-east/kueue/resourceflavor-h100.yaml"
    target.write_text("edited by hand\n")
    result = run(fleet_root, "render")
    assert result.code == 0 and FAST not in result.out
    assert snapshot(fleet_root / "rendered") == good


def test_check_takes_the_shortcut_but_full_and_single_cluster_never_do(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    assert FAST in run(fleet_root, "render", "--check").out
    full = run(fleet_root, "render", "--check", "--full")
    assert full.code == 0 and FAST not in full.out and "files compared" in full.out, full.out
    assert FAST not in run(fleet_root, "render", "--cluster", "dev").out


def test_check_compiles_only_the_clusters_an_edit_touches(fleet_root: Path) -> None:
    from generator import render

    assert run(fleet_root, "render").code == 0
    edit(fleet_root, "clusters/dev.yaml", "nodes: ", "nodes: 1")  # dev's node count, nobody else's input
    others = sorted(p.stem for p in (fleet_root / "clusters").glob("*.yaml") if p.stem != "dev")
    result = render.build(fleet_root, reuse=render.key_of(Options()), index=incremental.Index.load(fleet_root))
    assert sorted(result.reused) == others and sorted(result.compiled) == ["dev"]
    check = run(fleet_root, "render", "--check")
    assert check.code == 1 and {line.split()[1].split("/")[0] for line in check.out.splitlines()
                                if line.startswith("  ")} <= {"dev", "gitops"}, check.out


def test_check_catches_a_same_size_edit_with_its_mtime_put_back(fleet_root: Path) -> None:
    assert run(fleet_root, "render").code == 0
    path = fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml"
    before, st = path.read_bytes(), path.stat()
    path.write_bytes(before.replace(b"nominalQuota: '6'", b"nominalQuota: '9'"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    result = run(fleet_root, "render", "--check")
    assert result.code == 1 and "~ dev/teams/speech/clusterqueue-speech.yaml" in result.out, result.out


def test_a_folder_is_trusted_by_its_stat_data_unless_racy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in git's index: clean stat data is enough; a file changed in the record's second is read
    and hashed; a same-size edit with its mtime put back still changed its ctime."""
    (tmp_path / "rendered/c").mkdir(parents=True)
    path = tmp_path / "rendered/c/a.yaml"
    path.write_bytes(b"a: 1\n")
    index = incremental.Index(tmp_path)
    index.record(tmp_path, {"c/a.yaml": b"a: 1\n"}, {}, None)
    index.save(tmp_path)
    reads: list[Path] = []
    real_read = incremental._read
    monkeypatch.setattr(incremental, "_read", lambda p: reads.append(p) or real_read(p))

    def loaded(written_ns: int) -> incremental.Index:
        again = incremental.Index.load(tmp_path)
        again.written_ns = written_ns
        return again

    st = path.stat()
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    assert loaded(newest + 2 * incremental.SECOND).unchanged(tmp_path, "c") and reads == []
    racy = loaded(newest)
    assert racy.unchanged(tmp_path, "c") and reads == [path] and racy.refreshed
    path.write_bytes(b"a: 2\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not loaded(newest + 2 * incremental.SECOND).unchanged(tmp_path, "c")
    path.write_bytes(b"a: 1\n")
    assert loaded(newest + 2 * incremental.SECOND).unchanged(tmp_path, "c")  # the same content again
    (tmp_path / "rendered/c/b.yaml").write_bytes(b"b: 1\n")  # a file the index does not know
    assert not loaded(newest + 2 * incremental.SECOND).unchanged(tmp_path, "c")


def _nested_record(tmp_path: Path) -> tuple[Path, int]:
    """rendered/c with files two folders deep, recorded and saved; returns the path and a time
    past every file's and folder's mtime and ctime (a record written then is not racy)."""
    files = {"c/a.yaml": b"a: 1\n", "c/t/k.yaml": b"k: 1\n", "c/t/n/x.yaml": b"x: 1\n", "c/t/n/y.yaml": b"y: 1\n"}
    for rel, content in files.items():
        (tmp_path / "rendered" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "rendered" / rel).write_bytes(content)
    index = incremental.Index(tmp_path)
    index.record(tmp_path, files, {}, None)
    index.save(tmp_path)
    newest = max(max(p.lstat().st_mtime_ns, p.lstat().st_ctime_ns) for p in (tmp_path / "rendered").rglob("*"))
    return tmp_path / "rendered/c", newest + 2 * incremental.SECOND


NESTED_EDITS: dict[str, Callable[[Path], None]] = {
    "stray file two folders down": lambda c: (c / "t/n/z.yaml").write_bytes(b"z: 1\n"),
    "stray empty folder": lambda c: (c / "t/n/new").mkdir(),
    "file removed": lambda c: (c / "t/n/y.yaml").unlink(),
    "file renamed": lambda c: (c / "t/n/y.yaml").rename(c / "t/n/w.yaml"),
    "file replaced by a link to the same content": lambda c: ((c / "t/n/y.yaml").unlink(),
                                                               (c / "t/n/y.yaml").symlink_to(c / "t/n/x.yaml")),
    "folder replaced by a copy": lambda c: (shutil.copytree(c / "t/n", c / "t/n2"), shutil.rmtree(c / "t/n"),
                                            (c / "t/n2").rename(c / "t/n")),
    "same-size edit, mtime put back": lambda c: (
        (st := (c / "t/n/x.yaml").stat()), (c / "t/n/x.yaml").write_bytes(b"x: 2\n"),
        os.utime(c / "t/n/x.yaml", ns=(st.st_atime_ns, st.st_mtime_ns))),
}


@pytest.mark.parametrize("edit_name", sorted(NESTED_EDITS))
def test_a_trusted_layout_still_sees_every_change_below_it(tmp_path: Path, edit_name: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-op stats the recorded paths and lists no folder: an entry added, removed or renamed
    anywhere below changes its folder's mtime and ctime, a write changes the file's ctime, so
    every one of these sends the folder down the slow path, which refuses it unless its files
    are still the same."""
    top, later = _nested_record(tmp_path)
    walks: list[str] = []
    real_walk = incremental.stat_top
    monkeypatch.setattr(incremental, "stat_top", lambda rendered, t: walks.append(t) or real_walk(rendered, t))
    again = incremental.Index.load(tmp_path)
    again.written_ns = later
    assert again.unchanged(tmp_path, "c") and walks == []  # clean: stats alone vouch, nothing listed
    time.sleep(0.01)
    NESTED_EDITS[edit_name](top)
    again = incremental.Index.load(tmp_path)
    again.written_ns = later
    # listed, then found to hold the same files (each copy hashed; an empty folder holds none)
    same_files = edit_name in ("folder replaced by a copy", "stray empty folder")
    assert again.unchanged(tmp_path, "c") is same_files and walks == ["c"]


def test_a_missing_or_forged_layout_falls_back_to_listing(tmp_path: Path) -> None:
    """The layout is a cache file: gone or rewritten, its digest no longer matches the record, and
    the folder is listed and compared file by file (and still trusted if it is unchanged)."""
    top, later = _nested_record(tmp_path)
    layout = incremental._layout_file(incremental._record_dir(tmp_path), "c")
    layout.write_text("c\0c/a.yaml", encoding="utf-8")  # drops the files a stray edit would hide in
    (top / "t/n/x.yaml").write_bytes(b"x: 9\n")
    again = incremental.Index.load(tmp_path)
    again.written_ns = later
    assert not again.unchanged(tmp_path, "c")
    (top / "t/n/x.yaml").write_bytes(b"x: 1\n")
    layout.unlink()
    again = incremental.Index.load(tmp_path)
    again.written_ns = later
    assert again.unchanged(tmp_path, "c") and again.refreshed


FORK_CHECK = """
import sys, threading
from generator.processes import pool_context
print(pool_context().get_start_method())
stop = threading.Event()
other = threading.Thread(target=stop.wait)
other.start()
print(pool_context().get_start_method())
stop.set()
other.join()
"""


def test_helper_processes_are_forked_only_while_no_other_thread_runs() -> None:
    """In a fresh interpreter, whose threads are the test's own: a test worker may still run a daemon
    thread an earlier test left (a loopback server's, a watch's), which rightly makes it spawn."""
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    done = subprocess.run([sys.executable, "-c", FORK_CHECK], capture_output=True, text=True, cwd=REPO,
                          check=True, timeout=60)
    assert done.stdout.split() == [expected, "spawn"], done.stderr


EDITS = ("team", "cluster", "hand-edit", "same-size", "remove-file", "stray-file", "stray-top", "touch",
         "remove-cluster", "nothing", "atomic-save", "stray-folder")


def _random_edit(root: Path, rng: random.Random, kind: str) -> None:
    """One edit of `kind` that a user (or a hostile commit) could make between two renders."""
    files = sorted(p for p in (root / "rendered").rglob("*") if p.is_file())
    target = rng.choice(files) if files else None
    if kind == "team":
        team = rng.choice(sorted((root / "teams").glob("*.yaml")))
        text = team.read_text()
        team.write_text(text.replace("gpus: ", f"gpus: {rng.randint(1, 3)}", 1) if "gpus: " in text else text)
    elif kind == "cluster":
        cluster = rng.choice(sorted((root / "clusters").glob("*.yaml")))
        text = cluster.read_text()
        cluster.write_text(text.replace("nodes: ", "nodes: 1", 1) if "nodes: " in text else text)
    elif kind == "hand-edit" and target:
        target.write_text(target.read_text() + "# hand\n")
    elif kind == "same-size" and target:
        st, data = target.stat(), target.read_bytes()
        target.write_bytes(data[:-2] + b"x\n" if len(data) > 2 else data)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif kind == "remove-file" and target:
        target.unlink()
    elif kind == "stray-file" and target:
        (target.parent / "stray.yaml").write_text("a: 1\n")
    elif kind == "stray-top":
        (root / "rendered/zz-stray").mkdir(exist_ok=True)
        (root / "rendered/zz-stray/x.yaml").write_text("a: 1\n")
    elif kind == "touch" and target:
        target.touch()
    elif kind == "atomic-save" and target:  # as editors save: a new file renamed over the old one
        (target.parent / ".save.tmp").write_text(target.read_text() + "# saved\n")
        (target.parent / ".save.tmp").replace(target)
    elif kind == "stray-folder" and target:
        (target.parent / "extra").mkdir(exist_ok=True)
        (target.parent / "extra/x.yaml").write_text("a: 1\n")
    elif kind == "remove-cluster":
        clusters = sorted((root / "clusters").glob("*.yaml"))
        cluster = rng.choice(clusters)
        if cluster.stem not in ("hub", "prod-west", "dev") and len(clusters) > 2:
            cluster.unlink()  # a cluster nobody links to (a MultiKueue worker or dev's teams' owner stays)


@pytest.mark.slow
@pytest.mark.parametrize("half", [0, 1])
def test_incremental_check_and_render_equal_the_full_path_after_random_edits(fleet_root: Path, tmp_path: Path,
                                                                            half: int) -> None:
    """The proof: after every kind of edit (half of them each, one after another, in a random order
    with random targets), `render --check` says exactly what `--check --full` says, and `render`
    leaves exactly the tree a full render leaves in a fresh copy."""
    rng = random.Random(half)
    assert run(fleet_root, "render").code == 0
    kinds = list(EDITS)
    random.Random(33).shuffle(kinds)
    for step, kind in enumerate(kinds[half::2]):
        _random_edit(fleet_root, rng, kind)
        if rng.random() < 0.5:
            time.sleep(0.01)
        fast, full = run(fleet_root, "render", "--check"), run(fleet_root, "render", "--check", "--full")
        if fast.code != 2:  # an edit may leave inputs the checks refuse: then both must refuse them
            assert (fast.code, fast.out.splitlines()[:-1] if fast.code else []) == \
                (full.code, full.out.splitlines()[:-1] if full.code else []), (step, kind, fast.out, full.out)
        else:
            assert full.code == 2, (step, kind, full.out)
        fresh = tmp_path / f"fresh-{step}"
        shutil.copytree(fleet_root, fresh)
        first, second = run(fleet_root, "render"), run(fresh, "render", "--full")
        assert first.code == second.code, (step, kind, first.err, second.err)
        assert snapshot(fleet_root / "rendered") == snapshot(fresh / "rendered"), (step, kind)
        shutil.rmtree(fresh)


def test_a_same_size_edit_with_its_mtime_put_back_is_repaired(fleet_root: Path) -> None:
    """The records hold content hashes: size and mtime alone would let this edit survive (issue 11)."""
    import os

    assert run(fleet_root, "render").code == 0
    path = fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml"
    before, stat = path.read_bytes(), path.stat()
    forged = before.replace(b"nominalQuota: '6'", b"nominalQuota: '9'")
    assert forged != before and len(forged) == len(before)
    path.write_bytes(forged)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = run(fleet_root, "render")
    assert result.code == 0 and "1 changed" in result.out, result.out
    assert path.read_bytes() == before


def test_the_no_op_path_knows_where_a_killed_render_leaves_its_journal(fleet_root: Path) -> None:
    """The command line asks the index before importing emit: its copies of emit's paths must agree."""
    from generator import emit
    from generator.compile import codeowners

    assert f"{emit.WORK}/{emit.JOURNAL}" == incremental.JOURNAL
    assert (incremental.RENDERED, incremental.CODEOWNERS) == (emit.RENDERED, codeowners.PATH)
    assert run(fleet_root, "render").code == 0
    (fleet_root / incremental.JOURNAL).write_text("{}")
    assert FAST not in run(fleet_root, "render", "--check").out


def test_the_no_op_imports_no_compiler(fleet_root: Path) -> None:
    """Under a second at 50 x 200 needs a start-up without the models and compilers."""
    import subprocess
    import sys

    assert run(fleet_root, "render").code == 0
    code = ("import sys; from generator.cli import cli\n"
            "try: cli(['--root', sys.argv[1], 'render'])\n"
            "except SystemExit: pass\n"
            "heavy = ('generator.compile', 'generator.config', 'pydantic')\n"
            "print(sorted(m for m in sys.modules if m.startswith(heavy)))")
    proc = subprocess.run([sys.executable, "-c", code, str(fleet_root)], capture_output=True, text=True, check=True)
    assert FAST in proc.stdout and proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


def test_many_folders_are_walked_in_two_processes_and_a_changed_one_is_found(tmp_path: Path) -> None:
    """From PARALLEL_TOPS folders on, `verify` stats half of them in a second process: it must
    vouch for exactly the untouched ones."""
    from benchmarks.synth import synthesize

    root = synthesize(tmp_path / "fleet", incremental.PARALLEL_TOPS + 1, 2)
    assert run(root, "render").code == 0
    tops = sorted(p.name for p in (root / "rendered").iterdir())
    assert len(tops) > incremental.PARALLEL_TOPS
    index = incremental.Index.load(root)
    index.written_ns += 2 * incremental.SECOND  # nothing racy: the digests alone decide
    victim = next((root / "rendered" / tops[1]).rglob("*.yaml"))
    victim.write_text(victim.read_text() + "# hand\n")
    index.verify(root, tops)
    assert index._verified == set(tops) - {tops[1]}
    assert not index.unchanged(root, tops[1])
    result = run(root, "render")
    assert result.code == 0 and "1 changed" in result.out and FAST not in result.out, result.out
    assert FAST in run(root, "render").out
