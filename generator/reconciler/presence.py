"""Each node's GPUs reporting, from the presence answer, kept across loops and changed only where
the answer changed.

The presence query names every GPU node every loop (see `sources.PRESENCE_QUERY`); from one loop
to the next almost none of its samples change. `answers.Reader` says which samples came and went,
and only their nodes are worked out again. What a node's count is depends on its samples in the
answer and nothing else (not their order), so a node worked out from the samples that changed is
what it would be from the whole answer:

- every sample naming it valid and with one value: that value (-1: its exporter is down);
- a sample naming it with a value that is not a count (-1 to `MAX_GPUS_PER_NODE`), or samples
  naming it with two values: no count, `gpu_count` unknown;
- otherwise, a sample that names it but does not parse: no count, `exporter` unknown.
"""

from __future__ import annotations

import json
from collections import defaultdict

from generator.reconciler.answers import Reader
from generator.reconciler.samples import Bad, parse

MAX_GPUS_PER_NODE = 64
"""A GPU count above this is not a node's (a forged or broken sample): the count is then unread."""
EXPORTER_SIGNAL = "exporter"
"""Unknown signal of a node whose exporter is down or absent, or whose presence sample did not
parse (every DCGM signal is then unread); with `gpu_count`, of every node when the presence query
failed."""
GPU_COUNT_SIGNAL = "gpu_count"
"""Unknown signal when no GPU count could be read (the presence query failed, or answered
something that is not a count): no GPU can then be shown present."""

PresenceSample = tuple[str | None, float, str | None]
"""One decoded sample: (node, value, None), or (None, 0, the node it names if that could be read)."""


class AnswerError(Exception):
    """A piece of the answer is not JSON (the answer as a whole is then not JSON either)."""


class Presence:
    """GPUs reporting per node (`counts`), and why a node named in the answer has none (`why`)."""

    def __init__(self) -> None:
        self.reader: Reader[PresenceSample] = Reader(_decode)
        self.counts: dict[str, int] = {}
        self.why: dict[str, str] = {}
        """Node -> the signal made unknown by its samples (`gpu_count` or `exporter`)."""
        self._of: dict[str, list[PresenceSample]] = {}
        """Node -> its samples in the answer (those that did not parse, when they name it, too)."""

    def take(self, body: bytes) -> set[str] | None:
        """Read the next answer; the nodes whose count or reason may have changed since the last
        one, or None when any may have. An answer of another shape than Prometheus' compact one is
        not read (None): the caller decodes it whole and hands it to `whole`. AnswerError when a
        piece is not JSON (nothing is kept of that answer)."""
        changes = self.reader.changes(body)
        if changes is None:
            return None
        if changes.first:
            self.whole(list(changes.added.values()))
            return None
        touched: set[str] = set()
        for item in changes.removed:
            if (node := _node_of(item)) is not None:
                self._of[node].remove(item)
                touched.add(node)
        for item in changes.added.values():
            if (node := _node_of(item)) is not None:
                self._of.setdefault(node, []).append(item)
                touched.add(node)
        for node in touched:
            self._settle(node)
        return touched

    def whole(self, read: list[PresenceSample]) -> None:
        """Start over from every sample of an answer."""
        self.counts, self.why = {}, {}
        of: dict[str, list[PresenceSample]] = defaultdict(list)
        for item in read:
            if (node := _node_of(item)) is not None:
                of[node].append(item)
        self._of = dict(of)
        for node in self._of:
            self._settle(node)

    def _settle(self, node: str) -> None:
        """Work the node out again from its samples."""
        items = self._of.get(node)
        self.counts.pop(node, None)
        self.why.pop(node, None)
        if not items:
            self._of.pop(node, None)
            return
        values = {value for name, value, _ in items if name is not None}
        if len(values) > 1 or any(not (-1 <= v <= MAX_GPUS_PER_NODE and v == int(v)) for v in values):
            self.why[node] = GPU_COUNT_SIGNAL  # not a count, or a node named twice with two counts
        elif any(name is None for name, _, _ in items):
            self.why[node] = EXPORTER_SIGNAL  # a sample naming it did not parse
        else:
            self.counts[node] = int(values.pop())


def _node_of(item: PresenceSample) -> str | None:
    """The node a sample names, whether or not it parsed (None: it names none that could be read)."""
    return item[0] or item[2]


def presence_sample(raw: object) -> PresenceSample:
    """One decoded presence sample."""
    item = parse(raw)
    if isinstance(item, Bad):
        return None, 0.0, item.node
    return item.node, item.value, None


def _decode(part: bytes) -> PresenceSample:
    try:
        raw = json.loads(part)
    except (ValueError, RecursionError):
        raise AnswerError("a presence sample that is not JSON") from None
    return presence_sample(raw)
