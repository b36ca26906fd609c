"""Issue 52: the preview's export of a commit and `diff --rendered` read a pull request as hostile
data. Git itself makes every commit here (attributes, gitlinks, crafted trees); each test failed
on the code before the change (named in its docstring)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, git, run


def _blob(root: Path, spec: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), "cat-file", "blob", spec], capture_output=True,
                          check=True).stdout


def _rev(root: Path, ref: str = "HEAD") -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", ref], capture_output=True, text=True,
                          check=True).stdout.strip()


# --- the export of a commit's inputs -------------------------------------------------------------

ATTRIBUTES = {
    # .gitattributes line, what the commit's team file holds for it
    "export-ignore": ("speech.yaml export-ignore", ""),
    "ident": ("speech.yaml ident", "# $Id$\n"),
    "eol=crlf": ("speech.yaml text eol=crlf", ""),
    "working-tree-encoding": ("speech.yaml working-tree-encoding=UTF-16LE", ""),
    "filter": ("speech.yaml filter=rewrite", ""),
}


@pytest.mark.parametrize("where", ["teams/.gitattributes", "info/attributes", "core.attributesFile"])
@pytest.mark.parametrize("attribute", sorted(ATTRIBUTES))
def test_no_attribute_drops_or_rewrites_an_exported_input(repo: Path, tmp_path: Path, attribute: str,
                                                          where: str) -> None:
    """`git archive` applied the commit's own attributes: `export-ignore` in a pull request's
    teams/.gitattributes dropped its team file from the export (the preview then said "no changes,
    Risks: None found"), `export-subst`, `ident`, `eol`, `working-tree-encoding` and a `filter`
    driver rewrote it; so did the runner's own `info/attributes` or `core.attributesFile`. Before:
    the exported file was missing or differed from the commit's blob. (`export-subst` and a top-level
    .gitattributes reach the preview script's archive of a commit, not this one of a tree.)"""
    from generator.diff.sources import _export

    line, extra = ATTRIBUTES[attribute]
    team = repo / "teams/speech.yaml"
    team.write_text(extra + team.read_text())
    git(repo, "commit", "-q", "--allow-empty", "-am", "the team file")  # (checked in before the attributes)
    attributes_file = tmp_path / "global-attributes"
    if where == "core.attributesFile":
        attributes_file.write_text(f"{line}\n")
        git(repo, "config", "core.attributesFile", str(attributes_file))
    elif where == "info/attributes":
        (repo / ".git/info").mkdir(exist_ok=True)
        (repo / ".git/info/attributes").write_text(f"{line}\n")
    else:
        (repo / where).write_text(f"{line}\n")
    git(repo, "config", "filter.rewrite.smudge", "sed s/speech/mallory/")  # a driver the runner has
    if where.endswith(".gitattributes"):
        git(repo, "add", where)
    git(repo, "commit", "-q", "--allow-empty", "-m", "attributes")
    dest = tmp_path / "export"
    _export(repo, _rev(repo), ["teams", "fleet.yaml"], dest, "HEAD")
    assert (dest / "teams/speech.yaml").read_bytes() == _blob(repo, "HEAD:teams/speech.yaml")
    exported = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", "--", "teams",
                             "fleet.yaml"], capture_output=True, text=True, check=True).stdout.split()
    assert exported == sorted(listed)


def _tree(root: Path, entries: list[tuple[str, str, str, str]]) -> str:
    """`git mktree` of (mode, type, oid, name): git writes names and modes a checkout never would."""
    text = "".join(f"{mode} {kind} {oid}\t{name}\n" for mode, kind, oid, name in entries)
    return subprocess.run(["git", "-C", str(root), "mktree"], input=text, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.parametrize("name,mode,said", [
    ("..", "100644", "a path outside the repository (teams/..)"),
    (".git", "100644", "a path outside the repository (teams/.git)"),
    ("sub", "160000", "a submodule (gitlink) among the inputs (teams/sub)"),
])
def test_a_crafted_tree_is_refused_by_name_and_nothing_leaves_the_folder(repo: Path, tmp_path: Path, name: str,
                                                                          mode: str, said: str) -> None:
    """Trees made with `git mktree` (a fetched pull request can hold any): a `..` or `.git` entry, a
    gitlink. Before: `..` and `.git` were written as files by tar (no error), a gitlink became an
    empty folder."""
    from generator.diff.sources import _export
    from generator.errors import UsageError

    blob = subprocess.run(["git", "-C", str(repo), "hash-object", "-w", "--stdin"], input=b"x: 1\n",
                          capture_output=True, check=True).stdout.decode().strip()
    oid = _rev(repo) if mode == "160000" else blob
    teams = _tree(repo, [(mode, "commit" if mode == "160000" else "blob", oid, name),
                         ("100644", "blob", blob, "ok.yaml")])
    top = _tree(repo, [("040000", "tree", teams, "teams")])
    commit = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                             "commit-tree", top, "-m", "crafted"], capture_output=True, text=True,
                            check=True).stdout.strip()
    dest = tmp_path / "export" / "in"
    dest.mkdir(parents=True)
    with pytest.raises(UsageError) as err:
        _export(repo, commit, ["teams"], dest, "HEAD")
    assert str(err.value).startswith(f"HEAD holds {said}"), err.value
    assert not (tmp_path / "export/teams").exists() and not list(dest.rglob("*.yaml"))


