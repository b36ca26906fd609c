"""The one YAML dumper: every YAML byte fleetgen writes, files and embedded documents alike.

Strings are quoted by libyaml as needed, so no value can add a key, an object or a document.
libyaml only knows YAML 1.1 as PyYAML resolves it; the readers of our files do not all agree
with it. Kubernetes (sigs.k8s.io/yaml, a go-yaml v2 fork) reads `1e3` as a number and `y` as a
boolean; kustomize and Flux (kyaml on go-yaml v3) follow YAML 1.2's core schema. So every plain
string any of those resolvers would type as non-string is single-quoted (`NOT_A_STRING`).
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable
from typing import Any

import yaml

_Base: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

NOT_A_STRING: tuple[tuple[str, re.Pattern[str]], ...] = (
    # YAML 1.2 core schema, https://yaml.org/spec/1.2.2/#1023-core-schema (table "tag resolution").
    ("1.2 null", re.compile(r"^(null|Null|NULL|~|)$")),
    ("1.2 bool", re.compile(r"^(true|True|TRUE|false|False|FALSE)$")),
    ("1.2 int", re.compile(r"^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")),
    ("1.2 float", re.compile(r"^([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
                             r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$")),
    # YAML 1.1 (https://yaml.org/type/bool.html, int.html, float.html) as go-yaml v2 reads it:
    # single-letter booleans, and numbers in any base Go's strconv accepts, underscores included.
    ("1.1 bool", re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")),
    ("1.1 number", re.compile(r"^[-+]?(0[bBoOxX][0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?"
                              r"|\.[0-9_]+([eE][-+]?[0-9]+)?|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)$")),
    ("1.1 timestamp", re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?$")),
    ("1.1 merge or value key", re.compile(r"^(<<|=)$")),
)


_MAY_NOT_BE_TEXT = frozenset("nN~tTfFyYoO+-.0123456789<=")
"""The first characters of every non-empty string a `NOT_A_STRING` pattern matches (null, true,
false, y, on, numbers, `.inf`, timestamps, `<<`, `=`): a string starting with any other is text to
every reader, with no pattern tried (most keys and values)."""


def ambiguous(value: str) -> str | None:
    """The first resolver that would read `value`, written plain, as something other than a string."""
    return next((name for name, pattern in NOT_A_STRING if pattern.fullmatch(value)), None)


@functools.lru_cache(maxsize=1 << 16)
def _ambiguous(value: str) -> bool:
    """`ambiguous`, once per distinct one-line string: the same keys and values recur in every object."""
    return ambiguous(value) is not None


class _Dumper(_Base):  # type: ignore[misc, valid-type]
    """libyaml's dumper, with multi-line strings (embedded configs, rule files) as literal blocks."""

    def ignore_aliases(self, data: object) -> bool:
        # Never anchors and aliases: objects shared in memory are written out in full.
        return True


def _style(value: str) -> str | None:
    """A string's scalar style: a literal block for several lines, single quotes where some
    reader would take it for a non-string, else plain. (libyaml itself falls back to a quoted
    style when a block cannot hold the text exactly.)"""
    if "\n" in value:
        return "|"
    if (not value or value[0] in _MAY_NOT_BE_TEXT) and _ambiguous(value):
        return "'"
    return None


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=_style(value))


_Dumper.add_representer(str, _str)

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _BOOL, _NULL, _MAP, _SEQ = (_TAG + t for t in ("str", "int", "bool", "null", "map", "seq"))


def _node(value: Any, other: Callable[[Any], yaml.Node]) -> yaml.Node:
    """The node `_Dumper`'s representer would build, for JSON-like data (dict, list, str, int,
    bool, None) without its per-value dispatch: most of a render's time is spent here. Anything
    else (a float, an unknown type) goes to the representer itself (`other`). (A plain function:
    a closure calling itself would be a reference cycle per object, left to the garbage collector.)"""
    kind = type(value)
    if kind is str:
        return yaml.ScalarNode(_STR, value, style=_style(value))
    if kind is dict:
        return yaml.MappingNode(_MAP, [(_node(k, other), _node(v, other)) for k, v in value.items()],
                                flow_style=False)
    if kind is list:
        return yaml.SequenceNode(_SEQ, [_node(v, other) for v in value], flow_style=False)
    if kind is bool:
        return yaml.ScalarNode(_BOOL, "true" if value else "false")
    if kind is int:
        return yaml.ScalarNode(_INT, str(value))
    if value is None:
        return yaml.ScalarNode(_NULL, "null")
    return other(value)


def to_yaml(body: Any) -> str:
    """Serialise data: insertion order kept, block style, no line folding. What
    `yaml.dump(body, Dumper=_Dumper, ...)` writes (a property test holds it), with the nodes built
    by `_node`."""
    stream = io.StringIO()
    dumper = _Dumper(stream, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 30)
    try:
        dumper.open()
        dumper.serialize(_node(body, dumper.represent_data))
        dumper.close()
    finally:
        dumper.dispose()
    return stream.getvalue()
