"""One sample at a time: what a Prometheus or Loki answer says about one node, checked on its own.

Every sample is hostile until checked: the answer comes over the network, and a Loki line is
whatever a pod or a forged push wrote. A sample that does not parse (a label that is not text, an
XID of 4,301 digits, a value that is NaN, +Inf or not a number, a shape other than Prometheus')
makes its own node's signal unknown; the other samples, and the other nodes, still count.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NODE_NAME = 253
XID_CODE = re.compile(r"[0-9]{1,5}")
"""XIDs and SXids are small numbers (the catalog ends near 160, SXids at 5 digits)."""
MAX_LABEL = 256


class Sample(NamedTuple):
    """One series of an instant vector: its labels and its finite value (a tuple: one is made per
    node and query every loop)."""

    node: str
    labels: Mapping[str, str]
    value: float


class Bad(NamedTuple):
    """A sample that did not parse; `node` when at least its node could be read (else None)."""

    node: str | None
    why: str


@functools.lru_cache(maxsize=1 << 16)
def _valid_name(value: str) -> bool:
    """Checked once per name (every query names every node again)."""
    return len(value) <= MAX_NODE_NAME and NODE_NAME.fullmatch(value) is not None


def node_name(value: object) -> str | None:
    """A Kubernetes node name, or None."""
    if type(value) is str and _valid_name(value):
        return value
    return None


def _short_text(metric: dict[Any, Any]) -> bool:
    """Every label is text of at most MAX_LABEL characters (names are: JSON object keys always are)."""
    for key, value in metric.items():
        if type(value) is not str or len(value) > MAX_LABEL or type(key) is not str:
            return False
    return True


def parse(raw: object, node_label: str = "node") -> Sample | Bad:
    """Check one element of an instant vector's `result`."""
    if not isinstance(raw, dict):
        return Bad(None, "a sample that is not an object")
    metric = raw.get("metric")
    if not isinstance(metric, dict):
        return Bad(None, "labels that are not short text")
    node = node_name(metric.get(node_label))
    if not _short_text(metric):
        return Bad(node, "labels that are not short text")
    if node is None:
        return Bad(None, f"no valid {node_label} label")
    value = raw.get("value")
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not isinstance(value[1], str) or len(value[1]) > 64:
        return Bad(node, "a value that is not [time, \"number\"]")
    try:
        number = float(value[1])
    except ValueError:
        return Bad(node, f"a value that is not a number ({value[1][:20]!r})")
    if not math.isfinite(number):
        return Bad(node, f"a value that is {value[1]}")
    return Sample(node, metric, number)


def code(sample: Sample, label: str) -> int | None:
    """The XID (or SXid) a sample names, or None if the label is not a plausible code."""
    text = sample.labels.get(label, "")
    return int(text) if XID_CODE.fullmatch(text) else None


def checked(result: list[Any], node_label: str = "node") -> Iterator[Sample | Bad]:
    """Every element of a result, parsed on its own."""
    for raw in result:
        yield parse(raw, node_label)
