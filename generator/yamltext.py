"""The one YAML dumper: every YAML byte fleetgen writes, files and embedded documents alike.

Strings are quoted by libyaml as needed, so no value can add a key, an object or a document.
"""

from __future__ import annotations

from typing import Any

import yaml

_Base: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc, valid-type]
    """libyaml's dumper, with multi-line strings (embedded configs, rule files) as literal blocks."""

    def ignore_aliases(self, data: object) -> bool:
        # Never anchors and aliases: objects shared in memory are written out in full.
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # libyaml itself falls back to a quoted style when a block cannot hold the text exactly.
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def to_yaml(body: Any) -> str:
    """Serialise data: insertion order kept, block style, no line folding."""
    return yaml.dump(body, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 30)
