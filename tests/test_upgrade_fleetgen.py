"""Issue 57: a fleet takes fleetgen like any dependency. `fleetgen init` leaves a one-line pin
(`fleetgen.txt`) instead of a copy of generator/; `./fleetgen` installs exactly that release; a new
release is a changed pin, with no merge of fleetgen's tree, and the diff renders each side with its own
pin and names the move. The releases are tags of a local git repository made from this checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from generator import __version__, pinfile
from generator.diff.run import run_diff
from generator.errors import InputError
from tests.conftest import REPO, checkout_copy
from tests.fleetgen_releases import git, publish_next, release_repository, url
from tests.init_runs import INIT_ARGS

INIT = INIT_ARGS[:INIT_ARGS.index("--fleetgen-from")]
"""init's arguments less --fleetgen-from: the fleet takes its releases from the copy's origin."""


def launcher(fleet: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(fleet / "fleetgen"), *args], cwd=fleet, capture_output=True, text=True, env=env,
                          timeout=900)


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return release_repository(tmp_path_factory.mktemp("releases"))


@pytest.fixture
def environments_removed(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, less the virtual environments a test made there once it ends (300 MB each: pytest keeps
    the folders of three runs)."""
    yield tmp_path
    for venv in [*tmp_path.rglob(".venv"), tmp_path / "cache/releases"]:
        shutil.rmtree(venv, ignore_errors=True)


