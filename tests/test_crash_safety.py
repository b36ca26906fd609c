"""A render or an init killed with SIGKILL at any point leaves the repository exactly old or exactly new.

A 10-cluster fleet whose change touches half of the clusters is rendered in a child process
that sends itself SIGKILL at its N-th file-system write (opening a file for writing, mkdir,
rename, unlink, rmtree), for 25 values of N spread over every write the render makes (staging,
the journal's commit, the switch, the clean-up, the incremental records). After each kill the
next run's recovery (`emit.recover`, which `render` calls first) must leave the tree's content
hash equal to the old tree's or the new tree's, and a following render must succeed.

`fleetgen init` is killed the same way at every write it makes after its build (the journal, each
rename of its switch, the clean-up); the next `render` or `init` must leave the copy exactly as it
was or exactly as an init that ran to its end leaves it, what it replaced included.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.synth import synthesize
from generator import emit, proofs
from tests.conftest import REPO, Result, checkout_copy, run, snapshot
from tests.init_runs import INIT_ARGS, tree_state

CLUSTERS, TEAMS, KILLS = 10, 1, 25

# Counts every write-side call once armed and kills the process at the N-th (N=0: count only, print at
# exit). A render is armed from the start; `init` once its build (a render into its stage) is done.
COUNTER = r"""
import atexit, builtins, os, shutil, signal, sys
limit, count, armed = int(sys.argv[2]), [0], [True]
def tick():
    if not armed[0]:
        return
    count[0] += 1
    if count[0] == limit:
        os.kill(os.getpid(), signal.SIGKILL)
def counted(fn, writes=lambda *a, **k: True):
    def inner(*args, **kwargs):
        if writes(*args, **kwargs):
            tick()
        return fn(*args, **kwargs)
    return inner
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT
os.open = counted(os.open, lambda path, flags, *a, **k: bool(flags & WRITE_FLAGS))
builtins.open = counted(builtins.open, lambda file, mode="r", *a, **k: any(c in mode for c in "wax+"))
for name in ("mkdir", "rename", "replace", "unlink", "rmdir"):
    setattr(os, name, counted(getattr(os, name)))
shutil.rmtree = counted(shutil.rmtree)
atexit.register(lambda: print(f"writes={count[0]}", file=sys.stderr))
from generator.cli import main
"""
KILLER = COUNTER + r"""
sys.argv = ["fleetgen", "--root", sys.argv[1], "render", "--jobs", "1"]
main()
"""
INIT_KILLER = COUNTER + r"""
from generator import render
armed[0], built = False, render.write
def write(*args, **kwargs):
    result = built(*args, **kwargs)
    armed[0] = True  # the new fleet is built in the stage: from here on init writes to switch it in
    return result
render.write = write
sys.argv = ["fleetgen", "--root", sys.argv[1], *sys.argv[3:]]
main()
"""


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for rel, content in sorted(snapshot(root / "rendered").items()):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()


def _killed_render(root: Path, limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", KILLER, str(root), str(limit)], capture_output=True, text=True,
                          check=False, timeout=300, env={**os.environ, "CI": "1"})


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, int]:
    """A rendered fleet with changed inputs; the old and new trees' hashes; the writes of a render."""
    base = tmp_path_factory.mktemp("crash") / "fleet"
    synthesize(base, CLUSTERS, TEAMS)
    for path in (base / "clusters").glob("*.yaml"):  # Kueue and tenancy only: the test is about files
        path.write_text(path.read_text() + "monitoring: {enabled: false}\nhealth: {enabled: false}\n")
    assert run(base, "render").code == 0
    old = _digest(base)
    for i in range(0, CLUSTERS, 2):  # half of the clusters change
        path = base / f"clusters/cluster-{i:03d}.yaml"
        path.write_text(path.read_text().replace("value: 100", "value: 150"))
    probe = base.parent / "probe"
    shutil.copytree(base, probe)
    shutil.rmtree(probe / ".fleetgen", ignore_errors=True)
    counted = _killed_render(probe, 0)
    assert counted.returncode == 0, counted.stderr
    writes = int(counted.stderr.rsplit("writes=", 1)[1])
    new = _digest(probe)
    assert new != old
    return base, old, new, writes


