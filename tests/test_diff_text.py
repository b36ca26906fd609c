"""The diff's text of large objects: unified diffs judged by GNU patch, field changes by deepdiff.

Both cut work the libraries would do over a whole object down to the part that changed (the lines
shared at both ends set aside, differing strings taken out of deepdiff's walk); these check that
nothing else changes: every diff still turns the old text into the new one with exact context and
line numbers, and every field change is the one deepdiff finds walking the whole bodies.
"""

from __future__ import annotations

import difflib
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from deepdiff import DeepDiff

from generator.diff import report
from generator.diff.objects import FieldChange, _dotted, _normalise, field_changes
from generator.diff.report import unified_lines


def _lines(rng: random.Random) -> tuple[list[str], list[str]]:
    """Two texts from few distinct lines (so matches are ambiguous), often sharing long runs at
    both ends as a rendered ConfigMap's JSON does."""
    shared = [f"  {rng.choice('{}[],')}" for _ in range(rng.choice([0, 3, 40]))]
    middle = [rng.choice(["a", "b", "c", "}", "  }"]) for _ in range(rng.randint(1, 25))]
    a = [*shared, *middle, *reversed(shared)]
    b = list(a)
    for _ in range(rng.randint(1, 5)):
        at = rng.randint(0, len(b))
        edit = rng.randint(0, 2)
        if edit == 0 and len(b) > 1:
            del b[min(at, len(b) - 1)]
        elif edit == 1:
            b.insert(at, rng.choice(["a", "d", "}", "new"]))
        else:
            b[min(at, len(b) - 1)] = rng.choice(["a", "e", "]"])
    return a, b


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_unified_diffs_turn_the_old_text_into_the_new_under_gnu_patch(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    pairs = [_lines(rng) for _ in range(400)]
    (tmp_path / "tree").mkdir()
    patch = []
    for i, (a, b) in enumerate(pairs):
        (tmp_path / "tree" / f"f{i}").write_text("".join(f"{line}\n" for line in a))
        patch += unified_lines(a, b, f"a/f{i}", f"b/f{i}")
    assert patch
    (tmp_path / "all.patch").write_text("\n".join(patch) + "\n")
    proc = subprocess.run(["patch", "-p1", "--fuzz=0", "--force", "--no-backup-if-mismatch", "-d",
                           str(tmp_path / "tree"), "-i", str(tmp_path / "all.patch")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "offset" not in proc.stdout, proc.stdout  # every hunk applied at the line its header names
    for i, (_, b) in enumerate(pairs):
        assert (tmp_path / "tree" / f"f{i}").read_text() == "".join(f"{line}\n" for line in b), i


def test_a_large_text_with_one_change_is_matched_on_the_lines_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    a = [f'   "line-{i}": {i},' for i in range(5000)]
    b = list(a)
    b[2500] = '   "line-2500": 12,'
    seen: list[int] = []
    real = difflib.unified_diff

    def counted(x: list[str], y: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(len(x) + len(y))
        return real(x, y, *args, **kwargs)

    monkeypatch.setattr(report.difflib, "unified_diff", counted)
    got = unified_lines(a, b, "a", "b")
    assert seen == [14]  # the changed line and 3 of context each side, on both sides
    assert got == list(real(a, b, "a", "b", lineterm="", n=3))
    assert got[2] == "@@ -2498,7 +2498,7 @@"


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.3:
        keys: list[Any] = ["spec", "a.b", "it's", 'say "hi"', "x y", "[h100]", "nvidia.com/gpu", "data", 7]
        return {k: _value(rng, depth + 1) for k in rng.sample(keys, rng.randint(0, 4))}
    if depth < 3 and roll < 0.45:
        if rng.random() < 0.5:  # items with unique names: keyed by name
            return [{"name": n, "v": _value(rng, depth + 1)} for n in rng.sample(["x", "y", "z"], rng.randint(1, 3))]
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice(["8", "16", "multi\nline\ntext\n", "multi\nline\nchanged\n", 8, 16, True, None, 1.5])


def _mutated(rng: random.Random, value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _mutated(rng, v) if rng.random() < 0.6 else v for k, v in value.items()}
        if rng.random() < 0.2:
            out["added"] = _value(rng, 2)
        return out
    if isinstance(value, list):
        return [_mutated(rng, v) if rng.random() < 0.5 else v for v in value]
    return _value(rng, 3) if rng.random() < 0.5 else value


def _whole_walk(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    """Field changes as deepdiff reports them walking both normalised bodies whole."""
    diff = DeepDiff(_normalise(old), _normalise(new), verbose_level=2, zip_ordered_iterables=True,
                    threshold_to_diff_deeper=0)
    ops = {"values_changed": "changed", "type_changes": "changed", "dictionary_item_added": "added",
           "iterable_item_added": "added", "dictionary_item_removed": "removed", "iterable_item_removed": "removed"}
    out = []
    for kind, entries in diff.items():
        for deep_path, value in entries.items():
            op = ops[kind]
            old_value, new_value = ((value["old_value"], value["new_value"]) if op == "changed"
                                    else (None, value) if op == "added" else (value, None))
            out.append(FieldChange(_dotted(deep_path), old_value, new_value, op))
    return sorted(out, key=lambda c: c.path)


def test_field_changes_are_deepdiffs_over_the_whole_bodies() -> None:
    rng = random.Random(29)
    compared = strings = 0
    for _ in range(600):
        old = {"kind": "ConfigMap", "body": _value(rng, 0)}
        new = _mutated(rng, old)
        got = field_changes(old, new, [])
        assert got == _whole_walk(old, new), (old, new)
        compared += bool(got)
        strings += any(isinstance(c.old, str) and isinstance(c.new, str) for c in got)
    assert compared > 300 and strings > 50, (compared, strings)  # the cases were not all trivial
