"""The main job: load the fleet, compile every cluster, validate, then write or compare.

Nothing is written unless every step succeeded: findings of any check abort before the emitter
touches `rendered/`.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from generator import emit, incremental, repofiles
from generator.checks import load_fleet
from generator.checks.advice import advise
from generator.compile import compile_cluster
from generator.compile.codeowners import GENERATED_MARK, codeowners
from generator.compile.codeowners import PATH as CODEOWNERS
from generator.compile.gitops import GITOPS, compile_gitops
from generator.compile.manifest import Manifest
from generator.config.fleet import Fleet
from generator.config.repo import FLEET_FILE, load_repo_config
from generator.errors import Finding, InputError, UsageError
from generator.processes import collector_paused, die_with_parent, pool_context
from generator.validate.pipeline import Options, Report, validate_compiled


@dataclass
class Build:
    """A compiled, validated fleet and the file tree it renders to."""

    fleet: Fleet
    compiled: dict[str, list[Manifest]]
    gitops: list[Manifest]
    tree: emit.Tree
    report: Report
    only: list[str] | None
    extra_files: dict[str, str]
    """Files outside rendered/ (path relative to the root -> text), e.g. .github/CODEOWNERS."""
    keys: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Per cluster: (incremental key, object count), recorded after a successful write."""
    reused: list[str] = field(default_factory=list)
    """Clusters taken unchanged from rendered/ (same key, untouched files): not compiled again,
    not in `tree`, not compared."""
    warnings: list[Finding] = field(default_factory=list)
    """What Kueue will do differently from what the inputs seem to say (`config/advice.py`)."""

    def notices(self) -> list[str]:
        """Checks that could not run, then the warnings: what `render` and `validate` print to stderr."""
        return [*(f"note: {n}" for n in self.report.notes), *(f"warning: {w}" for w in self.warnings)]


AUTO_PARALLEL_CLUSTERS = 8
"""From this many clusters on, `--jobs auto` renders in parallel (measured: 1.8x on 2 cores at 50)."""
MAX_AUTO_JOBS = 8
PARALLEL_EMIT_OBJECTS = 4000
"""From this many objects in one cluster rendered alone, `--jobs auto` writes their YAML text in
one process per core: most of a large cluster's time is the emitter, and every object is
written on its own (10,000 teams in one pool: 90,000 objects)."""
_WORKER: dict[str, object] = {}


def _worker_init(root: str, options: Options, parent: int) -> None:
    die_with_parent(parent)
    gc.disable()  # the worker only builds (see processes.collector_paused)
    _WORKER["fleet"] = load_fleet(Path(root))
    _WORKER["options"] = options


def _worker_cluster(name: str) -> tuple[str, list[Manifest], Report, emit.Tree]:
    """Compile, validate and emit one cluster in a worker process."""
    fleet = _WORKER["fleet"]
    assert isinstance(fleet, Fleet)
    options = _WORKER["options"]
    assert isinstance(options, Options)
    manifests = compile_cluster(fleet, name)
    report = validate_compiled(fleet, {name: manifests}, options)
    return name, manifests, report, emit.cluster_tree(name, manifests) if not report.findings else {}


def _texts(objects: list[emit.FileSource]) -> list[bytes]:
    return [emit.object_text(source, body) for source, body in objects]


def _inherited_texts(start: int, stop: int) -> list[bytes]:
    """`_texts` of a slice of the objects a forked helper inherited (`_cluster_tree`)."""
    objects = _WORKER["emit"]
    assert isinstance(objects, list)
    return _texts(objects[start:stop])


