"""`fleetgen init`: turn a copy of this repository into a team's own fleet.

The example teams and clusters, their rendered tree and the generator's own test suite give way to one
cluster file and one team file written from the models (every key there, the unset ones commented),
`fleet.yaml` with the platform's owners, and the fleet's own test of its rendered tree. fleetgen's own
tree (generator/, its docs, packaging and image sources) gives way to `fleetgen.txt`, one requirement
line pinning the release init ran from (`generator/pinfile.py`): the fleet takes fleetgen like any
dependency, so a new release is a changed pin, never a merge. The workflows, schemas and tool builds
stay. The names are checked before anything else (they become
paths), and a copy with a symbolic link anywhere is refused. Everything new is compiled in a stage under
.fleetgen/ first, then renamed into place as one journaled transaction, render's own (`emit`), so bad
values, a failed rename or Ctrl-C change nothing, and an init killed half-way is finished (or undone,
if it had not reached its commit point) by the next init or render; what the new fleet replaces is
kept in the stage's `previous/`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from generator import emit, moves, pinfile, proofs, repofiles
from generator.config.names import name_problem
from generator.config.repo import FLEET_FILE
from generator.config.team import TeamConfig
from generator.errors import InputError, UsageError
from generator.scaffold import example
from generator.scaffold.cluster import SCHEMA_LINE, ClusterSpec, cluster_file, cluster_steps
from generator.scaffold.example import INPUT_FILES, KEPT_TESTS, UNTOUCHED
from generator.scaffold.skeleton import skeleton
from generator.yamltext import to_yaml

SHOWN = 10
"""Departures from the example named in init's refusal (all of them go to stderr under --force)."""
REPLACED = ("teams", "clusters", "rendered", "benchmarks")
"""Folders of the example fleet and of fleetgen's own development that a new fleet starts without."""
FILES = INPUT_FILES
"""Files of the example fleet that the new one replaces."""
CODEOWNERS = FILES[1]
GENERATOR = ("generator", "docs", "images", "pyproject.toml", "Dockerfile", ".dockerignore", "mkdocs.yml",
             "CHANGELOG.md", "README.md", ".pre-commit-hooks.yaml")
"""fleetgen's own tree, which the fleet takes from its pinned release instead (README.md is the fleet's own)."""


@dataclass(frozen=True, kw_only=True)
class FleetSpec(ClusterSpec):
    """What `fleetgen init` asks for: a first cluster, its first team and the platform's owners;
    nothing here has a default that could be someone else's."""

    owner: str
    team: str
    fleetgen_from: str | None = None
    """The git URL the fleet installs fleetgen from (None: this copy's `origin`)."""

    def team_values(self) -> dict[str, Any]:
        pool = self.cluster_values()["nodePools"][0]
        return {"name": self.team, "owners": [self.owner], "members": {"groups": [self.team]},
                "defaultPriority": "standard",
                "quotas": {self.cluster: {pool["name"]: {"gpus": pool["nodes"] * pool["gpu"]["perNode"]}}}}


def next_steps(spec: FleetSpec) -> list[str]:
    """What to do after init, in order: the reconciler's image must exist before the first sync."""
    return ["next:", f"  1. read the commented keys in clusters/{spec.cluster}.yaml and teams/{spec.team}.yaml, set "
            "what your cluster needs, `./fleetgen render` after each edit (its first run installs the fleetgen "
            f"{pinfile.PIN_FILE} pins; a new release is a new pin: docs/operations/upgrade-fleetgen.md)",
            *cluster_steps(spec, 2)]


def _files(spec: FleetSpec, pin: str) -> dict[str, str]:
    cluster = cluster_file(spec, "fleetgen init")
    team = skeleton(TeamConfig, spec.team_values(),
                    f"{SCHEMA_LINE.format(kind='team')}\nTeam {spec.team}, written by `fleetgen init`: its whole "
                    "pool as guaranteed GPUs to start with; every other key is listed commented.")
    fleet = ("# Repository-wide settings (docs/how-to/reviews.md), written by `fleetgen init`.\n"
             + to_yaml({"platformOwners": [spec.owner], "platformApprovesQuotas": True}))
    tests = resources.files("generator.scaffold").joinpath("files")
    return {f"clusters/{spec.cluster}.yaml": cluster, f"teams/{spec.team}.yaml": team, FLEET_FILE: fleet,
            "tests/test_fleet.py": tests.joinpath("test_fleet.py").read_text(encoding="utf-8"),
            "tests/run": tests.joinpath("run").read_text(encoding="utf-8"),
            pinfile.PIN_FILE: pin, "README.md": tests.joinpath("README.md").read_text(encoding="utf-8")}


