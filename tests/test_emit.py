"""The one emitter: data stays data, paths stay inside the cluster folder."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.compile.manifest import Manifest
from generator.emit import cluster_tree
from generator.yamltext import to_yaml

scalars = st.one_of(st.text(), st.integers(), st.booleans(), st.none())
values = st.recursive(scalars,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_data_round_trips_as_one_document(data: object) -> None:
    docs = list(yaml.safe_load_all(to_yaml({"data": data})))
    assert docs == [{"data": data}]


@pytest.mark.parametrize("name", ["..", "a/b", "", "x\x00y"])
def test_unsafe_names_never_become_paths(name: str) -> None:
    m = Manifest(("kueue",), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}, ("f", 1))
    with pytest.raises(ValueError, match="unsafe path component"):
        cluster_tree("c", [m])


def test_two_objects_on_one_path_are_refused() -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(ValueError, match="two objects would be written"):
        cluster_tree("c", [Manifest(("a",), body, ("f", 1)), Manifest(("a",), body, ("f", 2))])
