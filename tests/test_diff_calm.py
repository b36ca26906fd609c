"""Issue 57: the preview says what changed and nothing twice.

The `fleetgen-fleet` ConfigMap's line showed the same truncated JSON on both sides; job templates,
which no engine syncs, were counted as additions and changes; the text format had no GPU table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.diff.report import shown_pair
from tests.conftest import run
from tests.diffs import diff_json, markdown

IMAGE = ("teams/inference.yaml", "ghcr.io/acme/llm-router:2026.11.0", "ghcr.io/acme/llm-router:2026.11.1")
QUOTA = ("teams/speech.yaml", "l4: {gpus: 6, lendingLimit: 2}", "l4: {gpus: 4, lendingLimit: 2}")


def _edit(repo: Path, rel: str, old: str, new: str) -> None:
    text = (repo / rel).read_text()
    assert old in text, (rel, old)
    (repo / rel).write_text(text.replace(old, new, 1))


def test_a_long_value_is_shown_where_it_differs_not_as_the_same_start_twice(repo: Path) -> None:
    _edit(repo, *QUOTA)
    out = run(repo, "diff", "--no-color").out
    lines = [line for line in out.splitlines() if "team.speech.json" in line and " -> " in line]
    assert lines, out
    for line in lines:
        old, new = line.split("json: ", 1)[1].split(" -> ")
        assert old != new, line
    assert any('"gpus": 6' in line and '"gpus": 4' in line for line in lines), lines
    page = "".join(markdown(repo))
    assert '"gpus": 6' in page and '"gpus": 4' in page


@pytest.mark.parametrize(("old", "new", "shown"), [
    ("a\nb\nc\nd", "a\nB\nC\nd", ("line 2: b (+1 more lines)", "line 2: B (+1 more lines)")),
    ("a\nb", "a\nb\nc", ("line 3: (none)", "line 3: c")),
    ("x" * 100 + "1" + "y" * 5, "x" * 100 + "2" + "y" * 5, ("…" + "x" * 20 + "1yyyyy", "…" + "x" * 20 + "2yyyyy")),
    ("short", "other", ("short", "other")),
    (None, "v", ("(none)", "v")),
    (None, "x\ny\nz", ("(none)", "x (+2 more lines)")),
    ("a:\n  b: 1", "a:\n    b: 1", ("line 2:   b: 1", "line 2:     b: 1")),  # indentation shows
    ("a\nb\n", "a\r\nb\r\n", ("same lines, LF line endings, a final newline",
                              "same lines, CRLF line endings, a final newline")),
    ("a" * 90 + "\n", "a" * 90, ("same lines, LF line endings, a final newline",
                                "same lines, LF line endings, no final newline")),
    ("h\n" + "q" * 100 + "1", "h\n" + "q" * 100 + "2", ("line 2: …" + "q" * 20 + "1", "line 2: …" + "q" * 20 + "2")),
])
def test_shown_pair(old: str | None, new: str, shown: tuple[str, str]) -> None:
    assert shown_pair(old, new) == shown


def test_job_templates_are_kept_apart_from_what_an_engine_syncs(repo: Path) -> None:
    _edit(repo, *IMAGE)
    code, report = diff_json(repo)
    assert code == 1
    templates = [c for c in report["changes"] if not c["synced"]]
    synced = [c for c in report["changes"] if c["synced"]]
    assert templates and all("/templates/" in c["path"] for c in templates), report["changes"]
    assert all("/templates/" not in c["path"] for c in synced)
    assert report["summary"]["templates"] == len(templates)
    assert report["summary"]["change"] == len([c for c in synced if c["action"] == "change"])
    text = run(repo, "diff", "--no-color").out
    assert text.index("job templates (no engine syncs them") < text.index("Deployment inference-staging/router"), text
    assert f"; {len(templates)} job template(s) not synced" in text.splitlines()[-1], text.splitlines()[-1]
    page = "".join(markdown(repo))
    assert "(job template, not synced)" in page and "job templates |" in page


def test_the_text_format_has_the_gpu_table(repo: Path) -> None:
    _edit(repo, *QUOTA)
    out = run(repo, "diff", "--no-color").out
    at = out.index("GPUs in dev / l4")
    table = out[at:].splitlines()[:4]
    assert table[1].split() == ["team", "guaranteed", "borrowable", "lendable"], table
    assert table[3].split()[:4] == ["speech", "6", "->", "4"], table


@pytest.mark.parametrize(("path", "synced"), [("dev/templates/speech/asr.jobset.yaml", False),
                                              ("dev/teams/speech/speech/localqueue-default.yaml", True),
                                              ("gitops/templates/kustomization-templates-fleet.yaml", True)])
def test_only_a_clusters_templates_folder_holds_templates(path: str, synced: bool) -> None:
    """A cluster named `templates` has its bootstrap under rendered/gitops/templates/: synced."""
    from generator.diff.objects import Obj

    assert Obj(("dev", "", "X", "", "x"), path, {}, "").synced is synced