def _cluster_tree(name: str, manifests: list[Manifest], jobs: int) -> emit.Tree:
    """`emit.cluster_tree`, with the files' text written in `jobs` processes (this one among
    them) when there are many: the same bytes, in the same order."""
    files = emit.cluster_files(name, manifests)
    if jobs < 2 or len(files) < PARALLEL_EMIT_OBJECTS:
        return emit.texts_of(files)
    import concurrent.futures

    objects = list(files.values())
    size = -(-len(objects) // jobs)
    starts = range(size, len(objects), size)
    context = pool_context()
    # A forked helper finds the objects in the memory it inherits; a spawned one is sent only
    # what the text is made of (a Manifest, origins and all, takes longer to unpickle than its
    # YAML takes to write). Unpickling half of a 10,000-team pool's objects took a second.
    _WORKER["emit"] = objects
    try:
        with concurrent.futures.ProcessPoolExecutor(len(starts), mp_context=context, initializer=die_with_parent,
                                                    initargs=(os.getpid(),)) as pool:
            if context.get_start_method() == "fork":
                others = [pool.submit(_inherited_texts, i, i + size) for i in starts]
            else:
                others = [pool.submit(_texts, objects[i:i + size]) for i in starts]
            texts = _texts(objects[:size])
            for other in others:
                texts += other.result()
    finally:
        del _WORKER["emit"]
    return emit.texts_of(files, texts)


def _parallel(root: Path, names: list[str], options: Options, jobs: int,
              progress: Callable[[str], None] | None) -> tuple[dict[str, list[Manifest]], Report, emit.Tree]:
    import concurrent.futures
    import multiprocessing

    compiled: dict[str, list[Manifest]] = {}
    report, tree = Report(), {}
    context = multiprocessing.get_context("spawn")  # no fork-inherited state; same result on every OS
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_init,
                                                initargs=(str(root), options, os.getpid())) as pool:
        for name, manifests, part, files in pool.map(_worker_cluster, names):
            compiled[name] = manifests
            report.findings += part.findings
            report.notes = part.notes
            tree.update(files)
            if progress:
                progress(name)
    return compiled, report, tree


@collector_paused()
def build(root: Path, clusters: list[str] | None = None, options: Options | None = None, jobs: int = 0,
          progress: Callable[[str], None] | None = None, reuse: str | None = None,
          index: incremental.Index | None = None) -> Build:
    """Load, compile and validate; raise InputError on config errors or object findings.

    With `reuse` (the options part of the keys) every cluster's incremental key is computed, and
    with an `index` too, clusters whose key and files are what the index recorded are not compiled
    (`Build.reused`; their files are left out of `Build.tree`). With `jobs` > 1 clusters are
    compiled, validated and emitted in that many processes (0: one per core from
    AUTO_PARALLEL_CLUSTERS clusters on); the result is assembled in sorted order, byte-identical
    to a serial build.
    """
    fleet = load_fleet(root)
    options = options or Options()
    names = _chosen(fleet, clusters)
    keys: dict[str, tuple[str, int]] = {}
    reused: list[str] = []
    if reuse is not None:  # incremental: clusters whose inputs, code and files are unchanged are kept
        keys, reused = _reusable(root, fleet, names, reuse, index)
        names = [n for n in names if n not in reused]
    cores = jobs or min(os.cpu_count() or 1, MAX_AUTO_JOBS)
    if jobs == 0:  # auto: processes pay off once there are enough clusters to share out
        jobs = cores if len(names) >= AUTO_PARALLEL_CLUSTERS else 1
    gitops = compile_gitops(fleet)
    if jobs > 1 and len(names) > 1:
        compiled, report, tree = _parallel(root, names, options, min(jobs, len(names)), progress)
        gitops_report = validate_compiled(fleet, {}, options, extra=gitops)
        report.findings = sorted(set(report.findings + gitops_report.findings))
    else:
        compiled, report, tree = _serial(fleet, names, options, gitops, cores, progress)
    if report.findings:
        raise InputError(report.findings)
    for name in names:
        if name in keys:
            keys[name] = (keys[name][0], sum(m.kubernetes for m in compiled[name]))
    tree.update(emit.cluster_tree(GITOPS, gitops))
    repo = load_repo_config(root)
    if repo is None:
        _no_orphaned_codeowners(root)
    extra = {CODEOWNERS: codeowners(fleet, repo)} if repo else {}
    return Build(fleet, compiled, gitops, dict(sorted(tree.items())), report,
                 [*names, GITOPS] if clusters else None, extra, keys, reused,
                 advise(fleet, sorted(set(clusters)) if clusters else None))


def _chosen(fleet: Fleet, clusters: list[str] | None) -> list[str]:
    """The clusters to build, sorted: those named (each must exist), else every one."""
    if not clusters:
        return sorted(fleet.clusters)
    unknown = sorted(set(clusters) - set(fleet.clusters))
    if unknown:
        raise UsageError(f"unknown cluster {', '.join(unknown)}; known: {', '.join(sorted(fleet.clusters))}")
    return sorted(set(clusters))