# --- `diff --rendered` on a pull request's rendered/ ----------------------------------------------

@pytest.fixture
def rendered_repo(repo: Path) -> Path:
    """The example fleet with rendered/ committed."""
    assert run(repo, "render").code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "rendered")
    return repo


def _speech_file(root: Path) -> Path:
    """A rendered object of the speech team on dev (its ClusterQueue)."""
    return root / "rendered/dev/teams/speech/clusterqueue-speech.yaml"


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8))

BAD_RENDERED = {
    # name: (text appended to a rendered object, words of the error)
    "alias bomb": (BOMB, "more than 20000 nodes"),
    "invalid YAML": ("spec: [unclosed\n", "invalid YAML"),
    "duplicate key": ("kind: ClusterQueue\n", "duplicate key 'kind'"),
    "unsafe tag": ("extra: !!python/object/apply:os.getpid []\n", "unsupported YAML tag"),
    "nesting": ("deep: " + "[" * 40 + "]" * 40 + "\n", "nesting deeper than 32 levels"),
    "two documents": ("---\nkind: Secret\n", "invalid YAML"),
}


@pytest.mark.parametrize("case", sorted(BAD_RENDERED))
def test_a_rendered_file_render_check_would_refuse_is_a_located_error(rendered_repo: Path, case: str) -> None:
    """Before: yaml.load then deepdiff on a pull request's rendered file: a traceback ("internal
    error ComposerError", ConstructorError) for bad YAML, a duplicate key silently kept, and an
    alias bomb hung (the test's 60 s timeout). Now the inputs' reader with its limits: the file and
    line, exit 2, at once."""
    text, said = BAD_RENDERED[case]
    path = _speech_file(rendered_repo)
    original = path.read_text()
    path.write_text(original + text)
    lines = original.count("\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "generator", "--root", str(rendered_repo), "diff", "--rendered"],
                          capture_output=True, text=True, check=False, timeout=60)
    assert time.monotonic() - started < 30
    assert proc.returncode == 2, proc.stderr
    shown = path.relative_to(rendered_repo).as_posix()
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{shown}:"), proc.stderr
    assert int(first.split(":")[1]) > lines - 1, first  # the line of the text added, not line 1
    assert said in proc.stderr and "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_base_file_over_the_limit_names_the_ref(rendered_repo: Path) -> None:
    """The base's side is shown as git names it (`main:rendered/...`). Before: a 2 MiB rendered file
    was read whole and parsed with no size limit."""
    path = _speech_file(rendered_repo)
    original = path.read_text()
    path.write_text(original + "padding: '" + "x" * (2 << 20) + "'\n")
    git(rendered_repo, "commit", "-qam", "a large file at the base")
    path.write_text(original)
    result = run(rendered_repo, "diff", "--rendered", "--base", "HEAD")
    assert result.code == 2, result
    shown = path.relative_to(rendered_repo).as_posix()
    assert result.err.startswith(f"HEAD:{shown}: file is "), result.err


def test_a_gitlink_in_rendered_is_named(rendered_repo: Path) -> None:
    """A submodule entry (mode 160000) under rendered/ at the base, its commit not in this repository
    (a submodule's never is). Before: IndexError from the parse of `git cat-file --batch`'s
    "missing" line, an internal error."""
    git(rendered_repo, "update-index", "--add", "--cacheinfo", f"160000,{'5' * 40},rendered/dev/sub")
    git(rendered_repo, "commit", "-qm", "a gitlink")
    git(rendered_repo, "rm", "-q", "--cached", "rendered/dev/sub")
    result = run(rendered_repo, "diff", "--rendered")
    assert result.code == 2, result
    assert result.err.startswith("HEAD holds a submodule (gitlink) in rendered/ (rendered/dev/sub)"), result.err


@pytest.mark.parametrize("target", ["nowhere.yaml", "kueue"], ids=["dangling", "to-a-folder"])
def test_a_link_in_the_work_trees_rendered_is_an_error_not_a_deletion(rendered_repo: Path, target: str) -> None:
    """A rendered file replaced by a link, dangling or to a folder. Before: either read as a deletion
    of its object (exit 1, "1 to destroy")."""
    path = _speech_file(rendered_repo)
    path.unlink()
    path.symlink_to(target)
    result = run(rendered_repo, "diff", "--rendered")
    assert result.code == 2, result
    shown = path.relative_to(rendered_repo).as_posix()
    assert result.err.startswith(f"the work tree holds symbolic links in rendered/ ({shown})"), result.err


