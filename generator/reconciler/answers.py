"""An answer that names every node every loop, read in proportion to what changed in it.

The presence query (exporter up, GPUs reporting) has one sample per GPU node, and from one loop to
the next almost none of them change; only the evaluation time, which Prometheus writes into every
sample, always does. Prometheus writes an instant vector in one compact shape
(`web/api/v1/json_codec.go`: `{"metric":{...},"value":[<time>,"<number>"]}` per sample, inside
`{"status":"success","data":{"resultType":"vector","result":[...]}}`), so the answer splits into
one byte string per sample without decoding it. With the time written as 0, a sample that
did not change is the same bytes as last loop, and only new byte strings are decoded and checked;
what the caller hears is which samples came and went (`Changes`), so what it does with them costs
what changed too.

An answer of any other shape (another server, warnings, pretty printing) is not split: the caller
decodes it whole, as it would without this module. Nothing read here is trusted more than a
decoded answer: a byte string is only ever mapped to what `decode` made of exactly those bytes,
and the split pieces joined again are the answer itself (with its times as 0), so an answer that
is not JSON fails in `decode` of one of its pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

PREFIX = b'{"status":"success","data":{"resultType":"vector","result":['
SUFFIX = b"]}}"
OPEN = b'{"metric":'
CLOSE = b"]}"
BETWEEN = b']},{"metric":'
"""Only ever between two samples: inside a JSON string every `"` is escaped."""
VALUE = b'"value":['
TIME = re.compile(rb"-?[0-9]{1,12}(\.[0-9]{1,3})?,")
"""Prometheus' sample time: seconds with up to three decimals (`util/jsonutil/marshal.go`)."""

T = TypeVar("T")


def samples(body: bytes) -> list[bytes] | None:
    """One byte string per sample, with its time written as 0 and without the `{"metric":` before
    and `]}` after it (`sample` makes it a JSON object again); None when the answer does not have
    exactly Prometheus' compact vector shape."""
    if not body.startswith(PREFIX) or not body.endswith(SUFFIX):
        return None
    inner = body[len(PREFIX):-len(SUFFIX)]
    if not inner:
        return []
    if not inner.startswith(OPEN) or not inner.endswith(CLOSE):
        return None
    at = inner.find(VALUE)
    time = TIME.match(inner, at + len(VALUE)) if at >= 0 else None
    if time is None:
        return None
    inner = inner.replace(VALUE + time.group(), VALUE + b"0,")  # one time for every sample
    return inner[len(OPEN):-len(CLOSE)].split(BETWEEN)


def sample(part: bytes) -> bytes:
    """The JSON object of one of `samples`' pieces."""
    return OPEN + part + CLOSE


@dataclass(frozen=True)
class Changes(Generic[T]):
    """What one answer changed since the last: the samples new in it, decoded (by their bytes),
    and the decoded samples no longer in it."""

    added: dict[bytes, T]
    removed: list[T]
    first: bool
    """No earlier answer was read (or the last one was decoded whole): `added` is every sample."""


class Reader(Generic[T]):
    """Reads successive answers to one query, decoding only samples not in the last answer.

    `decode` turns one sample's bytes into what the caller keeps (it must depend on nothing but
    those bytes, and raise for bytes that are not a JSON object); `changes` says what changed
    since the last answer, or None when the answer must be decoded whole. A sample's bytes twice
    in one answer are one sample: the same bytes decode to the same thing, and every consumer of
    the presence answer reads a node named twice with one value as named once.
    """

    def __init__(self, decode: Callable[[bytes], T]) -> None:
        self.decode = decode
        self._last: list[bytes] | None = None
        """Last answer's pieces, in its order (None: nothing read, or it was decoded whole)."""
        self._known: dict[bytes, T] = {}
        """Every distinct piece of the last answer, decoded."""
        self.decoded = 0
        """Samples decoded by the last `changes` (0 when the answer was the same as the one before)."""
        self.split = False
        """The last answer had Prometheus' compact shape and was read sample by sample."""

    def changes(self, body: bytes) -> Changes[T] | None:
        parts = samples(body)
        self.split = parts is not None
        if parts is None:
            self.forget()
            return None
        first = self._last is None
        if parts == self._last:  # nothing changed: the usual loop
            self.decoded = 0
            return Changes({}, [], False)
        known = self._known
        new = dict.fromkeys(part for part in parts if part not in known)
        added = {part: self.decode(sample(part)) for part in new}  # may raise: then nothing is kept
        removed = [known.pop(part) for part in known.keys() - set(parts)]
        known.update(added)
        self._last, self.decoded = parts, len(added)
        return Changes(added, removed, first)

    def forget(self) -> None:
        """Start over: the next answer is read as a first one."""
        self._last, self._known, self.decoded = None, {}, 0