def _reusable(root: Path, fleet: Fleet, names: list[str], reuse: str,
              index: incremental.Index | None) -> tuple[dict[str, tuple[str, int]], list[str]]:
    """Every cluster's incremental key (with 0 objects), and the clusters the index holds unchanged:
    same key, files untouched (with their object count as recorded)."""
    keys: dict[str, tuple[str, int]] = {}
    for name in names:
        inputs = [t.source.path for t in fleet.teams_in(name)] + \
            [fleet.clusters[c].source.path for c in fleet.linked(name)]
        keys[name] = (incremental.cluster_key(root, fleet.clusters[name].source.path, inputs, reuse), 0)
    reused: list[str] = []
    if index is not None:
        index.verify(root, [n for n in names if index.clusters.get(n, ("", 0))[0] == keys[n][0]])
        for name in names:
            kept = incremental.reusable(index, root, name, keys[name][0])
            if kept is not None:
                keys[name] = (keys[name][0], kept)
                reused.append(name)
    return keys, reused


def _serial(fleet: Fleet, names: list[str], options: Options, gitops: list[Manifest], cores: int,
            progress: Callable[[str], None] | None) -> tuple[dict[str, list[Manifest]], Report, emit.Tree]:
    """Compile the clusters one after another in this process and validate them with the GitOps
    objects; their files only when nothing was found (a large cluster's text in `cores` processes)."""
    compiled: dict[str, list[Manifest]] = {}
    for name in names:
        compiled[name] = compile_cluster(fleet, name)
        if progress:
            progress(name)
    report = validate_compiled(fleet, compiled, options, extra=gitops)
    tree: emit.Tree = {}
    if not report.findings:
        for name in names:
            tree.update(_cluster_tree(name, compiled[name], cores))
    return compiled, report, tree


def _no_orphaned_codeowners(root: Path) -> None:
    """Without fleet.yaml fleetgen writes no CODEOWNERS; one it generated earlier would go on
    granting the owners of a fleet.yaml that is gone, so its removal must be deliberate."""
    try:
        text = repofiles.read_bytes(root, CODEOWNERS)
    except FileNotFoundError:
        return
    if text.startswith(GENERATED_MARK.encode()):
        raise InputError([Finding(
            FLEET_FILE, None, "", f"is missing, but {CODEOWNERS} was generated from it; its owners would go stale",
            f"restore {FLEET_FILE}, or delete {CODEOWNERS} as well if this repository is to have no code owners")])


def object_count(result: Build) -> int:
    """Kubernetes objects rendered (SkyPilot tasks and kustomizations are not objects)."""
    return (sum(m.kubernetes for ms in result.compiled.values() for m in ms) + len(result.gitops)
            + sum(result.keys[name][1] for name in result.reused))


def rendered_dir(root: Path) -> Path:
    """`<root>/rendered` (refused if it is a symbolic link)."""
    return repofiles.inside(root, emit.RENDERED)


def _stale_extra(result: Build) -> list[str]:
    root = result.fleet.root
    return [rel for rel, text in result.extra_files.items()
            if not repofiles.inside(root, rel).is_file() or repofiles.read_bytes(root, rel) != text.encode()]


def _compared(result: Build) -> emit.Tree:
    """The files of rendered/ that `result.tree` is compared with: those of `result.only`, else
    all but the reused clusters' (the index vouched for those)."""
    rendered = rendered_dir(result.fleet.root)
    if result.only is not None or not result.reused:
        return emit.read_tree(rendered, result.only)
    tops = [name for name in (sorted(os.listdir(rendered)) if rendered.is_dir() else [])
            if name not in result.reused]
    folders = [name for name in tops if repofiles.inside(rendered, name, "rendered/").is_dir()]
    current = emit.read_tree(rendered, folders)
    for name in tops:
        if name not in folders:  # a stray file at the top: compared (and removed) like any other
            current[name] = repofiles.read_bytes(rendered, name, "rendered/")
    return current


def check(result: Build) -> emit.TreeDiff:
    """What a render would change in the committed tree (and in files such as CODEOWNERS)."""
    diff = emit.compare(_compared(result), result.tree)
    stale = [f"../{rel}" for rel in _stale_extra(result)]
    return emit.TreeDiff(diff.added, sorted(diff.changed + stale), diff.removed)


