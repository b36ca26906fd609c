"""Skip work when nothing can have changed: an index of the rendered tree, like git's.

A full render of a large fleet takes tens of seconds; most renders in CI and pre-commit change
nothing. After each successful render fleetgen records, outside the repository (in the cache
folder, keyed by the fleet's path):

- a key per cluster: the hash of its inputs (its file, its teams' files, linked MultiKueue
  clusters), the generator's own code and data, and the render options, with its object count;
- a key for the whole fleet (every input file);
- an index entry per rendered file: size, mtime, ctime, inode and a hash of its content.

Reading the tree back costs one `lstat` per recorded folder and file, and no listing. As in git's
index, a file's content is read and hashed only when its stat data differs from the entry or is
*racy* (changed in the same second as the record was written, so a later edit could carry the
same times): a hand edit with its mtime put back still changes its ctime and is caught. A
folder's mtime and ctime change whenever an entry is added, removed or renamed in it, so its
stat data stands for its names. Files that were hashed and matched get fresh entries, so the next
run is fast again. Each top-level folder (a cluster, `gitops`) keeps its *layout* (the paths of
its folders and files) and its entries in their own files, and the main record keeps a digest of
each layout's stat data: a run whose layouts all restat to their digests reads nothing else, and
one that finds a folder changed lists that folder and reads its entries.

Three users: a plain `render` stops at once when the whole key and the tree match (the no-op);
`render` and `render --check` compile only the clusters whose key changed or whose files no
longer match; everything else is taken as rendered. `--cluster`, `--full` and a missing record
do the full work. Nothing is committed, so output stays byte-identical everywhere.

The index is input like any other: its main record and each folder's entries are sealed with a
key kept in the cache folder (`proofs`), and a record that is not sealed by it (forged, edited,
committed) or does not parse as exactly what fleetgen writes is not used: the work is done and
every file compared. A layout needs no seal: the sealed main record holds its digest.
"""

from __future__ import annotations

import array
import functools
import hashlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from generator import proofs, repofiles
from generator.cachedir import cache_dir
from generator.processes import die_with_parent, pool_context

INPUTS = ("teams", "clusters")
EXTRA_INPUTS = ("fleet.yaml",)
CODEOWNERS = ".github/CODEOWNERS"
RENDERED = "rendered"
FORMAT = 5
SECOND = 1_000_000_000

Entry = tuple[int, int, int, int, str]
"""(size, mtime_ns, ctime_ns, inode, content hash) of one rendered file."""


