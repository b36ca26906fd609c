"""Read one YAML input file into plain data plus a map of where every key stands.

PyYAML alone would silently keep the last of two duplicate keys, expand alias bombs without
limit and forget line numbers once the data is built. Team files come from many hands, so this
loader composes the node graph itself and refuses anything ambiguous, with a line number.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from generator.errors import Finding, InputError

try:  # libyaml's composer is several times faster; both produce the same nodes.
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader

MAX_FILE_BYTES = 1 << 20
MAX_NODES = 20_000
MAX_DEPTH = 32

Path_ = tuple[Any, ...]

_SCALAR = yaml.SafeLoader("")  # only its scalar constructors are used
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


@dataclass(frozen=True)
class Source:
    """A loaded input file: its path as shown to users, its data and key positions."""

    path: str
    data: Any
    lines: dict[Path_, int]

    def line_of(self, path: Path_) -> int:
        """The line of the deepest known key on `path` (1 for the document itself)."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return 1


class _Builder:
    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.lines: dict[Path_, int] = {}
        self.count = 0

    def fail(self, node: yaml.Node, message: str, hint: str, path: Path_ = ()) -> InputError:
        return InputError([Finding(self.shown, node.start_mark.line + 1, dotted(path), message, hint)])

    def build(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, f"document expands to more than {MAX_NODES} nodes (an alias bomb?)",
                            "write the data out without deeply nested anchors and aliases", path)
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nesting deeper than {MAX_DEPTH} levels",
                            "flatten the structure; no fleetgen key nests this deep", path)
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _COLLECTION_TAGS:
            raise self.fail(node, f"unsupported YAML tag {node.tag!r}", "remove the tag", path)
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                self.lines.setdefault(path + (i,), item.start_mark.line + 1)
                items.append(self.build(item, path + (i,), depth + 1))
            return items
        return self.scalar(node, path)

    def mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise self.fail(key_node, "YAML merge keys (<<) are not supported",
                                "write the merged keys out explicitly", path)
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, "a mapping key must be a plain string", "use a string key", path)
            key = self.scalar(key_node, path)
            if not isinstance(key, str):
                raise self.fail(key_node, f"key {key_node.value!r} is read as {type(key).__name__}, not a string",
                                f'quote the key: "{key_node.value}"', path)
            if key in out:
                first = self.lines[path + (key,)]
                raise self.fail(key_node, f"duplicate key {key!r} (first defined on line {first})",
                                "remove one of the two entries", path + (key,))
            self.lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def scalar(self, node: yaml.Node, path: Path_) -> Any:
        constructor = _SCALAR.yaml_constructors.get(node.tag)
        if constructor is None:
            raise self.fail(node, f"unsupported YAML tag {node.tag!r}", "remove the tag", path)
        try:
            return constructor(_SCALAR, node)
        except (yaml.YAMLError, ValueError) as exc:
            raise self.fail(node, f"cannot read value {node.value!r}: {exc}", "quote the value", path) from None


def dotted(path: Path_) -> str:
    """`('quotas', 'prod', 'h100', 'gpus')` -> `quotas.prod.h100.gpus`; list items as `[i]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_source(file: Path, shown: str) -> Source:
    """Load `file` (shown to users as `shown`) or raise InputError with a located finding."""
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise InputError([Finding(shown, None, "", f"cannot read file: {exc.strerror}", "check the path")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError([Finding(shown, None, "", f"file is {len(raw)} bytes, more than the {MAX_FILE_BYTES} allowed",
                                  "split or shorten the file; no valid config is this large")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError([Finding(shown, line, "", "file is not valid UTF-8", "save the file as UTF-8")]) from None
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise InputError([Finding(shown, where, "", f"invalid YAML: {problem}",
                                  "fix the YAML syntax (indentation, quoting, one document per file)")]) from None
    except yaml.YAMLError as exc:
        raise InputError([Finding(shown, None, "", f"invalid YAML: {exc}", "fix the YAML syntax")]) from None
    if node is None:
        raise InputError([Finding(shown, 1, "", "file is empty", "write the configuration or delete the file")])
    builder = _Builder(shown)
    data = builder.build(node, (), 0)
    return Source(shown, data, builder.lines)
