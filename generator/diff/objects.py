"""Rendered trees as objects keyed the way Kubernetes identifies them, and their changes.

An object is matched by (cluster, API group, kind, namespace, name): what identifies it in the
cluster that holds it. The API group, not the apiVersion: one object served in a new version is
the same object, shown as an apiVersion change. GitOps objects (`rendered/gitops/<cluster>/`)
belong to their cluster (label `fleetgen.io/cluster`); two files with one identity are an error.

Field changes come from deepdiff on normalised bodies where lists whose items all carry a unique
`name` are turned into maps keyed `[name]`, the way Kubernetes merges them, so a reordered or
inserted list item is one change, not a cascade.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from generator.compile.manifest import NOT_OBJECT_FILES
from generator.config.yamlsource import parse_source
from generator.emit import Tree
from generator.errors import UsageError

Key = tuple[str, str, str, str, str]
"""(cluster, group, kind, namespace, name)."""
SKIP = NOT_OBJECT_FILES
CLUSTER_LABEL = "fleetgen.io/cluster"


@dataclass(frozen=True)
class Obj:
    """One rendered object."""

    key: Key
    path: str
    body: dict[str, Any]
    text: str

    @property
    def cluster(self) -> str:
        return self.key[0]

    @property
    def team(self) -> str | None:
        return (self.body.get("metadata", {}).get("labels") or {}).get("fleetgen.io/team")

    @property
    def label(self) -> str:
        _, group, kind, ns, name = self.key
        return f"{kind} {ns + '/' if ns else ''}{name}"

    @property
    def synced(self) -> bool:
        """Whether a GitOps engine applies it: not a job template (`<cluster>/templates/`), which
        `fleetgen job submit` and kubectl create from, and no kustomization lists."""
        parts = self.path.split("/")
        return parts[0] == "gitops" or parts[1:2] != ["templates"]


def changed_objects(before: Tree, after: Tree, where: tuple[str, str] = ("", "")) -> tuple[dict[Key, Obj],
                                                                                   dict[Key, Obj]]:
    """The objects of both trees that can differ: files not byte-identical at the same path.

    Output is deterministic, so an unchanged file is an unchanged object and is never parsed:
    the cost follows the size of the change, not of the fleet. An object that moved to another
    file is still matched by its identity, as both files are read. `where` is what each side's
    paths are shown after in an error (`main:rendered/`, `rendered/`).
    """
    same = {path for path, content in before.items() if after.get(path) == content}
    return (objects({p: c for p, c in before.items() if p not in same}, where[0]),
            objects({p: c for p, c in after.items() if p not in same}, where[1]))


def objects(tree: Tree, where: str = "") -> dict[Key, Obj]:
    """Every Kubernetes object of a rendered tree, each file read by the inputs' own reader with its
    limits: a rendered file of a pull request is as hostile as its team files (invalid YAML, an
    alias bomb, nesting over 32, a duplicate key, a file over 1 MiB or not UTF-8 is an error at its
    file and line, exit 2, never a traceback or a hang). Values are read as YAML reads them."""
    out: dict[Key, Obj] = {}
    for path, content in sorted(tree.items()):
        if path.endswith(SKIP):
            continue
        body = parse_source(content, where + path, strict=False).data
        if not isinstance(body, dict) or "kind" not in body:
            continue
        meta = body.get("metadata") or {}
        group = str(body.get("apiVersion", "")).rpartition("/")[0]
        cluster = (meta.get("labels") or {}).get(CLUSTER_LABEL) or path.split("/", 1)[0]
        key = (str(cluster), group, str(body["kind"]), str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if key in out:
            raise UsageError(f"{out[key].path} and {path} are the same object ({body['kind']} "
                             f"{key[3] + '/' if key[3] else ''}{key[4]} in cluster {cluster}): "
                             "one would overwrite the other when synced; remove or rename one")
        out[key] = Obj(key, path, body, content.decode("utf-8"))
    return out


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        names = [item.get("name") for item in value if isinstance(item, dict)]
        if value and len(names) == len(value) and all(isinstance(n, str) for n in names) and \
                len(set(names)) == len(names):
            return {f"[{item['name']}]": _normalise(item) for item in value}
        return [_normalise(v) for v in value]
    return value


def _differing(old: Any, new: Any, at: tuple[str, ...] = (),
               strings: list[tuple[tuple[str, ...], str, str]] | None = None) -> tuple[Any, Any]:
    """Both values less the mapping keys whose values are equal (recursively): deepdiff then walks
    only what changed, with the same paths, instead of every field of a large object. Two differing
    strings reached through string keys only are set aside in `strings` (path, old, new): deepdiff
    would also work out a line diff of every multi-line one, unused here and most of the cost of a
    changed ConfigMap. Below any other key (`1:` in a file of a pull request) deepdiff keeps them."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return old, new
    kept_old, kept_new = {}, {}
    for key in old.keys() | new.keys():
        if key in old and key in new:
            if old[key] == new[key]:
                continue
            below = strings if isinstance(key, str) else None
            if below is not None and isinstance(old[key], str) and isinstance(new[key], str):
                below.append(((*at, key), old[key], new[key]))
                continue
            kept_old[key], kept_new[key] = _differing(old[key], new[key], (*at, key), below)
        elif key in old:
            kept_old[key] = old[key]
        else:
            kept_new[key] = new[key]
    return kept_old, kept_new


