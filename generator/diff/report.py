"""Diff reports: JSON (documented schema), coloured text, and Markdown comments within GitHub's limit.

GitHub rejects comment bodies over 65,536 characters. The Markdown report first drops whole
per-object diff blocks (largest first), then splits the rest into "part N/M" comments, each
within the limit; together the parts name every changed object. The full text diff is always
available separately.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from generator.diff.impact import CapacityRow, PoolImpact, Risk
from generator.diff.objects import Change

GITHUB_LIMIT = 65_536
MAX_FIELDS = 40
MAX_RISKS = 60

# --- JSON ------------------------------------------------------------------------------------------


Action = Literal["add", "change", "destroy"]


class FieldJson(BaseModel):
    path: str = Field(description="Dotted path; [name] selects a list item by its name, [3] by position")
    op: Literal["changed", "added", "removed"]
    old: Any = Field(description="Value before (null when added)")
    new: Any = Field(description="Value after (null when removed)")


class ChangeJson(BaseModel):
    action: Literal["add", "change", "destroy"]
    cluster: str
    team: str | None
    group: str
    kind: str
    namespace: str
    name: str
    path: str = Field(description="File under rendered/")
    fields: list[FieldJson]


class ShareJson(BaseModel):
    guaranteed: int
    borrowable: int
    lendable: int


class CapacityJson(BaseModel):
    cluster: str
    pool: str
    team: str
    before: ShareJson | None
    after: ShareJson | None


class RiskJson(BaseModel):
    severity: Literal["high", "medium", "low"]
    rule: str
    message: str


class Counts(BaseModel):
    add: int = 0
    change: int = 0
    destroy: int = 0


class DiffReport(BaseModel):
    """`fleetgen diff --format json`: everything the Markdown comment says, for machines."""

    version: Literal[1] = 1
    before: str
    after: str
    summary: Counts
    clusters: dict[str, Counts]
    changes: list[ChangeJson]
    capacity: list[CapacityJson]
    risks: list[RiskJson]


@dataclass
class DiffResult:
    """Everything one diff found."""

    before: str
    after: str
    changes: list[Change]
    capacity: list[PoolImpact]
    risks: list[Risk]
    has_fleets: bool

    def counts(self) -> tuple[Counts, dict[str, Counts]]:
        total = Counts()
        per_cluster: dict[str, Counts] = {}
        for change in self.changes:
            for bucket in (total, per_cluster.setdefault(change.obj.cluster, Counts())):
                setattr(bucket, change.action, getattr(bucket, change.action) + 1)
        return total, dict(sorted(per_cluster.items()))

    def to_json(self) -> DiffReport:
        total, per = self.counts()

        def share(s: Any) -> ShareJson | None:
            return ShareJson(guaranteed=s.guaranteed, borrowable=s.borrowable, lendable=s.lendable) if s else None

        return DiffReport(
            before=self.before, after=self.after, summary=total, clusters=per,
            changes=[ChangeJson(action=cast(Action, c.action), cluster=c.obj.cluster, team=c.obj.team,
                                group=c.obj.key[1],
                                kind=c.obj.key[2], namespace=c.obj.key[3], name=c.obj.key[4], path=c.obj.path,
                                fields=[FieldJson(path=f.path, op=f.op, old=f.old, new=f.new)  # type: ignore[arg-type]
                                        for f in c.fields]) for c in self.changes],
            capacity=[CapacityJson(cluster=r.cluster, pool=r.pool, team=r.team, before=share(r.before),
                                   after=share(r.after)) for p in self.capacity for r in p.rows],
            risks=[RiskJson(severity=r.severity, rule=r.rule, message=r.message)  # type: ignore[arg-type]
                   for r in self.risks])


# --- text ------------------------------------------------------------------------------------------

def unified(change: Change) -> list[str]:
    """A unified diff of the object's YAML (generated-file headers left out)."""
    def lines(text: str | None) -> list[str]:
        return [line for line in (text or "").splitlines() if not line.startswith("# ")]
    old, new = change.before, change.after
    return list(difflib.unified_diff(lines(old.text if old else None), lines(new.text if new else None),
                                     fromfile=(old.path if old else "/dev/null"),
                                     tofile=(new.path if new else "/dev/null"), lineterm="", n=3))


def full_text(result: DiffResult) -> str:
    """The complete diff, every object, as plain unified diff text."""
    return "\n".join(line for change in result.changes for line in unified(change)) + "\n"


def to_text(result: DiffResult, color: bool) -> str:
    """Terraform-style plan for a terminal."""
    import click

    def paint(text: str, fg: str) -> str:
        return click.style(text, fg=fg) if color else text

    total, _ = result.counts()
    marks = {"add": ("+", "green"), "change": ("~", "yellow"), "destroy": ("-", "red")}
    out = [f"fleetgen diff {result.before} -> {result.after}"]
    for change in result.changes:
        mark, fg = marks[change.action]
        out.append(paint(f"{mark} {change.obj.cluster}: {change.obj.label}", fg))
        for f in change.fields[:MAX_FIELDS]:
            out.append(f"    {f.path}: {_short(f.old)} -> {_short(f.new)}")
    for risk in result.risks:
        out.append(paint(f"! {risk.severity}: {risk.message}", "red" if risk.severity == "high" else "yellow"))
    out.append(f"{total.add} to add, {total.change} to change, {total.destroy} to destroy")
    return "\n".join(out) + "\n"