@pytest.mark.slow
def test_a_fleet_made_by_init_takes_the_next_release_by_its_pin(releases: tuple[Path, Path],
                                                                 environments_removed: Path) -> None:
    bare, source = releases
    tmp_path = environments_removed
    fleet = tmp_path / "fleet"
    git(tmp_path, "clone", "-q", str(bare), str(fleet))  # a copy of the release, its origin the release's repository
    made = subprocess.run([sys.executable, "-m", "generator", "--root", str(fleet), *INIT], capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    pin = pinfile.read(fleet)
    assert pin is not None and pin.requirement == f"fleetgen @ git+{url(bare)}@v{__version__}"
    assert not (fleet / "generator").exists() and not (fleet / "pyproject.toml").exists()
    git(fleet, "add", "-A")
    git(fleet, "commit", "-qm", "Make our fleet")
    env = {**os.environ, "FLEETGEN_CACHE_DIR": str(tmp_path / "cache")}

    # the fleet's own ./fleetgen installs the pinned release, and the tree init wrote is what it renders
    first = launcher(fleet, "render", "--check", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "installing into" in first.stderr and f"fleetgen @ git+{url(bare)}@v{__version__}" in first.stderr

    # the next release, the pin moved on a branch: no merge of fleetgen's tree, nothing of its example
    version = publish_next(source, bare)
    git(fleet, "checkout", "-qb", f"fleetgen-{version}")
    text = (fleet / "fleetgen.txt").read_text()
    (fleet / "fleetgen.txt").write_text(text.replace(f"@v{__version__}\n", f"@v{version}\n"))
    stale = launcher(fleet, "render", "--check", env=env)
    assert stale.returncode == 1, stale.stdout + stale.stderr  # the new release renders something else
    assert launcher(fleet, "--version", env=env).stdout.strip() == f"fleetgen, version {version}"
    assert launcher(fleet, "render", env=env).returncode == 0
    assert launcher(fleet, "schema", "--check", env=env).returncode == 0  # the page's step: editors' schemas
    changed = git(fleet, "status", "--porcelain").split("\n")
    assert " M fleetgen.txt" in changed and " M rendered/prod/health/deployment-fleetgen-health.yaml" in changed
    assert all(line[3:].startswith(("rendered/prod/", "fleetgen.txt")) for line in changed if line), changed
    git(fleet, "commit", "-qam", f"Take fleetgen {version}")
    assert sorted(p.name for p in (fleet / "teams").iterdir()) == ["research.yaml"]  # the example stays out

    # the preview renders the base with the release it pins, and names the move
    diff = launcher(fleet, "diff", "--base", "main", "--format", "json", env=env)
    assert diff.returncode == 1, diff.stdout + diff.stderr
    report = json.loads(diff.stdout)
    [line] = [r for r in report["risks"] if r["rule"] == "fleetgen-upgraded"]
    assert line["severity"] == "medium", line
    assert f"fleetgen moves from v{__version__} to v{version} (fleetgen.txt)" in line["message"], line
    assert "each side was rendered by its own pin" in line["message"], line
    images = [c for c in report["changes"] if c["kind"] == "Deployment" and c["name"] == "fleetgen-health"]
    assert images and f"fleetgen:{version}" in json.dumps(images), report["changes"]
    assert any(f"rendered by its pinned fleetgen v{__version__}" in note for note in report["notes"]), report
    assert (tmp_path / "cache/releases").is_dir()  # kept for the next diff


@pytest.mark.slow
def test_the_images_workflow_builds_the_release_a_fleet_pins(releases: tuple[Path, Path], tmp_path: Path) -> None:
    """The workflow's own source step, run as the runner runs it, in a fleet that pins the first release."""
    bare, _ = releases
    workflow = yaml.safe_load((REPO / ".github/workflows/images.yml").read_text())
    step = next(s for s in workflow["jobs"]["build"]["steps"] if s.get("id") == "source")
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "fleetgen.txt").write_text(pinfile.text(f"fleetgen @ git+{url(bare)}@v{__version__}", "a test"))
    output = tmp_path / "output"
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=fleet, capture_output=True, text=True,
                          env={**os.environ, "GITHUB_OUTPUT": str(output)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert output.read_text() == "dir=fleetgen-src\n"
    built = fleet / "fleetgen-src"
    assert (built / "Dockerfile").read_bytes() == (REPO / "Dockerfile").read_bytes()
    assert f'__version__ = "{__version__}"' in (built / "generator/__init__.py").read_text()


@pytest.mark.parametrize("line", [
    "--index-url https://evil.example/simple\nfleetgen==0.2.0",
    "-e .",
    "fleetgen==0.2.0\nfleetgen==0.3.0",
    "other-package==1.0",
    "fleetgen @ git+https://github.com/acme/fleetgen.git@v0.2.0 ; python_version>'3'",
    "fleetgen @ https://evil.example/fleetgen.whl",
    "fleetgen==0.2.0 --hash=sha256:00",
    "",
    "fleetgen @ git+https://github.com@evil.example",  # pip would fetch evil.example, the default branch
    "fleetgen @ git+https://alice:ghp_token@github.com/acme/fleetgen.git@v0.2.0",  # a token, committed
    "fleetgen @ git+https://alice@github.com/acme/fleetgen.git@v0.2.0",
    "fleetgen==0\r.2.0",
    "\x0bfleetgen==0.2.0",
    "fleetgen @ git+https://g\u00edthub.com/acme/fleetgen.git@v0.2.0",
    "fleetgen==1234567890.1",
    "fleetgen @ git+https://github.com/acme/fleetgen.git@v0.2.0\u2028fleetgen==9.9.9",
])
def test_a_pin_that_is_not_one_release_is_refused_by_the_launcher_and_the_reader(tmp_path: Path, line: str) -> None:
    """fleetgen.txt comes with pull requests: pip never sees an option or another package from it."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    shutil.copy2(REPO / "fleetgen", fleet / "fleetgen")
    (fleet / "fleetgen.txt").write_text(f"# the pin\n{line}\n")
    proc = subprocess.run([str(fleet / "fleetgen"), "--version"], cwd=fleet, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "fleetgen.txt must hold one line" in proc.stderr, proc.stderr
    assert not (fleet / ".venv").exists()
    with pytest.raises(InputError) as caught:
        pinfile.read(fleet)
    [finding] = caught.value.findings
    assert finding.file == "fleetgen.txt" and finding.hint.startswith(("write ", "keep one line")), finding


@pytest.mark.parametrize("line", [
    "fleetgen @ git+https://github.com/acme/fleetgen.git@v0.3.0",
    "fleetgen @ git+ssh://git@github.com/acme/fleetgen.git@" + "a" * 40,
    "fleetgen @ git+https://git.corp.example:8443/platform/fleetgen.git@release/0.3",
    "fleetgen @ git+file://localhost/srv/git/fleetgen.git@v0.3.0",
    "fleetgen==0.3.0",
])
def test_the_launcher_runs_what_the_reader_accepts(tmp_path: Path, line: str) -> None:
    """The launcher and generator/pinfile.py hold one pattern: a line both accept runs the environment made
    for it (here one that is already there, so nothing is installed)."""
    fleet = tmp_path / "fleet"
    (fleet / ".venv/bin").mkdir(parents=True)
    shutil.copy2(REPO / "fleetgen", fleet / "fleetgen")
    (fleet / "fleetgen.txt").write_text(f"# the pin\r\n  {line}\t\r\n")
    (fleet / ".venv/.fleetgen-installed").write_text(f"{line} extras=\n")
    (fleet / ".venv/bin/fleetgen").write_text("#!/bin/sh\necho ran \"$@\"\n")
    (fleet / ".venv/bin/fleetgen").chmod(0o755)
    proc = subprocess.run([str(fleet / "fleetgen"), "--version"], cwd=fleet, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ran --version\n", "")
    assert pinfile.read(fleet) == pinfile.parse(line)


def test_init_writes_a_pin_pip_reads_from_any_origin(tmp_path: Path) -> None:
    """A local path, scp-style ssh and an https URL with a token all become a pin pip reads, and the token
    never reaches the committed file (git's credential helper has it)."""
    cases = {"/srv/git/fleetgen.git": "file://localhost/srv/git/fleetgen.git",
             "file:///srv/git/fleetgen.git": "file://localhost/srv/git/fleetgen.git",
             "git@github.com:acme/fleetgen.git": "ssh://git@github.com/acme/fleetgen.git",
             "https://alice:ghp_token@github.com/acme/fleetgen.git": "https://github.com/acme/fleetgen.git"}
    for given, source in cases.items():
        assert pinfile.git_requirement(given, "v0.2.0") == f"fleetgen @ git+{source}@v0.2.0"


@pytest.mark.parametrize(("line", "source", "label"), [
    ("fleetgen @ git+https://github.com/acme/fleetgen.git@v0.3.0", "https://github.com/acme/fleetgen.git", "v0.3.0"),
    ("fleetgen @ git+ssh://git@github.com/acme/fleetgen.git@" + "a" * 40, "ssh://git@github.com/acme/fleetgen.git",
     "a" * 12),
    ("fleetgen==0.3.0", pinfile.INDEX, "0.3.0"),
])
def test_the_two_forms_of_a_pin(line: str, source: str, label: str) -> None:
    pin = pinfile.parse(f"# comment\n\n  {line}  \n")
    assert (pin.requirement, pin.source, pin.label) == (line, source, label)


def test_the_preview_comment_names_a_pin_move_it_cannot_render(tmp_path: Path) -> None:
    """The preview comment runs the base repository's fleetgen on both sides and never installs the pull
    request's pin: the move is one line, which says where the new release's own diff is."""
    sides = []
    for name, ref in (("base", "v0.2.0"), ("head", "v0.3.0")):
        side = tmp_path / name
        for part in ("teams", "clusters", "fleet.yaml"):
            (shutil.copytree if (REPO / part).is_dir() else shutil.copy2)(REPO / part, side / part)
        (side / "fleetgen.txt").write_text(pinfile.text(f"fleetgen @ git+https://github.com/acme/fleetgen.git@{ref}",
                                                        "a test"))
        sides.append(str(side))
    result = run_diff(tmp_path, from_dir=sides[0], to_dir=sides[1])
    [line] = [r for r in result.risks if r.rule == "fleetgen-upgraded"]
    assert line.severity == "medium" and "fleetgen moves from v0.2.0 to v0.3.0" in line.what
    assert "both sides here were rendered by one fleetgen" in line.what and not result.changes


def test_a_pin_removed_or_added_is_a_line_too() -> None:
    """A pull request that deletes the pin (and brings a generator/ of its own) is high: after the merge the
    launcher would run that code."""
    from generator.diff.fleetgen_move import fleetgen_lines

    pin = pinfile.parse("fleetgen @ git+https://github.com/acme/fleetgen.git@v0.3.0")
    [gone] = fleetgen_lines(pin, None, True, [])
    [came] = fleetgen_lines(None, pin, True, [])
    assert gone.severity == "high" and "fleetgen.txt is removed" in gone.what
    assert came.severity == "medium" and "instead of the generator/ it carried" in came.what
    assert fleetgen_lines(None, None, True, []) == []


def test_a_base_whose_pin_does_not_read_is_diffed_with_a_note(tmp_path: Path) -> None:
    """The pull request that fixes a broken pin on main can be previewed: the base is rendered here, and
    the note names the base's file (`HEAD:fleetgen.txt`), not the work tree's."""
    root = tmp_path / "fleet"
    for part in ("teams", "clusters", "fleet.yaml"):
        (shutil.copytree if (REPO / part).is_dir() else shutil.copy2)(REPO / part, root / part)
    (root / "fleetgen.txt").write_text("fleetgen @ git+https://github.com/acme/fleetgen.git@v0.2.0 --pre\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a broken pin")
    (root / "fleetgen.txt").write_text("fleetgen @ git+https://github.com/acme/fleetgen.git@v0.2.0\n")
    result = run_diff(root, base="HEAD")
    assert any("the base's pin does not read (HEAD:fleetgen.txt:1:" in note for note in result.notes), result.notes
    [line] = [r for r in result.risks if r.rule == "fleetgen-upgraded"]
    assert "instead of the generator/ it carried" in line.what and not result.changes


def test_init_names_fleetgen_files_of_ones_own_before_moving_them(tmp_path: Path) -> None:
    """init moves fleetgen's own tree aside: a page added to docs/, or an edit not committed in a git
    checkout, is named and refused without --force, as the example's teams are."""
    copy = checkout_copy(tmp_path / "copy")
    (copy / "docs/runbook.md").write_text("# our runbook\n")
    refused = subprocess.run([sys.executable, "-m", "generator", "--root", str(copy), *INIT_ARGS],
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "docs/runbook.md (not the example's)" in refused.stderr, refused.stderr
    (copy / "docs/runbook.md").unlink()
    git(copy, "init", "-q", "-b", "main")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "copy")
    (copy / "Dockerfile").write_text((copy / "Dockerfile").read_text() + "# our change\n")
    refused = subprocess.run([sys.executable, "-m", "generator", "--root", str(copy), *INIT_ARGS],
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "Dockerfile (not committed)" in refused.stderr, refused.stderr
    assert (copy / "generator").is_dir() and not (copy / "fleetgen.txt").exists()


def test_a_pin_moved_back_or_to_another_repository_is_high() -> None:
    from generator.diff.fleetgen_move import fleetgen_lines

    old = pinfile.parse("fleetgen @ git+https://github.com/acme/fleetgen.git@v0.3.0")
    back = pinfile.parse("fleetgen @ git+https://github.com/acme/fleetgen.git@v0.2.0")
    elsewhere = pinfile.parse("fleetgen @ git+https://github.com/mallory/fleetgen.git@v0.3.1")
    [down] = fleetgen_lines(old, back, True, [])
    [moved] = fleetgen_lines(old, elsewhere, True, [])
    assert down.severity == "high" and "a downgrade" in down.what
    assert moved.severity == "high" and "from another source" in moved.what and "mallory" in moved.what
    assert fleetgen_lines(old, old, True, []) == []
    [broken] = fleetgen_lines(old, None, False, [], "fleetgen.txt:2: 'fleetgen==0.3 --pre' is not a release")
    assert broken.severity == "high" and "does not read" in broken.what and "--pre" in broken.what


def test_init_pins_the_commit_where_the_copy_is_no_release(tmp_path: Path) -> None:
    """A copy taken between releases pins the commit it was made from, never a tag naming other code."""
    from generator.scaffold.init import pin_requirement

    copy = checkout_copy(tmp_path / "copy")
    git(copy, "init", "-q", "-b", "main")
    git(copy, "add", "-A")
    git(copy, "commit", "-qm", "between releases")
    commit = git(copy, "rev-parse", "HEAD").strip()
    line, how = pin_requirement(copy, "/srv/git/fleetgen.git")
    assert line == f"fleetgen @ git+file://localhost/srv/git/fleetgen.git@{commit}" and "no release tag" in how
    git(copy, "tag", f"v{__version__}")
    assert pin_requirement(copy, "https://github.com/acme/fleetgen.git")[0].endswith(f"@v{__version__}")