@pytest.mark.slow
def test_kill_at_25_points_leaves_old_or_new(fleets: tuple[Path, str, str, int], tmp_path: Path) -> None:
    base, old, new, writes = fleets
    assert writes > 200, writes  # the staging of ten clusters' files is in the range
    # Spread evenly over every write of the render (staging, journal, switch, clean-up), shifted by a
    # seeded offset so the points are not always the same writes.
    offset = random.Random(11).random()
    points = sorted({1 + int((k + offset) * writes / KILLS) for k in range(KILLS)})
    seen = {"old": 0, "new": 0}
    for i, point in enumerate(points):
        root = tmp_path / f"kill-{point}"
        # Hard links: a render never writes into an existing file (it stages new ones and renames),
        # so the base stays intact, and the copies cost no data copying.
        shutil.copytree(base, root, copy_function=os.link)
        proc = _killed_render(root, point)
        assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stderr)
        emit.recover(root)
        state = _digest(root)
        assert state in (old, new), f"killed at write {point} of {writes}: the tree is neither old nor new"
        seen["old" if state == old else "new"] += 1
        assert not list((root / ".fleetgen").glob("stage-*")) and not (root / ".fleetgen/journal.json").exists()
        if i % 10 == 0:  # and the next render succeeds, giving the new tree
            result = run(root, "render")
            assert result.code == 0, result.err
            assert _digest(root) == new
        shutil.rmtree(root)
    assert seen["old"] and seen["new"], seen  # the points fell both before and after the commit