def _dotted(deep_path: str) -> str:
    """deepdiff's root['spec']['x'][0]['[h100]'] -> spec.x[0][h100]."""
    out = ""
    for part in deep_path.removeprefix("root").strip("[]").split("]["):
        if part.startswith("'") and part.endswith("'"):
            part = part[1:-1]
            out += part if part.startswith("[") else (f".{part}" if out else part)
        else:
            out += f"[{part}]"
    return out


@dataclass(frozen=True)
class FieldChange:
    """One field of one object: old and new value (None when added or removed)."""

    path: str
    old: Any
    new: Any
    op: str  # changed | added | removed


@dataclass
class Change:
    """An object added, changed or destroyed, with its field changes."""

    action: str  # add | change | destroy
    before: Obj | None
    after: Obj | None
    fields: list[FieldChange] = field(default_factory=list)

    @property
    def obj(self) -> Obj:
        found = self.after or self.before
        assert found is not None
        return found


_QUOTE = "'{}'"
"""How deepdiff quotes a mapping key in a path (DictRelationship.quote_str)."""


def field_changes(old: dict[str, Any], new: dict[str, Any], ignore: list[str]) -> list[FieldChange]:
    """Field-level changes between two bodies, minus those matching an ignore pattern."""
    from deepdiff import DeepDiff
    from deepdiff.path import stringify_element

    # Lists left as lists (no `name` on every item) are compared index by index: their order is
    # what the API server stores, and deepdiff's pairing of moved items is what made a large
    # diff slow (seconds per thousand objects). Mappings are always walked key by key
    # (threshold_to_diff_deeper=0): deepdiff otherwise reports a whole mapping as one value when
    # few of its keys are shared, and with the equal keys taken out first that would depend on
    # how many were equal.
    strings: list[tuple[tuple[str, ...], str, str]] = []
    diff = DeepDiff(*_differing(_normalise(old), _normalise(new), strings=strings), verbose_level=2,
                    zip_ordered_iterables=True, threshold_to_diff_deeper=0)
    out = [FieldChange(_dotted("root" + "".join(f"[{stringify_element(k, _QUOTE)}]" for k in at)), before, after,
                       "changed") for at, before, after in strings]
    for kind, entries in diff.items():
        for deep_path, value in entries.items():
            path = _dotted(deep_path)
            if kind in ("values_changed", "type_changes"):
                out.append(FieldChange(path, value["old_value"], value["new_value"], "changed"))
            elif kind in ("dictionary_item_added", "iterable_item_added"):
                out.append(FieldChange(path, None, value, "added"))
            elif kind in ("dictionary_item_removed", "iterable_item_removed"):
                out.append(FieldChange(path, value, None, "removed"))
    kind_name = new.get("kind") or old.get("kind")
    kept = [c for c in out if not any(fnmatch.fnmatchcase(f"{kind_name}:{c.path}", p) for p in ignore)]
    return sorted(kept, key=lambda c: c.path)


def compare(before: dict[Key, Obj], after: dict[Key, Obj], ignore: list[str] | None = None) -> list[Change]:
    """Added, changed and destroyed objects, in a stable order."""
    ignore = ignore or []
    out: list[Change] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is None:
            out.append(Change("add", None, new))
        elif new is None:
            out.append(Change("destroy", old, None))
        elif old.body != new.body:
            fields = field_changes(old.body, new.body, ignore)
            if fields:
                out.append(Change("change", old, new, fields))
    return out
