"""The two sides of a diff: a git ref and the work tree, or two folders.

A folder with `clusters/` is a fleet repository and is compiled in memory (so the capacity
table has pool sizes); any other folder is taken as an already rendered tree.

Against a git ref the base must be what the base's own generator makes of the base's inputs, or
a pull request that changes the generator (or a pinned chart version in generator/versions.yaml)
shows nothing. So:

- when the base's generator/ is the one running (the common case: a team-file change), both
  sides are compiled here, and only the clusters whose inputs differ: the cost follows the change;
- when it differs, the base's own generator renders the base in a child process;
- in a fleet made by `fleetgen init` (no generator/, a `fleetgen.txt` pin): when the pin moved, the
  release the base pins renders the base, installed once in the cache folder (`releaseenv`);
- when that cannot run, the base's committed rendered/ is used, and failing that, this
  generator; the report says which.

With `--rendered` (the preview workflow, once `fleetgen render --check` has passed) nothing is
compiled: the committed rendered/ of the base and of the work tree are compared, and only the
files git reports as different are read. Both fleets are still loaded (unchanged files once) for
the capacity table, in a second process while the first reads and compares the rendered files.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from generator import emit, pinfile, repofiles
from generator.compile.gitops import GITOPS
from generator.config.fleet import Fleet
from generator.diff import gitblobs
from generator.errors import InputError, UsageError

INPUTS = ("teams", "clusters", "fleet.yaml")
GENERATOR = ("generator", "pyproject.toml")
BASE_RENDER_TIMEOUT = 900


@dataclass
class Side:
    """One side of a diff: its rendered tree, and the fleet when it was compiled here."""

    tree: emit.Tree
    fleet: Fleet | None
    label: str
    notes: list[str] = field(default_factory=list)
    clusters: list[str] | None = None
    """The clusters compiled, when only those whose inputs differ were (None: all)."""
    where: str = ""
    """What a path of `tree` is shown after in an error (`main:rendered/`, `rendered/`, `DIR/`)."""
    pin: pinfile.Pin | None = None
    """The fleetgen release this side's `fleetgen.txt` pins (None: it has none, or it does not read)."""
    pin_error: str = ""
    """Why this side's `fleetgen.txt` does not read, where it does not."""
    by_pin: bool = False
    """Whether that release rendered `tree` (not the fleetgen running the diff)."""


def compiled(root: Path, label: str, clusters: list[str] | None = None) -> Side:
    """Compile the fleet at `root` in memory (no network checks, nothing written)."""
    from generator import render

    if not (root / "clusters").is_dir():
        return Side(emit.read_tree(root), None, label, where=f"{label.rstrip('/')}/")
    pin, pin_error = _pin_of(root, pinfile.PIN_FILE if label == "work tree"
                             else f"{label.split(' ')[0].rstrip('/')}/{pinfile.PIN_FILE}")
    result = render.build(root, clusters=clusters)
    tree = result.tree
    if clusters is not None:  # build() adds the GitOps files of every cluster: keep the compared ones'
        def compared(path: str) -> bool:
            parts = path.split("/")
            if parts[0] != GITOPS:
                return parts[0] in clusters
            return len(parts) < 3 or parts[1] in clusters or parts[1] not in result.fleet.clusters
        tree = {p: c for p, c in tree.items() if compared(p)}
    return Side(tree, result.fleet, label, clusters=clusters, pin=pin, pin_error=pin_error)


def _pin_of(root: Path, shown: str) -> tuple[pinfile.Pin | None, str]:
    """A side's pin, or why it does not read, named `shown` (a diff reports it; `./fleetgen` refuses to run
    such a pin)."""
    try:
        return pinfile.read(root, shown), ""
    except InputError as error:
        return None, str(error).splitlines()[0]