def write(result: Build, stats: emit.Stats | None = None) -> emit.TreeDiff:
    """Write the tree (atomically) and the extra files if anything differs; return what changed.
    `stats` gets the stat data of every file written."""
    diff = check(result)
    if diff:
        # Only top-level entries (clusters, gitops) with a difference are replaced, in one
        # transaction with the stale files outside rendered/ (CODEOWNERS): the files of unchanged
        # clusters are not rewritten, and the owners never lag behind the tree.
        tops = sorted({p.split("/", 1)[0] for p in diff.added + diff.changed + diff.removed
                       if not p.startswith("../")})  # ../ entries are files outside rendered/
        files = {rel: result.extra_files[rel].encode("utf-8") for rel in _stale_extra(result)}
        emit.write_tree(result.fleet.root, result.tree, tops, files, stats)
    return diff


@dataclass
class Outcome:
    """What one `fleetgen render` did, for the command line to say."""

    said: list[str] = field(default_factory=list)
    """Lines for standard output: what was written, or what is stale."""
    stale: bool = False
    """`--check` found files that differ (exit 1)."""


def key_of(options: Options) -> str:
    """The render options' part of every incremental key."""
    return incremental.options_key(options.schema_location, options.crd_location)




def render_fleet(root: Path, clusters: list[str], check_only: bool, jobs: int, options: Options,
                 lock_timeout: float, note: Callable[[str], None],
                 progress: Callable[[str], None] | None = None, full: bool = False) -> Outcome:
    """`fleetgen render`: under the repository's lock, finish a killed render or init (`note` says
    what it did to an init), stop at once when inputs, generator and tree are as the last render
    left them (`incremental.Index`), else compile the clusters whose inputs or files changed and
    write or compare. `full` trusts no record: every cluster is compiled and every file compared.

    `note` gets checks that could not run, then warnings, as soon as the build has them: before
    the write, so a render interrupted while writing has said them."""
    out = Outcome()
    emit.refuse_committed(root)  # before the lock file in .fleetgen/ is even opened
    with emit.locked(root, wait=lock_timeout, writing=not check_only):
        if not check_only:
            for line in emit.recover(root):  # finish (or drop) a render or an init that was killed
                note(line)
        elif (journal := emit.read_journal(root)) is not None:  # --check moves nothing, but refuses a planted one
            what = "`fleetgen init`" if "moves" in journal else "render"
            note(f"note: a {what} was interrupted during its switch ({emit.WORK}/{emit.JOURNAL}); "
                 "`fleetgen render` finishes it, --check compares the tree as it is")
        options_key = key_of(options)
        index = incremental.Index() if full or clusters else incremental.Index.load(root)
        key = incremental.inputs_key(root, options_key)  # the whole-fleet key, recorded after the write
        files = incremental.unchanged_since_last_render(root, options_key, index, key)
        if files is not None:
            out.said.append(incremental.up_to_date_line(files, check_only))
            return out
        result = build(root, clusters or None, options, jobs=jobs, progress=progress,
                       reuse=None if clusters else options_key, index=None if full else index)
        for line in result.notices():
            note(line)
        if check_only:
            diff = check(result)
            out.stale = bool(diff)
            kept = f"; {len(result.reused)} clusters unchanged since the last render" if result.reused else ""
            out.said += (["rendered/ is out of date:", *(f"  {line}" for line in diff.lines()),
                          "run `fleetgen render` and commit the result"] if diff else
                         [f"rendered/ is up to date ({len(result.tree)} files compared{kept})"])
            if index.refreshed and not full:
                index.save(root)
            return out
        stats: emit.Stats = {}
        diff = write(result, stats)
        if not clusters:
            _remember(index, root, key, result, stats)
        objects, count = object_count(result), len(result.compiled) + len(result.reused)
        kept = f" ({len(result.reused)} unchanged clusters not compiled again)" if result.reused else ""
        out.said.append(f"rendered {objects} objects in {count} clusters: {len(diff.added)} added, "
                        f"{len(diff.changed)} changed, {len(diff.removed)} removed files{kept}" if diff else
                        f"rendered/ already up to date ({objects} objects in {count} clusters){kept}")
    return out


def _remember(index: incremental.Index, root: Path, key: str, result: Build, stats: emit.Stats) -> None:
    """Record a whole-fleet render in the index: its keys, and an entry per file from the stat
    data of the write (files not rewritten are read back once, so entry and content agree)."""
    index.key = key
    index.clusters = dict(sorted(result.keys.items()))
    codeowners = result.extra_files.get(CODEOWNERS)
    try:
        index.record(root, result.tree, stats, codeowners.encode("utf-8") if codeowners is not None else None)
    except (OSError, repofiles.UnsafePath):
        return  # the tree changed under us: no record, the next render does the full work
    index.save(root)