def _git(root: Path, *args: str, strip: bool = True) -> str | None:
    """A git command's output in `root` (stripped), or None where git or the repository is not there."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False,
                              timeout=60)
    except OSError:
        return None
    return (proc.stdout.strip() if strip else proc.stdout) if proc.returncode == 0 else None


def pin_requirement(root: Path, source: str | None) -> tuple[str, str]:
    """The requirement pinning the fleetgen running now, and how it was chosen: the release tag
    `v<version>` where the copy's commit is that tag (or the copy is no git checkout), else the commit
    itself; fetched from `source`, or the copy's `origin`."""
    from generator import __version__

    given = "--fleetgen-from" if source else "the copy's `origin` remote"
    source = source or _git(root, "remote", "get-url", "origin")
    if not source:
        raise UsageError("this copy has no git remote `origin` to take fleetgen's releases from: pass "
                         "--fleetgen-from <git URL of the fleetgen repository> (fleetgen.txt pins a release there)")
    tag, commit = f"v{__version__}", _git(root, "rev-parse", "--verify", "HEAD^{commit}")
    tags = (_git(root, "tag", "--points-at", "HEAD") or "").split()
    ref = tag if commit is None or tag in tags else commit
    try:
        line = pinfile.git_requirement(source, ref)
    except InputError:
        raise UsageError(f"{given}: {source[:200]!r} is not a git URL pip can install fleetgen from (https://, "
                         "ssh://, git://, file:// or a path, with a path after the host); pass --fleetgen-from "
                         "<git URL of the fleetgen repository>") from None
    how = f"release {tag}" if ref == tag else f"commit {commit} of fleetgen {__version__}, no release tag"
    return line, how


def _is_a_copy(root: Path) -> None:
    if repofiles.lexists(root, pinfile.PIN_FILE):
        raise UsageError(f"{root} is a fleet already ({pinfile.PIN_FILE} pins its fleetgen), and init makes a fleet "
                         "from a copy of the fleetgen repository: add a cluster with `fleetgen add cluster`, a team "
                         "with a file in teams/; take a new fleetgen by changing the pin "
                         "(docs/operations/upgrade-fleetgen.md)")
    if not (root / "generator").is_dir() or not (root / "pyproject.toml").is_file():
        raise UsageError(f"{root} is not a copy of the fleetgen repository (no generator/ and pyproject.toml): "
                         "run `fleetgen init` at the root of a fresh copy")


def _not_the_example(root: Path, force: bool, note: Callable[[str], None]) -> None:
    """Refuse, unless `force`, a copy whose inputs are not the untouched example's (by content: a fleet
    of one's own may well keep the example's owners); with `force`, first say what goes aside."""
    departures = example.departures(root) + _uncommitted(root)
    if not departures:
        return
    shown = "; ".join(departures[:SHOWN]) + (f"; and {len(departures) - SHOWN} more" if len(departures) > SHOWN
                                              else "")
    if not force:
        raise UsageError(f"this is not the untouched example fleet: {len(departures)} of the files init replaces "
                         f"or moves aside differ from the example's ({shown}), and init would replace "
                         f"them; to start a new fleet, run init in a fresh copy of the fleetgen repository, or "
                         f"pass --force to replace these (they are kept in {emit.WORK}/init-*/previous/)")
    note(f"--force: this is not the untouched example fleet; moving aside into {emit.WORK}/init-*/previous/, "
         f"with the rest of {', '.join(f'{d}/' for d in REPLACED)} and tests/:")
    for line in departures:
        note(f"  {line}")


def _uncommitted(root: Path) -> list[str]:
    """fleetgen's own files that init moves aside and that differ from the copy's commit (an edited
    Dockerfile, a page added to docs/), where the copy is a git checkout: `<path> (not committed)` each."""
    out = _git(root, "status", "--porcelain=v1", "--untracked-files=all", "--", *GENERATOR, strip=False)
    return [f"{line[3:]} (not committed)" for line in (out or "").splitlines() if len(line) > 3]