def _resolve(root: Path, ref: str) -> tuple[Path, str, str, set[str]]:
    """The repository's top folder (every later git command runs there, so paths mean the same to
    all of them), the fleet's folder inside it ("" or "sub/"), the commit of `ref`, and the
    top-level names the fleet's folder holds at that commit."""
    top = Path(gitblobs.git(root, "rev-parse", "--show-toplevel").decode().strip())
    prefix = root.resolve().relative_to(top.resolve()).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    commit = gitblobs.git(top, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
    listed = gitblobs.git(top, "ls-tree", "--name-only", "-z", commit, "--", prefix or ".").decode().split("\0")
    return top, prefix, commit, {name.removeprefix(prefix) for name in listed if name}


def _export(root: Path, commit: str, names: list[str], dest: Path, ref: str) -> None:
    """`names` (top-level entries of the fleet at `commit`) into `dest` as the commit holds them:
    read raw, so no `.gitattributes` of the pull request can drop or rewrite a file (`gitblobs`)."""
    if names:
        gitblobs.export(root, commit, names, dest, ref)


def code_key(package: Path) -> str:
    """The hash `incremental.code_key` gives a generator package (its .py, .yaml and .j2 files)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".j2") and p.is_file()):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def git_sides(root: Path, ref: str) -> tuple[Side, Side]:
    """The base at git `ref` and the work tree, each rendered by its own generator."""
    from generator import incremental

    top, prefix, commit, present = _resolve(root, ref)
    label = f"{ref} ({commit[:12]})"
    with tempfile.TemporaryDirectory(prefix="fleetgen-base-") as tmp:
        _export(top, commit, [prefix + n for n in sorted(present & {*INPUTS, *GENERATOR, pinfile.PIN_FILE,
                                                                         "rendered"})], Path(tmp), ref)
        base_root = Path(tmp) / prefix
        base_root.mkdir(parents=True, exist_ok=True)
        if not (base_root / "clusters").is_dir():  # nothing at that ref yet: everything is new
            return Side({}, None, ref), compiled(root, "work tree")
        if not (base_root / "generator").is_dir():
            return _pinned_sides(root, base_root, label)
        if code_key(base_root / "generator") == incremental.code_key():
            return _same_generator(root, base_root, label)
        return _own_generator(base_root, label), compiled(root, "work tree")


def _same_generator(root: Path, base_root: Path, label: str) -> tuple[Side, Side]:
    """Both sides compiled here, only the clusters whose inputs differ."""
    from generator.checks import load_fleet

    try:
        before_fleet = load_fleet(base_root)
    except (InputError, UsageError):  # the base itself is broken: compare everything
        return compiled(base_root, label), compiled(root, "work tree")
    after_fleet = load_fleet(root)
    changed = changed_clusters(base_root, root, before_fleet, after_fleet)
    before = compiled(base_root, label, [c for c in changed if c in before_fleet.clusters])
    after = compiled(root, "work tree", [c for c in changed if c in after_fleet.clusters])
    skipped = len({*before_fleet.clusters, *after_fleet.clusters}) - len(changed)
    if skipped:
        after.notes.append(f"{skipped} cluster(s) whose inputs are unchanged were not compiled")
    return before, after


def changed_clusters(base_root: Path, root: Path, before: Fleet, after: Fleet) -> list[str]:
    """Clusters whose cluster file, or any team file naming them, differs (all when fleet.yaml does),
    with the MultiKueue managers and workers linked to them."""
    def text(where: Path, rel: str) -> bytes | None:
        path = where / rel
        return path.read_bytes() if path.is_file() else None

    everyone = sorted({*before.clusters, *after.clusters})
    if text(base_root, "fleet.yaml") != text(root, "fleet.yaml"):
        return everyone
    out = {c for c in everyone
           if text(base_root, f"clusters/{c}.yaml") != text(root, f"clusters/{c}.yaml")
           or (c in before.clusters) != (c in after.clusters)}
    teams = sorted({*before.teams, *after.teams})
    for name in teams:
        old, new = before.teams.get(name), after.teams.get(name)
        old_text = text(base_root, old.source.path) if old else None
        new_text = text(root, new.source.path) if new else None
        if old_text != new_text or (old and new and old.source.path != new.source.path):
            for fleet_team in (old, new):
                if fleet_team is not None:
                    out.update(c for c in fleet_team.config.quotas if c in everyone)
    # A MultiKueue manager and its workers shape each other's output (one step: a worker's change
    # reaches its manager, not the manager's other workers).
    direct = sorted(out)
    out.update(linked for fleet in (before, after) for name in direct for linked in fleet.linked(name))
    return sorted(out)


def _pinned_sides(root: Path, base_root: Path, label: str) -> tuple[Side, Side]:
    """A fleet that takes fleetgen by its pin: the base rendered by the release it pins where the
    change moves the pin, both sides here otherwise (the base has no generator/ to run)."""
    from generator.diff import releaseenv

    work_pin = pinfile.read(root)
    # a base pin that does not read is the base's own problem: its pull request may be the one that fixes it
    base_pin, broken = _pin_of(base_root, f"{label.split(' ')[0]}:{pinfile.PIN_FILE}")
    if base_pin is None or base_pin == work_pin:
        before, after = _same_generator(root, base_root, label)
        before.pin, after.pin, before.pin_error = base_pin, work_pin, broken
        before.by_pin = after.by_pin = work_pin is not None and base_pin == work_pin
        if broken:
            before.notes.append(f"the base's pin does not read ({broken}): it was rendered by this fleetgen")
        elif base_pin is None:
            before.notes.append("the base has no generator/: it was rendered by this fleetgen")
        return before, after
    after = compiled(root, "work tree")
    after.by_pin = work_pin is not None
    who = f"its pinned fleetgen {base_pin.label}"
    try:
        program = releaseenv.installed(base_pin)
    except releaseenv.InstallError as error:
        before = _own_generator(base_root, label, [], who, failed=str(error))
    else:
        before = _own_generator(base_root, label, [str(program)], who)
    before.pin, before.by_pin = base_pin, before.label.endswith(f"rendered by {who}")
    return before, after


def _own_generator(base_root: Path, label: str, command: list[str] | None = None, who: str = "its own generator",
                   failed: str = "") -> Side:
    """The base rendered by its own generator (a child process importing the base's code), or by
    `command` (its pinned release's program); an empty `command` could not be had, `failed` says why."""
    from generator.checks import load_fleet

    env = {**os.environ, "CI": "1"}
    if command is None:  # the base's generator/ on the path; a pinned release's program imports its own
        command, env["PYTHONPATH"] = [sys.executable, "-m", "generator"], str(base_root)
    code, reason = 2, failed
    if command:
        try:
            proc = subprocess.run([*command, "--root", str(base_root), "render"], cwd=base_root, env=env,
                                  capture_output=True, text=True, check=False, timeout=BASE_RENDER_TIMEOUT)
            code, reason = proc.returncode, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
        except (OSError, subprocess.TimeoutExpired) as error:
            reason = str(error)[:300]
    try:
        fleet: Fleet | None = load_fleet(base_root)
        fleet_note = ""
    except (InputError, UsageError):
        fleet, fleet_note = None, "; the base's files do not load with this fleetgen, so no capacity table"
    if code == 0:
        return Side(emit.read_tree(base_root / "rendered"), fleet, f"{label}, rendered by {who}",
                    [f"the base was rendered by {who}{fleet_note}"])
    committed = base_root / "rendered"
    if committed.is_dir():
        return Side(emit.read_tree(committed), fleet, f"{label}, rendered/ as committed",
                    [f"the base's {who.removeprefix('its ')} could not run ({reason}): its committed rendered/ is "
                     f"compared{fleet_note}"])
    side = compiled(base_root, label)
    side.notes.append(f"the base's {who.removeprefix('its ')} could not run ({reason}) and it has no rendered/: "
                      "the base was rendered by this fleetgen, so generator changes do not show")
    return side


@dataclass(frozen=True)
class Committed:
    """Where a `--rendered` diff's base is: what `_resolve` found for the ref."""

    root: Path
    top: Path
    prefix: str
    commit: str
    listed: frozenset[str]
    ref: str

    @property
    def label(self) -> str:
        return f"{self.ref} ({self.commit[:12]}), rendered/ as committed"


def committed(root: Path, ref: str) -> Committed:
    """The ref of a `--rendered` diff, refused unless both sides have a committed rendered/."""
    top, prefix, commit, listed = _resolve(root, ref)
    if "rendered" not in listed or not (root / "rendered").is_dir():
        missing = ref if "rendered" not in listed else "the work tree"
        raise UsageError(f"--rendered compares committed rendered/ trees, and {missing} has none: "
                         "run without --rendered")
    return Committed(root, top, prefix, commit, frozenset(listed), ref)


def committed_fleets(base: Committed) -> tuple[Fleet | None, Fleet]:
    """The base's fleet as its files at the ref read (None when they do not load) and the work
    tree's, checked: unchanged files are read once for both."""
    from generator.checks import load_fleet
    from generator.config.fleet import LoadCache, read_fleet

    cache: LoadCache = {}
    with tempfile.TemporaryDirectory(prefix="fleetgen-base-") as tmp:
        _export(base.top, base.commit, [base.prefix + n for n in sorted(base.listed & set(INPUTS))], Path(tmp),
                base.ref)
        try:
            base_fleet: Fleet | None = read_fleet(Path(tmp) / base.prefix, cache=cache)
        except (InputError, UsageError):
            base_fleet = None
    return base_fleet, load_fleet(base.root, cache=cache)


def rendered_sides(base: Committed) -> tuple[Side, Side]:
    """The base's committed rendered/ and the work tree's, read only where they differ (no fleets:
    `committed_fleets` loads those, in another process while this runs). Only regular files are
    compared: a link (dangling or not), a submodule or a nested repository on either side is an
    error naming it, never read through or taken for a deletion."""
    top, commit, where = base.top, base.commit, f"{base.prefix}rendered/"
    with ThreadPoolExecutor(2) as git:  # git walks the work tree twice at once
        tracked = git.submit(gitblobs.git, top, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", commit, "--",
                             where)
        untracked = git.submit(gitblobs.git, top, "ls-files", "-z", "--others", "--exclude-standard", "--", where)
        changed = _raw_diff(tracked.result())
        new = [p for p in untracked.result().decode("utf-8", "surrogateescape").split("\0") if p]
    for path, (old_mode, _, new_mode) in changed.items():
        for mode, side in ((old_mode, base.ref), (new_mode, "the work tree")):
            if mode in gitblobs.KINDS:
                raise UsageError(f"{side} holds {gitblobs.KINDS[mode]} in rendered/ ({path}): rendered/ holds only "
                                 "files fleetgen writes; remove it and run `fleetgen render`")
    paths = sorted({p.removeprefix(where) for p in [*changed, *new] if p.startswith(where)})
    at_base = [where + p for p in paths if changed.get(where + p, ("000000",))[0] != "000000"]
    blobs = gitblobs.read_blobs(top, [changed[p][1] for p in at_base], [f"{base.ref}:{p}" for p in at_base])
    before: emit.Tree = {p.removeprefix(where): blob for p, blob in zip(at_base, blobs, strict=True)}
    rendered = repofiles.inside(base.root, "rendered")
    after: emit.Tree = {p: repofiles.read_bytes(rendered, p, "rendered/") for p in paths
                        if os.path.lexists(rendered / p)}
    note = (f"compared rendered/ as committed ({len(paths)} file(s) differ); the preview workflow has checked "
            "that the work tree's matches teams/ and clusters/")
    base_pin, work_pin = _committed_pin(base), pinfile.read(base.root)
    return (Side(before, None, base.label, where=f"{base.ref}:{where}", pin=base_pin, by_pin=True),
            Side(after, None, "work tree, rendered/", [note], where="rendered/", pin=work_pin, by_pin=True))


def _committed_pin(base: Committed) -> pinfile.Pin | None:
    """The pin `fleetgen.txt` held at the base (its committed rendered/ is what that release made)."""
    if pinfile.PIN_FILE not in base.listed:
        return None
    path = f"{base.prefix}{pinfile.PIN_FILE}"
    data = gitblobs.git(base.top, "cat-file", "blob", f"{base.commit}:{path}")
    try:
        return pinfile.parse(data.decode("utf-8"), f"{base.ref}:{path}")
    except (UnicodeDecodeError, InputError):
        return None


def _raw_diff(data: bytes) -> dict[str, tuple[str, str, str]]:
    """`git diff --raw -z` as path -> (mode at the base, object at the base, mode in the work tree);
    mode 000000 where the path is absent."""
    fields = data.decode("utf-8", "surrogateescape").split("\0")
    out = {}
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        old_mode, new_mode, old_oid = meta.lstrip(":").split()[:3]
        out[path] = (old_mode, old_oid, new_mode)
    return out
