"""Read one YAML input file into plain data plus a map of where every key stands.

PyYAML alone would silently keep the last of two duplicate keys, expand alias bombs without
limit and forget line numbers once the data is built. Team files come from many hands, so this
loader composes the node graph itself and refuses anything ambiguous, with a line number.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from generator.errors import Finding, InputError
from generator.terminal import first_hidden

try:  # libyaml's composer is several times faster; both produce the same nodes.
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Base = yaml.SafeLoader

MAX_FILE_BYTES = 1 << 20
MAX_NODES = 20_000
MAX_DEPTH = 32

Path_ = tuple[Any, ...]

_SCALAR = yaml.SafeLoader("")  # only its resolver and scalar constructors are used


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """The composer, with the resolver's tag for each distinct plain scalar worked out once (it asks
    for every scalar, in Python, and team files repeat the same keys and values again and again)."""

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and isinstance(value, str):
            return _implicit_tag(value, implicit)
        return str(super().resolve(kind, value, implicit))


@functools.lru_cache(maxsize=1 << 14)
def _implicit_tag(value: str, implicit: tuple[bool, bool]) -> str:
    return str(_SCALAR.resolve(yaml.ScalarNode, value, implicit))


# Plain (unquoted) values that YAML 1.1 and YAML 1.2 readers disagree on. PyYAML reads 1.1,
# Kubernetes and kustomize read 1.2-ish: an author cannot know which number (or whether a
# number) they wrote, so fleetgen refuses them and says what to write instead.
# (pattern, what the readers make of it, fix)
AMBIGUOUS_PLAIN: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^[-+]?0[bBoOxX][0-9a-fA-F_]+$"), "is a binary, octal or hex number, read differently by "
     "YAML 1.1 and 1.2 readers (0o17 is text to one, 15 to the other)", "write the number in decimal, or quote it"),
    (re.compile(r"^[-+]?0[0-9_]+$"), "has a leading zero: YAML 1.1 reads it as octal (010 is 8), YAML 1.2 as "
     "decimal (10)", "drop the leading zero, or quote it if it is text"),
    (re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$"), "is a base-60 number in YAML 1.1 "
     "(1:00 is 60) and text in YAML 1.2", "write the number of seconds or minutes, or quote it"),
    (re.compile(r"^[-+]?[0-9][0-9_]*_[0-9_]*(\.[0-9_]*)?$"), "uses '_' between digits, a number in YAML 1.1 "
     "only (1_0 is 10)", "write the digits without '_', or quote it"),
    (re.compile(r"^[-+]?([0-9]+|\.[0-9]+)[eE][-+]?[0-9]+$"), "is a number in YAML 1.2 (Kubernetes reads "
     "1e3 as 1000) but text in YAML 1.1", "write the number out (1000), or quote it if it is text"),
    (re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$"), "is a boolean in YAML 1.1 and text "
     "in YAML 1.2", "write true or false, or quote it if it is text"),
)
_STR = "tag:yaml.org,2002:str"
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
    def __init__(self, shown: str, strict: bool = True) -> None:
        self.shown = shown
        self.strict = strict
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
        assert isinstance(node, yaml.ScalarNode)  # the composer makes only these three kinds
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
            if self.strict and not isinstance(key, str):
                raise self.fail(key_node, f"key {key_node.value!r} is read as {type(key).__name__}, not a string",
                                f'quote the key: "{key_node.value}"', path)
            if key in out:
                first = self.lines[path + (key,)]
                raise self.fail(key_node, f"duplicate key {key!r} (first defined on line {first})",
                                "remove one of the two entries", path + (key,))
            self.lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def scalar(self, node: yaml.ScalarNode, path: Path_) -> Any:
        read = _scalar(node.tag, node.value, not node.style) if self.strict else _as_yaml_reads(node.tag, node.value)
        if isinstance(read, _Problem):
            raise self.fail(node, read.message, read.hint, path)
        return read


class _Problem(NamedTuple):
    message: str
    hint: str


@functools.lru_cache(maxsize=1 << 14)
def _scalar(tag: str, value: str, plain: bool) -> Any:
    """What a scalar reads as, or the _Problem with it. Worked out once per distinct scalar: the
    same keys and values recur in every file (and every result is immutable)."""
    implicit = _implicit_tag(value, (True, False)) if plain else _STR
    if tag != implicit:  # an explicit tag (!!int "0x1F", !!str 10, !!binary ...) overrides what is written
        return _Problem(f"unsupported YAML tag {tag.replace('tag:yaml.org,2002:', '!!')!r} on {value[:40]!r}: "
                        "fleetgen reads every value as written, never as a tag says",
                        "remove the tag; quote the value if it is text")
    if plain:
        for pattern, problem, hint in AMBIGUOUS_PLAIN:
            if pattern.match(value):
                return _Problem(f"unquoted {value!r} {problem}", hint)
    constructor = _SCALAR.yaml_constructors.get(tag)
    if constructor is None:
        return _Problem(f"unsupported YAML tag {tag!r}", "remove the tag")
    try:
        read = constructor(_SCALAR, yaml.ScalarNode(tag, value))
    except (yaml.YAMLError, ValueError) as exc:
        return _Problem(f"cannot read value {value!r}: {exc}", "quote the value")
    if isinstance(read, str):
        hidden = first_hidden(read, allowed="\t\n")  # no config value needs one; they hide what it says
        if hidden is not None:
            name = unicodedata.name(hidden, "a control character")
            return _Problem(f"contains the control or invisible character U+{ord(hidden):04X} ({name}), which "
                            "terminals, logs and reviewers do not show as it is", "remove it")
    return read


@functools.lru_cache(maxsize=1 << 14)
def _as_yaml_reads(tag: str, value: str) -> Any:
    """A scalar as a YAML 1.1 safe loader reads it (tags included), for files fleetgen did not
    write by hand (`parse_source(strict=False)`): only what no safe loader can read is a problem."""
    constructor = _SCALAR.yaml_constructors.get(tag)
    if constructor is None:
        return _Problem(f"unsupported YAML tag {tag!r}", "remove the tag")
    try:
        return constructor(_SCALAR, yaml.ScalarNode(tag, value))
    except (yaml.YAMLError, ValueError) as exc:
        return _Problem(f"cannot read value {value[:40]!r}: {exc}", "quote the value")


def dotted(path: Path_) -> str:
    """`('quotas', 'prod', 'h100', 'gpus')` -> `quotas.prod.h100.gpus`; list items as `[i]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_source(root: Path, shown: str) -> Source:
    """Load `root/shown` (a path inside the repository, shown to users as is) or raise InputError
    with a located finding. Read through repofiles: a symbolic link is refused, never followed."""
    from generator.repofiles import UnsafePath, read_bytes

    try:
        raw = read_bytes(root, shown)
    except UnsafePath as exc:
        raise InputError([Finding(shown, None, "", exc.reason, exc.fix)]) from None
    except OSError as exc:
        raise InputError([Finding(shown, None, "", f"cannot read file: {exc.strerror}",
                                  "check that the file exists and is readable by this user")]) from None
    return parse_source(raw, shown)


def parse_source(raw: bytes, shown: str, strict: bool = True) -> Source:
    """Parse file content `raw` (from `shown`) or raise InputError with a located finding. The
    limits (size, nodes, depth), duplicate and merge keys hold always; `strict=False` (a rendered
    file, which may hold any value Kubernetes takes) reads values and keys as YAML 1.1 does instead
    of refusing the ambiguous, tagged, invisible and non-string ones an author could not mean."""
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
    builder = _Builder(shown, strict)
    data = builder.build(node, (), 0)
    return Source(shown, data, builder.lines)


class _Refused(ValueError):
    """A JSON value the reader will not take (a duplicate key, NaN or Infinity), raised while parsing."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def parse_json(text: str, shown: str) -> Any:
    """JSON text (a file fleetgen wrote with json.dumps, read back from elsewhere) as data, under this
    reader's rules: at most MAX_FILE_BYTES, MAX_DEPTH levels and MAX_NODES values, no duplicate key,
    no NaN, no hidden character in a string; InputError naming `shown` otherwise, never a traceback.

    JSON is not read as YAML: a float json.dumps writes as `1e-05` is a number to JSON, a string to
    YAML 1.1. Python's json recurses per level, so a deeper document than it can take is refused too.
    """
    size = len(text.encode())
    if size > MAX_FILE_BYTES:
        raise InputError([Finding(shown, None, "", f"file is {size} bytes, more than the {MAX_FILE_BYTES} allowed",
                                  "split or shorten the file; no valid config is this large")])
    try:
        data = json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep(shown, ()) from None
    except _Refused as exc:
        raise InputError([Finding(shown, None, "", str(exc), "write the file as JSON, as fleetgen does")]) from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise InputError([Finding(shown, line, "", f"not JSON: {getattr(exc, 'msg', exc)}",
                                  "write the file as JSON, as fleetgen does")]) from None
    _within_limits(data, shown)
    return data


def _too_deep(shown: str, path: Path_) -> InputError:
    return InputError([Finding(shown, None, dotted(path), f"nesting deeper than {MAX_DEPTH} levels",
                               "flatten the structure; no fleetgen key nests this deep")])


def _within_limits(data: Any, shown: str) -> None:
    """The limits _Builder holds a YAML document to, on parsed JSON (walked without recursion)."""
    count = 0
    stack: list[tuple[Path_, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise InputError([Finding(shown, None, dotted(path), f"document has more than {MAX_NODES} values",
                                      "write the data out in smaller files")])
        if len(path) > MAX_DEPTH:
            raise _too_deep(shown, path)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            for text in (key, item):
                if isinstance(text, str) and (hidden := first_hidden(text, allowed="\t\n")) is not None:
                    raise InputError([Finding(shown, None, dotted(path + (key,)),
                                              f"contains the control or invisible character U+{ord(hidden):04X} "
                                              f"({unicodedata.name(hidden, 'a control character')})", "remove it")])
            stack.append((path + (key,), item))
