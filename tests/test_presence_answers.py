"""Issue 33: the presence answer (one sample per GPU node, every loop) is read in proportion to what
changed in it; what the reconciler concludes is exactly what decoding the whole answer gives.

Answers are written as Prometheus writes them (compact, the evaluation time in every sample: the
shape `web/api/v1/json_codec.go` writes, checked against the real Prometheus in
test_reconciler_integration.py); the same answers pretty-printed are decoded whole, and the two
sources must agree loop after loop.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.reconciler.answers import samples
from generator.reconciler.sources import EXPORTER_SIGNAL, GPU_COUNT_SIGNAL, PRESENCE_QUERY, PrometheusSource

NODES = [f"gpu-{i}" for i in range(40)]


class Answering(PrometheusSource):
    """The real source; each loop's answers come from `bodies` instead of the network."""

    def __init__(self) -> None:
        super().__init__("http://answers")
        self.bodies: dict[str, bytes] = {}

    def answer(self, expr: str) -> bytes:
        return self.bodies.get(expr, _body([], 0))


def _body(result: list[Any], when: float, compact: bool = True) -> bytes:
    answer = {"status": "success", "data": {"resultType": "vector", "result": result}}
    text = json.dumps(answer, separators=(",", ":")) if compact else json.dumps(answer, indent=1)
    return text.replace('"NOW"', str(when)).encode()


def _sample(node: Any, value: Any) -> dict[str, Any]:
    return {"metric": {"node": node}, "value": ["NOW", value]}


HOSTILE = [  # samples a forged or broken answer holds; each must count as it does when decoded whole
    {"metric": {"node": "gpu-3"}, "value": ["NOW", "NaN"]},
    {"metric": {"node": "gpu-4"}, "value": ["NOW", "65"]},
    {"metric": {"node": "gpu-5"}, "value": ["NOW", "2.5"]},
    {"metric": {"node": "gpu-6", "x": 1}, "value": ["NOW", "8"]},
    {"metric": {"node": "Not_A_Node"}, "value": ["NOW", "8"]},
    {"metric": {"node": "gpu-7"}},
    {"metric": {"node": "gpu-8"}, "value": ["NOW", "8", "9"]},
    {"metric": {"node": "gpu-9"}, "value": [1, "8"]},  # a time of its own
    {"metric": {"node": "gpu-10", "a": "]},{\"metric\":"}, "value": ["NOW", "8"]},
    {"value": ["NOW", "8"], "metric": {"node": "gpu-11"}},
    {"metric": {"node": "gpu-12"}, "value": ["NOW", "-1"]},
    {"metric": {"node": "gpu-12"}, "value": ["NOW", "8"]},  # named twice, two counts
    {"metric": {"node": "gpu-13"}, "value": ["NOW", "8"]},
    {"metric": {"node": "gpu-13"}, "value": ["NOW", "8"]},  # named twice, one count
    [1, 2],
]


@pytest.mark.parametrize("hostile", range(len(HOSTILE)))
def test_a_hostile_sample_counts_as_it_does_decoded_whole(hostile: int) -> None:
    result = [_sample(n, "8") for n in NODES[:20]] + [HOSTILE[hostile]]
    compact, whole = Answering(), Answering()
    for when in (1764281234.125, 1764281264.5):
        compact.bodies[PRESENCE_QUERY] = _body(result, when)
        whole.bodies[PRESENCE_QUERY] = _body(result, when, compact=False)
        assert compact.observe(NODES) == whole.observe(NODES)


def test_only_changed_samples_are_decoded() -> None:
    source = Answering()
    values = {n: "8" for n in NODES}

    def loop(when: float) -> dict[str, Any]:
        source.bodies[PRESENCE_QUERY] = _body([_sample(n, v) for n, v in values.items()], when)
        return source.observe(NODES)

    first = loop(100)
    assert source.presence.reader.decoded == len(NODES)
    assert loop(130) == first and source.presence.reader.decoded == 0  # only the time moved on
    values.update({"gpu-1": "-1", "gpu-2": "7", "gpu-3": "8.5"})
    observed = loop(160.25)
    assert source.presence.reader.decoded == 3
    assert observed["gpu-1"].unknown_signals == (EXPORTER_SIGNAL,)
    assert observed["gpu-2"].gpus_reporting == 7 and observed["gpu-2"].unknown_signals == ()
    assert set(observed["gpu-3"].unknown_signals) == {EXPORTER_SIGNAL, GPU_COUNT_SIGNAL}
    assert observed["gpu-4"] is first["gpu-4"]  # nothing to say: last loop's Observation again


@pytest.mark.parametrize("body", [
    b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"gpu-1"},"value":[1,"8"]},'
    b'{"metric":{"node":"gpu-2"},"value":[1,"8"}]}}',
    b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"gpu-1"},"value":[1,"8"]},'
    b'{"metric":{"node":"gpu-2"},"value":[1,"8"],]}]}}',
])
def test_an_answer_that_is_not_json_fails_its_query_as_a_whole(body: bytes) -> None:
    """Split into pieces, one piece that is not JSON fails the query, as decoding it whole does."""
    with pytest.raises(ValueError):
        json.loads(body)
    source = Answering()
    source.bodies[PRESENCE_QUERY] = _body([_sample(n, "8") for n in NODES], 1)
    source.observe(NODES)
    source.bodies[PRESENCE_QUERY] = body
    observed = source.observe(NODES)
    assert all({EXPORTER_SIGNAL, GPU_COUNT_SIGNAL} <= set(observed[n].unknown_signals) for n in NODES)


def test_pieces_are_the_samples_with_time_zero() -> None:
    result = [_sample(n, str(i % 9)) for i, n in enumerate(NODES)]
    parts = samples(_body(result, 1764281234.5))
    assert parts is not None
    assert [json.loads(b'{"metric":' + p + b"]}") for p in parts] == [
        {"metric": s["metric"], "value": [0, s["value"][1]]} for s in result]
    assert samples(_body([], 1)) == []
    assert samples(_body(result, 1, compact=False)) is None
    assert samples(b'{"status":"success","warnings":["w"],"data":{"resultType":"vector","result":[]}}') is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, len(NODES) - 1),
                                   st.sampled_from(["8", "7", "0", "-1", "8", "8", "NaN", "3.5", "99"])),
                         max_size=8), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_loops_of_random_changes_agree_with_decoding_whole(changes: list[list[tuple[int, str]]],
                                                           rng: random.Random) -> None:
    """Any sequence of loops, each changing some samples (values, order, nodes leaving and coming
    back, hostile samples): the compact source and the whole-decoding source observe the same."""
    values: dict[str, str | None] = {n: "8" for n in NODES}
    compact, whole = Answering(), Answering()
    for loop, step in enumerate(changes):
        for index, value in step:
            values[NODES[index]] = None if value == "0" and rng.random() < 0.5 else value  # None: gone
        result = [_sample(n, v) for n, v in values.items() if v is not None]
        if rng.random() < 0.2:
            rng.shuffle(result)
        if rng.random() < 0.2:
            result.append(rng.choice(HOSTILE))
        when = 1764281234 + 30 * loop + rng.choice([0, 0.5, 0.125])
        compact.bodies[PRESENCE_QUERY] = _body(result, when)
        whole.bodies[PRESENCE_QUERY] = _body(result, when, compact=False)
        assert compact.observe(NODES) == whole.observe(NODES)