def _children(pid: int) -> set[int]:
    """The processes `pid` made that still run (Linux: /proc/PID/task/TID/children)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _running(pid: int) -> bool:
    """Whether `pid` is a process that still works (not gone, not a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_render_workers_end_with_a_render_killed_outright(fleet_root: Path) -> None:
    """`render -j 2` compiles clusters in a process pool. Before: killed with SIGKILL, the render left its
    workers running, adopted, then waiting on their task queue for ever (every worker holds its write end);
    now the kernel ends each with its parent."""
    render = subprocess.Popen([sys.executable, "-m", "generator", "--root", str(fleet_root), "render", "-j", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        workers: set[int] = set()
        for _ in range(600):  # the pool's two workers exist before any cluster compiles
            workers = _children(render.pid)
            if len(workers) >= 2 or render.poll() is not None:
                break
            time.sleep(0.01)
        assert len(workers) >= 2 and render.poll() is None, "render -j 2 made no pool"
        render.kill()
        render.wait()
        for _ in range(200):
            if not any(_running(w) for w in workers):
                break
            time.sleep(0.05)
        assert not [w for w in workers if _running(w)], "a worker outlived the killed render"
    finally:
        for worker in _children(render.pid) | workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
# --- fleetgen init: killed at every write of its switch ---------------------------------------------

State = dict[str, str | bytes]


def _killed_init(root: Path, limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", INIT_KILLER, str(root), str(limit), *INIT_ARGS], capture_output=True,
                          text=True, check=False, timeout=300, cwd=REPO)


def _repository(root: Path) -> State:
    """The copy as the user sees it: every file, folder and link but fleetgen's work area."""
    return tree_state(root, ("__pycache__", emit.WORK))


def _kept(root: Path) -> list[State]:
    """What each finished init kept of the repository it replaced (`.fleetgen/init-*/previous/`)."""
    return [tree_state(kept) for kept in sorted((root / emit.WORK).glob("init-*/previous"))]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, State, State, list[State], int]:
    """A fresh copy of this checkout; the copy before and after an init that ran to its end, and what that
    init kept; the writes init makes after its build (staging the journal, the switch, the clean-up)."""
    base = checkout_copy(tmp_path_factory.mktemp("init") / "copy")
    probe = base.parent / "probe"
    shutil.copytree(base, probe, copy_function=os.link)  # init renames; it never writes into a file it finds
    counted = _killed_init(probe, 0)
    assert counted.returncode == 0, counted.stderr
    writes = int(counted.stderr.rsplit("writes=", 1)[1])
    new, kept = _repository(probe), _kept(probe)
    assert len(kept) == 1 and new != _repository(base)
    return base, _repository(base), new, kept, writes


def _next_command(root: Path, point: int) -> tuple[str, Result]:
    """`render` after odd kill points, `init` again (the same arguments) after even ones."""
    return ("render", run(root, "render")) if point % 2 else ("init", run(root, *INIT_ARGS))


@pytest.mark.slow
def test_init_killed_at_every_write_of_its_switch_is_repaired_by_the_next_command(
        example: tuple[Path, State, State, list[State], int], tmp_path: Path) -> None:
    """`fleetgen init` sends itself SIGKILL at each write it makes once the new fleet is built (the journal,
    every rename, the clean-up); the next `render` or `init` takes it back to exactly the old repository or
    forward to exactly the new one, kept files included, says so in one line, and leaves no stage, journal
    or proof behind. Before the repair, render left the repository half switched and init refused."""
    base, old, new, kept, writes = example
    assert writes >= 15, writes  # the renames of the switch are in the range
    seen = {"old": 0, "new": 0}
    for point in range(1, writes + 1):
        root = tmp_path / f"kill-{point}"
        shutil.copytree(base, root, copy_function=os.link)
        proc = _killed_init(root, point)
        assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stderr)
        command, result = _next_command(root, point)
        said = [line for line in (result.out + result.err).splitlines() if "`fleetgen init`" in line]
        assert len(said) == 1, (point, command, result.out, result.err)
        state = _repository(root)
        if command == "render":
            assert result.code == 0, (point, result.err)
            assert state in (old, new), f"killed at write {point} of {writes}: neither the old copy nor the new one"
            outcome = "old" if state == old else "new"
            assert ("finished" in said[0]) == (outcome == "new"), (point, said)
        else:  # init again: finished, then refuses to replace the fleet; or rolled back, then runs to its end
            assert state == new, (point, result.code, result.err)
            assert result.code == 0 or "is a fleet already" in result.err, (point, result.err)
            outcome = "new" if "finished" in said[0] else "old"
        seen[outcome] += 1
        assert _kept(root) == (kept if state == new else []), point  # nothing the user had is lost
        assert not (root / emit.WORK / emit.JOURNAL).exists() and proofs.issued_stages(root) == [], point
        assert not [s for s in (root / emit.WORK).glob("init-*") if (s / "new").exists()], point
        shutil.rmtree(root)
    assert seen["old"] and seen["new"], seen  # the points fell both before and after the commit


@pytest.mark.parametrize("at", ["before-commit", "mid-switch"])
def test_an_interrupted_init_whose_stage_has_no_proof_is_refused_not_acted_on(
        example: tuple[Path, State, State, list[State], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        at: str) -> None:
    """The same killed init, looked at with a cache folder that holds no token for its stage (the checkout
    copied elsewhere, another user's cache; what a pull request commits can never have one): nothing under
    the stage is moved or deleted. init refuses in one line; render refuses a journal it cannot prove, and
    without a journal leaves the stage alone."""
    base, old, new, kept, writes = example
    root = tmp_path / "copy"
    shutil.copytree(base, root, copy_function=os.link)
    point = 1 if at == "before-commit" else writes // 2
    assert _killed_init(root, point).returncode == -signal.SIGKILL
    monkeypatch.setenv("FLEETGEN_CACHE_DIR", str(tmp_path / "another-cache"))
    def everything() -> State:
        return {rel: v for rel, v in tree_state(root, ("__pycache__",)).items() if rel != f"{emit.WORK}/{emit.LOCK}"}

    before = everything()
    assert (root / emit.WORK / emit.JOURNAL).exists() == (at == "mid-switch")
    result = run(root, *INIT_ARGS)
    assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert f"{emit.WORK}/init-" in result.err and "Traceback" not in result.err, result.err
    assert everything() == before
    result = run(root, "render")
    if at == "mid-switch":
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
        assert "did not make" in result.err and f"{emit.WORK}/init-" in result.err, result.err
    else:  # nothing was moved yet: render has nothing to finish, and renders the copy as it is
        assert result.code == 0, result.err
    assert everything() == before