def test_a_nested_repository_in_rendered_is_an_error(rendered_repo: Path) -> None:
    """An untracked repository under rendered/ (git lists it as `rendered/dev/nested/`). Before:
    refused too, but named without `rendered/` (`dev/nested/ is not a regular file`)."""
    nested = rendered_repo / "rendered/dev/nested"
    nested.mkdir()
    git(nested, "init", "-q")
    (nested / "x.yaml").write_text("kind: ConfigMap\n")
    result = run(rendered_repo, "diff", "--rendered")
    assert result.code == 2, result
    assert result.err.startswith("rendered/dev/nested/ is not a regular file"), result.err


# --- the helper process --------------------------------------------------------------------------

SLOW_HELPER = """
import os, signal, sys, time
from pathlib import Path
from generator.diff import run
from generator import cli

# Ctrl-C as a terminal delivers it, even where this test runs in a background job (which starts with
# SIGINT ignored, and Python then leaves it ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)

def slow(where):
    Path(os.environ["HELPER_PID"]).write_text(str(os.getpid()))
    time.sleep(120)

run._committed_impact = slow
Path(os.environ["PARENT_READY"]).write_text("")
sys.argv = ["fleetgen", "--root", os.environ["ROOT"], "diff", "--rendered"]
cli.main()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by whoever adopted it) is gone as far as work goes
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper is forked on Linux")
@pytest.mark.parametrize("how", ["error", "SIGTERM", "SIGINT", "SIGKILL"])
def test_the_helper_process_ends_with_the_command(rendered_repo: Path, tmp_path: Path, how: str) -> None:
    """The fleets load in a forked helper while the parent compares the rendered files. Before: on
    an error in the parent the pool's exit waited for the helper (here 120 s), and on SIGTERM or
    SIGKILL the parent died and the helper ran on, adopted; now it ends with the parent, each way."""
    if how == "error":  # the parent fails on a pull request's rendered file while the helper works
        path = _speech_file(rendered_repo)
        path.write_text(path.read_text() + "spec: [unclosed\n")
    else:
        path = _speech_file(rendered_repo)
        path.write_text(path.read_text().replace("speech", "speech", 1) + "# changed\n")
    pid_file, ready = tmp_path / "helper.pid", tmp_path / "ready"
    env = {**os.environ, "HELPER_PID": str(pid_file), "PARENT_READY": str(ready), "ROOT": str(rendered_repo)}
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SLOW_HELPER)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None or how == "error", parent.communicate()
            assert time.monotonic() < deadline, "the helper never started"
            time.sleep(0.05)
        helper = int(pid_file.read_text())
        started = time.monotonic()
        if how != "error":
            time.sleep(1)  # the parent is waiting for the helper's result
            parent.send_signal(getattr(signal, how))
        _, err = parent.communicate(timeout=60)
        assert time.monotonic() - started < 20
        if how in ("error", "SIGTERM", "SIGINT"):
            assert parent.returncode == 2, err
            assert "Traceback" not in err, err
        for _ in range(100):
            if not _alive(helper):
                break
            time.sleep(0.05)
        assert not _alive(helper), f"the helper {helper} outlived the command ({how})"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pid_file.exists() and pid_file.read_text() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


# --- the preview workflow's export -------------------------------------------------------------

def test_gitblobs_writes_a_commits_inputs_as_the_preview_script_calls_it(repo: Path, tmp_path: Path) -> None:
    """`python -m generator.diff.gitblobs COMMIT DEST PATH...`, as preview-diff.sh runs it in the
    checkout's top folder: a missing path is no error, an unsafe tree is exit 2 with one line."""
    (repo / "teams/.gitattributes").write_text("* export-ignore\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hide every team")
    dest = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "generator.diff.gitblobs", _rev(repo), str(dest), "teams",
                           "clusters", "fleet.yaml", "nothing-here"], cwd=repo, capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert (dest / "teams/speech.yaml").read_bytes() == _blob(repo, "HEAD:teams/speech.yaml")
    shutil.rmtree(dest)
    (repo / "teams/link.yaml").symlink_to("speech.yaml")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a link")
    proc = subprocess.run([sys.executable, "-m", "generator.diff.gitblobs", _rev(repo), str(dest), "teams"],
                          cwd=repo, capture_output=True, text=True, check=False, env={**os.environ,
                                                                                   "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and "symbolic links among the inputs (teams/link.yaml)" in proc.stderr, proc.stderr

