"""The YAML reader refuses what PyYAML would silently accept, always with a line number."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.config.yamlsource import MAX_FILE_BYTES, load_source
from generator.errors import InputError


def _load(tmp_path: Path, text: str | bytes) -> object:
    path = tmp_path / "teams/f.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_source(tmp_path, "teams/f.yaml")


def _error(tmp_path: Path, text: str | bytes) -> str:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    return str(info.value)


def test_positions_of_keys_and_list_items(tmp_path: Path) -> None:
    src = _load(tmp_path, "a: 1\nb:\n  - x\n  - {c: 2}\n")
    assert src.data == {"a": 1, "b": ["x", {"c": 2}]}
    assert src.line_of(("b", 1, "c")) == 4
    assert src.line_of(("b", 0)) == 3
    assert src.line_of(("b", 7, "zzz")) == 2  # unknown paths fall back to the nearest known key


@pytest.mark.parametrize("text,expected", [
    ("a: 1\nb: 2\na: 3\n", "teams/f.yaml:3: a: duplicate key 'a' (first defined on line 1)"),
    ("a: [1\n", "teams/f.yaml:2: invalid YAML"),
    ("a: 1\n---\nb: 2\n", "invalid YAML: but found another document"),
    ("on: 1\n", "teams/f.yaml:1: unquoted 'on' is a boolean in YAML 1.1 and text in YAML 1.2"),
    ("1: x\n", "teams/f.yaml:1: key '1' is read as int, not a string"),
    # YAML 1.1-only numbers (issue 11): PyYAML would have read 8, 10, 2, 60 and 5 silently.
    ("gpus: 010\n", "teams/f.yaml:1: gpus: unquoted '010' has a leading zero"),
    ("gpus: 1_0\n", "teams/f.yaml:1: gpus: unquoted '1_0' uses '_' between digits"),
    ("gpus: 0x2\n", "teams/f.yaml:1: gpus: unquoted '0x2' is a binary, octal or hex number"),
    ("gpus: 0o17\n", "teams/f.yaml:1: gpus: unquoted '0o17' is a binary, octal or hex number"),
    ("gpus: 0b101\n", "teams/f.yaml:1: gpus: unquoted '0b101' is a binary, octal or hex number"),
    ("window: 1:00\n", "teams/f.yaml:1: window: unquoted '1:00' is a base-60 number in YAML 1.1"),
    ("name: 1e3\n", "teams/f.yaml:1: name: unquoted '1e3' is a number in YAML 1.2"),
    ("a:\n  - -1E-4\n", "teams/f.yaml:2: a[0]: unquoted '-1E-4' is a number in YAML 1.2"),
    ("a: !!python/object:os.system x\n", "unsupported YAML tag"),
    ("base: &b {x: 1}\nother:\n  <<: *b\n", "YAML merge keys (<<) are not supported"),
    ("", "file is empty"),
    ("a: " + "[" * 40 + "]" * 40 + "\n", "nesting deeper than 32 levels"),
    ("[1, 2]: x\n", "a mapping key must be a plain string"),
])
def test_refused_with_location(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _error(tmp_path, text)


@pytest.mark.parametrize("text,data", [
    ('a: "010"\nb: \'1e3\'\nc: "yes"\n', {"a": "010", "b": "1e3", "c": "yes"}),  # quoted: text, as written
    ("a: 10\nb: 1.5\nc: true\nd: 1.0e+3\ne: 0\n", {"a": 10, "b": 1.5, "c": True, "d": 1000.0, "e": 0}),
])
def test_unambiguous_values_are_read(tmp_path: Path, text: str, data: object) -> None:
    assert _load(tmp_path, text).data == data


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    assert "more than 20000 nodes (an alias bomb?)" in _error(tmp_path, "\n".join(lines) + "\n")


def test_huge_file_and_bad_encoding(tmp_path: Path) -> None:
    assert "more than the 1048576 allowed" in _error(tmp_path, "a: " + "x" * MAX_FILE_BYTES + "\n")
    assert "teams/f.yaml:2: file is not valid UTF-8" in _error(tmp_path, b"a: 1\nb: \xff\xfe\n")


def test_quoted_versions_stay_text_and_plain_ones_numbers(tmp_path: Path) -> None:
    assert _load(tmp_path, "a: true\nb: '1.33'\nc: 1.33\n").data == {"a": True, "b": "1.33", "c": 1.33}