def _check(root: Path, spec: FleetSpec) -> None:
    """What can refuse before anything is written, `.fleetgen/` included: the names that become paths,
    the copy itself, a work area git tracks, any link in the copy (a `tests/` or `.github/` pointing out
    would be written through), and a stage of an earlier init that cannot be proven this checkout's."""
    for flag, kind, value in (("--cluster", "cluster", spec.cluster), ("--team", "team", spec.team)):
        if (problem := name_problem(kind, value)) is not None:
            raise UsageError(f"{flag}: {problem}")
    if not _stopped_stage(root):  # an init stopped mid-switch may have moved generator/ aside: checked after
        _is_a_copy(root)          # its recovery (init_fleet)
    emit.refuse_committed(root)
    repofiles.refuse_links(root, UNTOUCHED)
    _refuse_an_unproven_switch(root)


def _stopped_stage(root: Path) -> bool:
    work = root / emit.WORK
    return work.is_dir() and ((work / emit.JOURNAL).is_file() or any((stage / "new").is_dir()
                                                                     for stage in work.glob("init-*"))
                              or any(stage.startswith("init-") for stage in proofs.issued_stages(root)))


def _refuse_an_unproven_switch(root: Path) -> None:
    """A stage of init's that still holds `new/` was stopped before it finished; fleetgen takes its own
    forward or back (`emit.recover`), but one whose proof the cache folder does not hold (the checkout
    copied elsewhere, another cache folder) it leaves alone: say where each part is instead."""
    work = root / emit.WORK
    for stage in sorted(work.glob("init-*")) if work.is_dir() else []:
        if (stage / "new").is_dir() and not proofs.stage_proven(root, stage.name):
            rel = stage.relative_to(root).as_posix()
            raise UsageError(f"an earlier `fleetgen init` was stopped before it finished, and this checkout's "
                             f"fleetgen cannot prove {rel}/ is its own stage (the cache folder holds no token for "
                             f"it), so it is left alone: what it had moved aside, if anything, is in {rel}/previous/, "
                             f"what it had not yet moved in is in {rel}/new/; restore the repository (git checkout, "
                             f"or move those back), delete {rel}/ and run init again")


def _build(scratch: Path, files: dict[str, str]) -> None:
    """Compile the new fleet in `scratch` (errors there change nothing in the repository)."""
    from generator import render

    scratch.mkdir()
    for rel, text in files.items():
        repofiles.write_bytes(scratch, rel, text.encode("utf-8"))
    (scratch / "tests/run").chmod(0o755)
    render.write(render.build(scratch, jobs=1))


def _moves(root: Path, new: Path) -> list[moves.Move]:
    """The renames (`generator/moves.py`) that switch the new fleet, built in `new`, in: each replaced
    path aside into the stage's `previous/`, each new one into its place, the kept parts of tests/ back
    into the new tests/."""
    switched = [("aside", rel) for rel in (*REPLACED, "tests", *FILES) if os.path.lexists(root / rel)]
    github = ".github" if not (root / ".github").is_dir() else CODEOWNERS  # no .github/: the new one as a whole
    switched += [("in", rel) for rel in ("teams", "clusters", "rendered", "tests", FLEET_FILE, github,
                                         pinfile.PIN_FILE) if os.path.lexists(new / rel)]
    # fleetgen's own tree goes once the pin is in: an init killed anywhere leaves a copy `./fleetgen` can run
    # (generator/ with pyproject.toml, else the pinned release), whose next init or render finishes the switch
    switched += [("aside", rel) for rel in GENERATOR if os.path.lexists(root / rel)]
    switched += [("in", "README.md")] if os.path.lexists(new / "README.md") else []
    return switched + [("back", f"tests/{kept}") for kept in KEPT_TESTS if os.path.lexists(root / "tests" / kept)]


def init_fleet(root: Path, spec: FleetSpec, force: bool = False,
               note: Callable[[str], None] = lambda line: None) -> tuple[list[str], str]:
    """Make `root` the fleet `spec` describes. Returns the paths written (relative to `root`) and the
    folder, under .fleetgen/, that keeps what they replaced. An earlier init that was killed is first
    taken forward or back, and `note` gets a line saying which."""
    _check(root, spec)
    requirement, how = pin_requirement(root, spec.fleetgen_from)
    files = _files(spec, pinfile.text(requirement, how))  # values are checked by the render in the stage
    with emit.locked(root):
        for line in emit.recover(root):
            note(line)
        _is_a_copy(root)
        _not_the_example(root, force, note)
        stage, token = emit.issue_init_stage(root)
        new = root / emit.WORK / stage / "new"
        try:
            _build(new, files)
        except BaseException:
            emit.drop_init_stage(root, stage)
            raise
        emit.switch_init(root, stage, token, _moves(root, new))
    written = [rel for rel in (*files, CODEOWNERS) if (root / rel).is_file()]
    return [*written, "rendered/"], f"{emit.WORK}/{stage}/previous/"
