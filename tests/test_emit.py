"""The one emitter: data stays data, paths stay inside the cluster folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.compile.manifest import Manifest
from generator.emit import cluster_tree
from generator.yamltext import _MAY_NOT_BE_TEXT, NOT_A_STRING, ambiguous, to_yaml

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


@pytest.mark.parametrize("value", ["1e3", "6e1", "0o17", "3e-4", "-.5", "1E10", "y", "N", "off", "0b11", "1:00",
                                   "2001-12-14", ".nan", "<<", "="])
def test_strings_any_yaml_reader_takes_for_non_strings_are_quoted(value: str) -> None:
    """YAML 1.2 core and go-yaml v2 read these as numbers, booleans or timestamps; PyYAML (1.1)
    reads some as text, so libyaml alone would have written them plain (issue 11)."""
    line = to_yaml({"k": value}).strip()
    assert line == f"k: '{value}'", line


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from("nNtTfFyYoOeElLuUrsaxbBiI~+-._:<=0123456789 \t"), max_size=12)
       | st.from_regex(NOT_A_STRING[3][1], fullmatch=True) | st.from_regex(NOT_A_STRING[5][1], fullmatch=True)
       | st.text(max_size=6))
def test_only_strings_starting_like_a_non_string_are_tried(value: str) -> None:
    """The emitter tries the patterns only on strings whose first character some pattern can start
    with: every string a pattern matches starts with one of them."""
    if ambiguous(value) is not None:
        assert value == "" or value[0] in _MAY_NOT_BE_TEXT
        assert "\n" in value or to_yaml({"k": value}).startswith("k: '")  # (multi-line: a literal block)


def test_a_team_named_like_a_number_stays_a_string(fleet_root: Path) -> None:
    from tests.conftest import run

    (fleet_root / "teams/1e3.yaml").write_text('name: "1e3"\nowners: ["@acme/x"]\nquotas:\n  dev:\n    l4: {gpus: 1}\n')
    result = run(fleet_root, "render", "--cluster", "dev")
    assert result.code == 0, result.err
    namespace = (fleet_root / "rendered/dev/teams/1e3/1e3/namespace-1e3.yaml").read_text()
    assert "  name: '1e3'\n" in namespace and "fleetgen.io/team: '1e3'" in namespace


floats = st.floats(allow_nan=True, allow_infinity=True)
any_values = st.recursive(st.one_of(scalars, floats),
                          lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.one_of(st.text(), st.integers(), st.booleans(), st.none()), inner,
                                            max_size=4),
                          max_leaves=25)


@settings(max_examples=250, deadline=None)
@given(any_values)
def test_the_node_builder_writes_what_the_representer_writes(data: object) -> None:
    """`to_yaml` builds the node tree itself instead of through PyYAML's representer: byte for
    byte the same text as `yaml.dump` with the same dumper, for every kind of value and key."""
    from generator.yamltext import _Dumper

    expected = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                         width=1 << 30)
    assert to_yaml(data) == expected
