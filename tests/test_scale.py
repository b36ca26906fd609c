"""Issue 28: render time linear in the teams of one pool (a large or hostile fleet must not hang CI).

`capacity` once scanned every node of a pool's cohort tree for every team: 250 / 1,000 / 2,500
teams took 8.7 / 117 / 575 s, 10,000 did not finish in 900 s. The tree now lists each node's
children once and memoises what every subtree lends.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.synth import one_pool as one_pool_fleet
from generator.capacity import _NO_LIMIT, _Node, _Tree, pool_capacities
from generator.checks import load_fleet
from tests.conftest import run

TEN_THOUSAND = 10_000
RENDER_BOUND_S = 240
"""10,000 teams in one pool (90,061 objects; 100,057 while each team had a CPU queue too), every object
rendered and written: measured 45 s on a busy 2-core machine (README, "Speed"); the bound leaves room for
a loaded CI machine, not for quadratic growth (which took more than 900 s)."""
CAPACITY_BOUND_S = 10
"""The capacity model alone at 10,000 teams: measured 0.3 s; the quadratic walk took minutes."""


@pytest.mark.scale
def test_the_capacity_model_is_linear_in_the_teams_of_one_pool(tmp_path: Path) -> None:
    fleet = load_fleet(one_pool_fleet(tmp_path / "fleet", TEN_THOUSAND))
    start = time.perf_counter()
    (pool,) = pool_capacities(fleet)
    elapsed = time.perf_counter() - start
    assert len(pool.teams) == TEN_THOUSAND and elapsed < CAPACITY_BOUND_S, elapsed
    # 1,250 teams per cohort, half of them lending 1 GPU: a team with 1 GPU may borrow what the
    # cohort holds (8), what its 1,249 siblings lend, and the root's unallocated share.
    first = pool.teams[0]
    assert first.guaranteed == 1 and first.borrowable == 8 + 1249 + pool.shared + 7 * (8 + 1250)


@pytest.mark.scale
def test_ten_thousand_teams_in_one_pool_render_within_the_bound(tmp_path: Path) -> None:
    root = one_pool_fleet(tmp_path / "fleet", TEN_THOUSAND)
    start = time.perf_counter()
    result = run(root, "render")
    elapsed = time.perf_counter() - start
    assert result.code == 0, result.err[-2000:]
    objects = int(re.match(r"rendered (\d+) objects in 1 clusters", result.out).group(1))  # type: ignore[union-attr]
    # Nine per team (its queue, two LocalQueues, namespace, policies, quotas, bindings) and the shared ones.
    assert objects >= 9 * TEN_THOUSAND and elapsed < RENDER_BOUND_S, (elapsed, result.out)


# --- the linear walk gives what the direct definition gives -------------------------------------

def _lends(nodes: dict[str, _Node], name: str) -> int:
    """The direct definition (the old code): a subtree lends its own and its members' quota, capped."""
    node = nodes[name]
    total = node.nominal + sum(_lends(nodes, child) for child, n in nodes.items() if n.parent == name)
    return min(total, node.lending_limit if node.lending_limit is not None else _NO_LIMIT)


def _offers(nodes: dict[str, _Node], name: str, to: str) -> int:
    node = nodes[name]
    total = node.nominal + sum(_lends(nodes, child) for child, n in nodes.items() if n.parent == name and child != to)
    if node.parent is not None:
        limit = node.borrowing_limit if node.borrowing_limit is not None else _NO_LIMIT
        total += min(limit, _offers(nodes, node.parent, name))
    return total


_limit = st.one_of(st.none(), st.integers(0, 40))


@st.composite
def trees(draw: st.DrawFn) -> dict[str, _Node]:
    nodes = {"root": _Node(draw(st.integers(0, 50)), None, None, None)}
    for i in range(draw(st.integers(0, 8))):  # cohorts, each under the root or an earlier cohort
        parent = draw(st.sampled_from(sorted(nodes)))
        nodes[f"c{i}"] = _Node(draw(st.integers(0, 20)), draw(_limit), draw(_limit), parent)
    cohorts = sorted(nodes)
    for i in range(draw(st.integers(1, 12))):
        nominal = draw(st.integers(0, 30))
        lend = draw(st.one_of(st.none(), st.integers(0, nominal)))
        nodes[f"team:t{i}"] = _Node(nominal, draw(_limit), lend, draw(st.sampled_from(cohorts)))
    return nodes


@settings(max_examples=300, deadline=None)
@given(trees())
def test_the_linear_walk_equals_the_direct_definition(nodes: dict[str, _Node]) -> None:
    tree = _Tree(nodes)
    for name, node in nodes.items():
        if name.startswith("team:"):
            assert tree.offers(node.parent, name) == _offers(nodes, node.parent, name)  # type: ignore[arg-type]