def _hash_files(paths: list[Path], base: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        rel = path.relative_to(base).as_posix()
        digest.update(rel.encode())
        digest.update(b"\0")
        digest.update(repofiles.read_bytes(base, rel))
        digest.update(b"\0")
    return digest.hexdigest()


def content_hash(content: bytes) -> str:
    """What an index entry records of a file's content (160 bits: a collision is not a concern here)."""
    return hashlib.blake2b(content, digest_size=20).hexdigest()


def inputs_key(root: Path, options: str) -> str:
    """Hash of the inputs, the generator's code and data, and the render options; "" when an input
    cannot be read (a link, a permission): no fast path, and the loader reports it with its file."""
    try:
        files = [root / folder / rel for folder in INPUTS for rel in repofiles.files_under(root, folder)
                 if "/" not in rel and rel.endswith((".yaml", ".yml"))]
        files += [root / name for name in EXTRA_INPUTS if repofiles.inside(root, name).is_file()]
        inputs = _hash_files(files, root)
    except (OSError, repofiles.UnsafePath):
        return ""
    return hashlib.sha256("|".join([inputs, code_key(), options]).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def code_key() -> str:
    """Hash of the generator's own code and data (once per process: the code cannot change under it)."""
    package = Path(__file__).resolve().parent
    return _hash_files([p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".j2") and p.is_file()],
                       package)


def cluster_key(root: Path, cluster_file: str, input_files: list[str], options: str) -> str:
    """Hash of everything one cluster's output depends on: its file, its teams' files (and a
    MultiKueue manager's or worker's linked cluster files), code, options."""
    files = [root / cluster_file, *(root / t for t in sorted(input_files))]
    return hashlib.sha256("|".join([_hash_files(files, root), code_key(), options]).encode()).hexdigest()


def _record_dir(root: Path) -> Path:
    return cache_dir() / "renders" / proofs.root_key(root)


def _top_file(folder: Path, top: str) -> Path:
    return folder / f"top-{hashlib.sha256(top.encode()).hexdigest()[:24]}.json"


def _layout_file(folder: Path, top: str) -> Path:
    return folder / f"layout-{hashlib.sha256(top.encode()).hexdigest()[:24]}"


Stat = tuple[str, int, int, int, int]
"""(path relative to rendered/, size, mtime_ns, ctime_ns, inode) of one file."""

FIELDS = 5
"""Ints per path in a layout's stat data: mode, size, mtime_ns, ctime_ns, inode."""


def _walk(folder: str, rel: str, ints: array.array[int], paths: list[str]) -> bool:
    """Append the stat data (FIELDS ints) and path of every folder and file below `folder`, each
    folder before its contents, in the directory's own order; False at a link, a special file or
    an unreadable folder (the tree is then not what any render wrote)."""
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                path = f"{rel}/{entry.name}"
                paths.append(path)
                ints.extend((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
                if stat.S_ISDIR(st.st_mode):
                    if not _walk(entry.path, path, ints, paths):
                        return False
                elif not stat.S_ISREG(st.st_mode):
                    return False
    except OSError:
        return False
    return True


def _summary(ints: array.array[int], paths: list[str]) -> tuple[str, int]:
    """A layout's stat digest (its paths and their stat data) and its newest mtime or ctime."""
    digest = hashlib.blake2b(ints.tobytes(), digest_size=20)
    digest.update("\0".join(paths).encode("utf-8", "surrogateescape"))
    return digest.hexdigest(), max(max(ints[2::FIELDS], default=0), max(ints[3::FIELDS], default=0))


@dataclass
class Walked:
    """What a walk of rendered/<top> found: its layout (every folder and file, the top first)."""

    paths: list[str]
    ints: array.array[int]
    digest: str
    latest: int

    def files(self) -> list[Stat]:
        """Each regular file's path and stat data."""
        ints = self.ints
        return [(path, ints[k + 1], ints[k + 2], ints[k + 3], ints[k + 4])
                for path, k in zip(self.paths, range(0, len(ints), FIELDS), strict=True) if stat.S_ISREG(ints[k])]


def stat_top(rendered: str, top: str) -> Walked | None:
    """Walk rendered/<top> (listing every folder); None if unreadable or if it holds anything but
    folders and regular files. The slow path, and what a record is made of."""
    ints: array.array[int] = array.array("q")
    try:
        st = os.lstat(os.path.join(rendered, top))
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    ints.extend((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    paths = [top]
    if not _walk(os.path.join(rendered, top), top, ints, paths):
        return None
    return Walked(paths, ints, *_summary(ints, paths))


def restat(rendered: str, paths: list[str]) -> tuple[str, int] | None:
    """The digest and newest time of a recorded layout, from one `lstat` per path and no listing;
    None if a path is gone. The no-op's hot loop: as a folder's mtime and ctime change whenever
    an entry is added, removed or renamed in it, the same digest means the same names, and a
    file's ctime changes with any write (even with its mtime put back), as in git's index."""
    ints: array.array[int] = array.array("q")
    extend, lstat = ints.extend, os.lstat
    try:
        folder = os.open(rendered, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:  # relative to rendered/: the kernel walks fewer folders per path
        for path in paths:
            st = lstat(path, dir_fd=folder)
            extend((st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    except OSError:
        return None
    finally:
        os.close(folder)
    return _summary(ints, paths)


def _restat_many(rendered: str, layouts: dict[str, str]) -> dict[str, tuple[str, int] | None]:
    """`restat` of each top from its layout file (top -> path), for a worker process."""
    return {top: None if (paths := _read_layout(path)) is None else restat(rendered, paths)
            for top, path in layouts.items()}


def _read_layout(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read().split("\0")
    except OSError:
        return None


PARALLEL_TOPS = 8
"""From this many top-level folders on, they are checked in two processes: the kernel's stat
calls, not Python, are most of a no-op's time at 200,000 files, and they run on both cores."""


@dataclass
class TopRecord:
    """What the index keeps of one top-level folder of rendered/ in its main record."""

    digest: str
    """Hash of its layout (every folder and file) and their stat data, as `stat_top` and `restat`
    compute it."""
    latest: int
    """Newest mtime or ctime among them: racy if in the record's second or later."""
    count: int
    """Its regular files."""


class Index:
    """The last successful render of one fleet, as recorded after it wrote (see the module).

    Stored in three parts: a small main record (keys, and per top-level folder a digest of its
    layout's stat data) and each folder's layout (the paths of its folders and files) read by
    every run, and the per-file entries of each folder (stat data and content hash) read only for
    a folder whose digest no longer matches or is racy."""

    def __init__(self, root: Path | None = None) -> None:
        self.key = ""
        """The whole-fleet key (`inputs_key`) of that render."""
        self.clusters: dict[str, tuple[str, int]] = {}
        """Cluster -> (its `cluster_key`, its object count)."""
        self.tops: dict[str, TopRecord] = {}
        self.codeowners: Entry | None = None
        self.written_ns = 0
        """When the record was written: files changed in that second or later are racy."""
        self.refreshed = False
        """Entries were renewed after their files were hashed and matched: worth saving."""
        self._root = root
        self._folder = _record_dir(root) if root is not None else None
        self._entries: dict[str, dict[str, Entry]] = {}
        """Per-file entries of the tops loaded or renewed in this run."""
        self._layouts: dict[str, list[str]] = {}
        """Layouts of the tops renewed in this run (saved with their entries)."""
        self._dirty: set[str] = set()
        self._verified: set[str] = set()

    @classmethod
    def load(cls, root: Path) -> Index:
        """The record for `root`, or an empty index (nothing trusted) if none can be read, or it
        is not sealed by this cache's key, or any field is not what fleetgen writes."""
        index = cls(root)
        assert index._folder is not None
        data = _read_sealed(root, index._folder / "index.json", "index")
        parsed = _parse_main(data) if isinstance(data, dict) else None
        if parsed is None:
            return cls(root)
        index.key, index.clusters, index.tops, index.codeowners, index.written_ns = parsed
        return index

    def save(self, root: Path) -> None:
        """Write the record, best effort: a read-only cache only costs speed. Each part is
        replaced atomically, the folders' entries before the main record that vouches for them."""
        folder = self._folder or _record_dir(root)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for top in sorted(self._dirty):
                if top in self.tops:
                    _write_sealed(root, _top_file(folder, top), f"top:{top}", {
                        "digest": self.tops[top].digest, "files": self._entries[top]})
                    _write_text(_layout_file(folder, top), "\0".join(self._layouts[top]))
            _write_sealed(root, folder / "index.json", "index", {
                "format": FORMAT, "key": self.key, "clusters": self.clusters, "written": time.time_ns(),
                "tops": {k: [v.digest, v.latest, v.count] for k, v in sorted(self.tops.items())},
                "codeowners": self.codeowners})
        except OSError:
            pass
        self._dirty.clear()

    def _racy(self, latest: int) -> bool:
        return latest // SECOND >= self.written_ns // SECOND

    def _top_entries(self, top: str, record: TopRecord | None = None) -> dict[str, Entry] | None:
        """The per-file entries of `top` (from its file, checked against its main record)."""
        if top not in self._entries:
            record = record or self.tops.get(top)
            if record is None or self._folder is None or self._root is None:
                return None
            data = _read_sealed(self._root, _top_file(self._folder, top), f"top:{top}")
            if not isinstance(data, dict) or data.get("digest") != record.digest:
                return None
            entries = _parse_entries(data.get("files"), top)
            if entries is None:
                return None
            self._entries[top] = entries
        return self._entries[top]

    def _same_content(self, path: Path, digest: str) -> os.stat_result | None:
        """The file's stat data if its content hashes to `digest` (read through one descriptor)."""
        got = _read(path)
        return got[0] if got is not None and content_hash(got[1]) == digest else None

    def unchanged(self, root: Path, top: str) -> bool:
        """Whether rendered/<top> holds exactly the files the index records for it (the same
        names, none more, none fewer, each the same content). Its stat digest decides when it
        matches and is not racy; otherwise every file whose stat data differs (or is racy) is
        read and hashed, and if all match the entries are renewed."""
        record = self.tops.get(top)
        if record is None:
            return False
        if top in self._verified:
            return True
        if self._folder is not None and not self._racy(record.latest):
            paths = _read_layout(str(_layout_file(self._folder, top)))
            again = None if paths is None else restat(str(root / RENDERED), paths)
            if again is not None and again[0] == record.digest:
                self._verified.add(top)
                return True
        walked = stat_top(str(root / RENDERED), top)  # the slow path: list every folder, file by file
        if walked is None:
            return False
        stats = walked.files()
        entries = self._top_entries(top)
        if entries is None or len(entries) != len(stats):
            return False
        renewed: dict[str, Entry] = {}
        for rel, size, mtime, ctime, ino in stats:
            entry = entries.get(rel)
            if entry is None or entry[0] != size:
                return False
            if entry[1:4] != (mtime, ctime, ino) or self._racy(max(mtime, ctime)):
                st = self._same_content(root / RENDERED / rel, entry[4])
                if st is None or (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != (size, mtime, ctime, ino):
                    return False  # different, or changed while we looked: do the work
            renewed[rel] = (size, mtime, ctime, ino, entry[4])
        self._entries[top], self.tops[top] = renewed, TopRecord(walked.digest, walked.latest, len(renewed))
        self._layouts[top] = walked.paths
        self._dirty.add(top)
        self._verified.add(top)
        self.refreshed = True
        return True

    def verify(self, root: Path, tops: list[str]) -> None:
        """Check the stat digests of many tops at once (in two processes when there are many);
        `unchanged` then answers from the result, hashing only where a digest differs."""
        rendered = str(root / RENDERED)
        todo = [t for t in tops if t in self.tops and t not in self._verified and not self._racy(self.tops[t].latest)]
        if len(todo) < PARALLEL_TOPS or (os.cpu_count() or 1) < 2 or self._folder is None:
            return
        import concurrent.futures

        layouts = {t: str(_layout_file(self._folder, t)) for t in todo}
        half = todo[1::2]
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=pool_context(), initializer=die_with_parent,
                                                    initargs=(os.getpid(),)) as pool:
            remote = pool.submit(_restat_many, rendered, {t: layouts[t] for t in half})
            results = {**_restat_many(rendered, {t: layouts[t] for t in todo[0::2]}), **remote.result()}
        for top, got in results.items():
            if got is not None and got[0] == self.tops[top].digest:
                self._verified.add(top)

    def codeowners_unchanged(self, root: Path) -> bool:
        """CODEOWNERS is as recorded (or absent, as recorded)."""
        try:
            st = os.lstat(root / CODEOWNERS)
        except FileNotFoundError:
            return self.codeowners is None
        except OSError:
            return False
        entry = self.codeowners
        if entry is None or not stat.S_ISREG(st.st_mode) or st.st_size != entry[0]:
            return False
        now = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if now == entry[1:4] and not self._racy(max(st.st_mtime_ns, st.st_ctime_ns)):
            return True
        same = self._same_content(root / CODEOWNERS, entry[4])
        if same is None:
            return False
        self.codeowners = (same.st_size, same.st_mtime_ns, same.st_ctime_ns, same.st_ino, entry[4])
        self.refreshed = True
        return True

    def whole_tree_unchanged(self, root: Path) -> bool:
        """rendered/ holds exactly the recorded folders and files, and CODEOWNERS is as recorded."""
        try:
            present = sorted(e.name for e in os.scandir(root / RENDERED))
        except OSError:
            return False
        if present != sorted(self.tops):
            return False
        self.verify(root, present)
        return all(self.unchanged(root, top) for top in present) and self.codeowners_unchanged(root)

    def record(self, root: Path, tree: dict[str, bytes], stats: dict[str, os.stat_result],
               codeowners: bytes | None) -> None:
        """Renew the entries of the tops in `tree` (path -> content: what is now on disk for every
        top it names) and of CODEOWNERS; other tops keep theirs (they were verified unchanged).
        Files just written take the stat data of their write (`stats`); a file not rewritten
        keeps a clean entry of the same content, or is read back once (else it gets none, and
        its folder is compiled again next time)."""
        base = root / RENDERED
        by_top: dict[str, dict[str, bytes]] = {}
        for rel, content in tree.items():
            by_top.setdefault(rel.split("/", 1)[0], {})[rel] = content
        present, recorded = set(os.listdir(base)), self.tops
        self.tops = {t: r for t, r in self.tops.items() if t in present and t not in by_top}
        for top, files in sorted(by_top.items()):
            old: dict[str, Entry] | None = None
            entries: dict[str, Entry] = {}
            for rel, content in files.items():
                digest = content_hash(content)
                st = stats.get(rel)
                if st is None:
                    old = old if old is not None else (self._top_entries(top, recorded.get(top)) or {})
                    before = old.get(rel)
                    if before is not None and before[4] == digest and not self._racy(max(before[1], before[2])):
                        entries[rel] = before
                        continue
                    st = self._same_content(base / rel, digest)
                    if st is None:
                        continue
                entries[rel] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
            walked = stat_top(str(base), top)
            on_disk = [] if walked is None else walked.files()
            if walked is None or len(on_disk) != len(entries) or \
                    any(entries.get(rel, (None,))[:4] != (size, mtime, ctime, ino)
                        for rel, size, mtime, ctime, ino in on_disk):
                self._entries.pop(top, None)  # changed while it was written: compiled again next time
                continue
            self._entries[top], self.tops[top] = entries, TopRecord(walked.digest, walked.latest, len(entries))
            self._layouts[top] = walked.paths
            self._dirty.add(top)
        self.codeowners = None
        if codeowners is not None:
            digest = content_hash(codeowners)
            st = self._same_content(root / CODEOWNERS, digest)
            if st is not None:
                self.codeowners = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)


def _write_sealed(root: Path, path: Path, part: str, data: object) -> None:
    """A record as its seal, a newline and its JSON; nothing without a key (OSError)."""
    payload = json.dumps(data, separators=(",", ":"))
    mac = proofs.seal(root, part, payload.encode())
    if mac is None:
        raise OSError("no key to seal the render index with")
    _write_text(path, f"{mac}\n{payload}")


def _read_sealed(root: Path, path: Path, part: str) -> object:
    """A record's JSON if this cache's key sealed it, else None (gone, forged, edited, torn)."""
    try:
        got = repofiles.read_regular(path)
    except OSError:
        return None
    if got is None:
        return None
    mac, newline, payload = got[1].partition(b"\n")
    if not newline or not proofs.sealed(root, part, payload, mac.decode("ascii", "replace")):
        return None
    try:
        return json.loads(payload)
    except (ValueError, RecursionError):
        return None


_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TOP = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(value: object) -> Entry | None:
    """An index entry as fleetgen writes it: four ints and a content hash; else None."""
    if isinstance(value, list) and len(value) == 5 and all(_is_int(v) for v in value[:4]) \
            and isinstance(value[4], str) and _HEX40.fullmatch(value[4]):
        return (value[0], value[1], value[2], value[3], value[4])
    return None


def _parse_main(data: dict[str, object]) -> tuple[str, dict[str, tuple[str, int]], dict[str, TopRecord],
                                                  Entry | None, int] | None:
    """The main record's fields, each exactly of the shape fleetgen writes; None if any is not."""
    key, clusters, tops, owners, written = (data.get(k) for k in ("key", "clusters", "tops", "codeowners",
                                                                  "written"))
    if data.get("format") != FORMAT or not isinstance(key, str) or not (key == "" or _HEX64.fullmatch(key)) \
            or not isinstance(clusters, dict) or not isinstance(tops, dict) or not _is_int(written):
        return None
    kept: dict[str, tuple[str, int]] = {}
    for name, value in clusters.items():
        if not (_TOP.fullmatch(name) and isinstance(value, list) and len(value) == 2
                and isinstance(value[0], str) and _HEX64.fullmatch(value[0]) and _is_int(value[1])):
            return None
        kept[name] = (value[0], value[1])
    records: dict[str, TopRecord] = {}
    for name, value in tops.items():
        if not (_TOP.fullmatch(name) and isinstance(value, list) and len(value) == 3
                and isinstance(value[0], str) and _HEX40.fullmatch(value[0]) and _is_int(value[1])
                and _is_int(value[2])):
            return None
        records[name] = TopRecord(value[0], value[1], value[2])
    entry = None if owners is None else _entry(owners)
    if owners is not None and entry is None:
        return None
    return key, kept, records, entry, written  # type: ignore[return-value]


def _parse_entries(files: object, top: str) -> dict[str, Entry] | None:
    """A folder's entries: paths below `top` (no `..`, no empty part) to entries; else None."""
    if not isinstance(files, dict):
        return None
    entries: dict[str, Entry] = {}
    for rel, value in files.items():
        parts = rel.split("/")
        entry = _entry(value)
        if entry is None or len(parts) < 2 or parts[0] != top or any(p in ("", ".", "..") for p in parts):
            return None
        entries[rel] = entry
    return entries


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.replace(tmp, path)


def _read(path: Path) -> tuple[os.stat_result, bytes] | None:
    """`repofiles.read_regular`, with any error (gone, unreadable) as None: the caller does the work."""
    try:
        return repofiles.read_regular(path)
    except OSError:
        return None


def options_key(schema_location: str | None, crd_location: str | None) -> str:
    """The render options' part of every key."""
    return f"{schema_location}|{crd_location}"


JOURNAL = ".fleetgen/journal.json"
"""emit.WORK/emit.JOURNAL: a render was killed during its switch (the full path finishes it)."""


def unchanged_since_last_render(root: Path, options: str, index: Index | None = None,
                                key: str | None = None) -> int | None:
    """The number of rendered files when inputs, generator, options and tree are exactly as the
    last render left them (None otherwise: do the work). It writes nothing but the index, so the
    command line asks it before taking the repository's lock or importing the compilers: a tree
    in the middle of another render's switch never matches, and a killed render's journal sends
    the caller down the full path. `key`: the inputs key, when the caller has it already."""
    if os.path.lexists(root / JOURNAL):
        return None
    index = index if index is not None else Index.load(root)
    if not index.key:
        return None
    key = key if key is not None else inputs_key(root, options)
    if key != index.key or not index.whole_tree_unchanged(root):
        return None
    if index.refreshed:
        index.save(root)
    return sum(t.count for t in index.tops.values())


UP_TO_DATE = "inputs, generator and tree unchanged since the last render"


def up_to_date_line(files: int, check_only: bool) -> str:
    """What `render` says when the index shows nothing changed."""
    return (f"rendered/ is up to date ({files} files; {UP_TO_DATE})" if check_only else
            f"rendered/ already up to date ({UP_TO_DATE})")


def reusable(index: Index, root: Path, name: str, key: str) -> int | None:
    """The object count of cluster `name` if its rendered files are still exactly what `key` produced."""
    recorded = index.clusters.get(name)
    if recorded is None or recorded[0] != key or not index.unchanged(root, name):
        return None
    return recorded[1]