def _short(value: Any, limit: int = 80) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Markdown --------------------------------------------------------------------------------------

def md(value: Any) -> str:
    """Inline Markdown-safe text: no table breaks, code spans, HTML or line breaks from data."""
    text = str(value)
    for char, repl in (("\\", "\\\\"), ("|", "\\|"), ("`", "\\`"), ("<", "&lt;"), (">", "&gt;"),
                       ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        text = text.replace(char, repl)
    return re.sub(r"[\r\n\u2028\u2029]+", " ", text)


def fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so data cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _share(row: CapacityRow, attr: str) -> str:
    b = getattr(row.before, attr) if row.before else 0
    a = getattr(row.after, attr) if row.after else 0
    return str(a) if a == b else f"{b} → **{a}**"


@functools.lru_cache(maxsize=1)
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("generator.diff", "templates"), autoescape=False,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["md"] = md
    env.filters["share"] = _share
    return env.get_template("comment.md.j2")


@dataclass
class Entry:
    """One changed object in the Markdown report."""

    cluster: str
    team: str
    summary: str
    fields: str
    diff: str

    def text(self, with_diff: bool) -> str:
        body = f"<details><summary>{self.summary}</summary>\n\n{self.fields}"
        if with_diff:
            body += self.diff
        elif self.diff:
            body += "_Diff omitted to keep this comment within GitHub's size limit; see the full diff artifact._\n"
        return body + "\n</details>\n"


def _entries(result: DiffResult) -> list[Entry]:
    marks = {"add": "➕", "change": "✏️", "destroy": "🗑️"}
    out = []
    for change in result.changes:
        obj = change.obj
        # No code spans around data: backslash escapes do not work inside them.
        lines = [f"- **{md(f.path)}**: {md(_short(f.old))} → {md(_short(f.new))}" for f in change.fields[:MAX_FIELDS]]
        if len(change.fields) > MAX_FIELDS:
            lines.append(f"- … {len(change.fields) - MAX_FIELDS} more fields")
        diff_text = "\n".join(unified(change))
        mark = fence(diff_text)
        out.append(Entry(obj.cluster, obj.team or "(shared)", f"{marks[change.action]} {md(obj.label)}",
                         "\n".join(lines) + ("\n\n" if lines else ""),
                         f"{mark}diff\n{diff_text}\n{mark}\n" if diff_text else ""))
    return out


def _body(entries: list[tuple[Entry, bool]]) -> str:
    """Group entries into <details> per cluster and team (every block closed)."""
    out: list[str] = []
    cluster = team = None
    for entry, with_diff in entries:
        if entry.cluster != cluster:
            if team is not None:
                out.append("</details>\n")
            if cluster is not None:
                out.append("</details>\n")
            cluster, team = entry.cluster, None
            out.append(f"<details><summary><b>cluster {md(cluster)}</b></summary>\n\n")
        if entry.team != team:
            if team is not None:
                out.append("</details>\n")
            team = entry.team
            out.append(f"<details><summary>team {md(team)}</summary>\n\n")
        out.append(entry.text(with_diff))
    if team is not None:
        out.append("</details>\n")
    if cluster is not None:
        out.append("</details>\n")
    return "".join(out)


def _page(result: DiffResult, body: str, part: int, total_parts: int) -> str:
    total, per = result.counts()
    verdict = "no changes" if not result.changes else (
        "changes with high risks, review carefully" if any(r.severity == "high" for r in result.risks)
        else "changes, review needed")
    return str(_template().render(
        part=part, part_total=total_parts, verdict=verdict, totals=total, clusters=list(per.items()),
        before=md(result.before), after=md(result.after), risks=result.risks, max_risks=MAX_RISKS,
        capacity=result.capacity, has_fleets=result.has_fleets, sections=bool(result.changes), body=body))


def markdown_parts(result: DiffResult, limit: int = GITHUB_LIMIT) -> list[str]:
    """The comment(s): one if it fits (dropping diff blocks first), else "part N/M" comments."""
    entries = _entries(result)
    with_diff = [True] * len(entries)
    page = _page(result, _body(list(zip(entries, with_diff, strict=True))), 1, 1)
    by_size = sorted(range(len(entries)), key=lambda i: -len(entries[i].diff))
    for i in by_size:
        if len(page) <= limit:
            return [page]
        with_diff[i] = False
        page = _page(result, _body(list(zip(entries, with_diff, strict=True))), 1, 1)
    if len(page) <= limit:
        return [page]
    # Split: pack entries greedily; the first part also carries the summary, risks and capacity.
    reserve = 200  # the "part N/M" line and the closing of open <details>
    parts: list[list[tuple[Entry, bool]]] = [[]]
    for entry in entries:
        candidate = parts[-1] + [(entry, False)]
        size = len(_page(result, _body(candidate), len(parts), 99)) if len(parts) == 1 else len(_body(candidate))
        if parts[-1] and size + reserve > limit:
            parts.append([(entry, False)])
        else:
            parts[-1] = candidate
    return [_page(result, _body(chunk), i + 1, len(parts)) for i, chunk in enumerate(parts)]
