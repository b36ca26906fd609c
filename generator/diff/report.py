"""Diff results and their reports: JSON (documented schema) and coloured text.

The pull-request comment (Markdown in parts) is `generator.diff.comment`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from generator.diff.impact import SHARES, PoolImpact
from generator.diff.objects import Change
from generator.diff.risks import Risk
from generator.terminal import table

MAX_FIELDS = 40

# --- JSON ------------------------------------------------------------------------------------------


Action = Literal["add", "change", "destroy"]


class FieldJson(BaseModel):
    """One field of a changed object."""

    path: str = Field(description="Dotted path; [name] selects a list item by its name, [3] by position")
    op: Literal["changed", "added", "removed"] = Field(description="changed: a value on both sides; added: only "
                                                                   "after the change; removed: only before it")
    old: Any = Field(description="Value before (null when added)")
    new: Any = Field(description="Value after (null when removed)")


class ChangeJson(BaseModel):
    """One rendered object the change adds, changes or destroys."""

    action: Literal["add", "change", "destroy"] = Field(description="add: only after the change; change: on both "
                                                                    "sides, with fields that differ; destroy: only "
                                                                    "before it")
    cluster: str = Field(description="The cluster that holds the object (its fleetgen.io/cluster label, else the "
                                     "first folder of its path)")
    team: str | None = Field(description="The team the object belongs to (its fleetgen.io/team label); null for "
                                         "the platform's objects")
    group: str = Field(description="API group (the apiVersion without its version); empty for the core group")
    kind: str = Field(description="The object's kind")
    namespace: str = Field(description="The object's namespace; empty for a cluster-scoped object")
    name: str = Field(description="The object's metadata.name")
    path: str = Field(description="File under rendered/")
    synced: bool = Field(description="Whether a GitOps engine applies it; false for a job template "
                                     "(rendered/<cluster>/templates/), which jobs are created from")
    fields: list[FieldJson] = Field(description="The fields that differ, by path (empty when added or destroyed)")


class ShareJson(BaseModel):
    """One team's GPUs in one pool on one side of the change."""

    guaranteed: int = Field(description="GPUs of the team's nominal quota in the pool")
    borrowable: int = Field(description="GPUs the team can borrow at most while the rest of the cluster is idle")
    lendable: int = Field(description="GPUs of the team's quota that other teams may borrow")


class CapacityJson(BaseModel):
    """One team's GPUs in one pool, before and after the change."""

    cluster: str = Field(description="The cluster of the pool")
    pool: str = Field(description="The node pool, as the cluster file names it")
    team: str = Field(description="The team whose share this is")
    before: ShareJson | None = Field(description="The team's share before the change (null: not in the pool)")
    after: ShareJson | None = Field(description="The team's share after the change (null: not in the pool)")


class PoolSizeJson(BaseModel):
    """A pool's GPUs and what is promised of them, on one side of the change."""

    gpus: int = Field(description="GPUs in the pool")
    limit: int = Field(description="GPUs quotas may add up to: gpus x the cluster's overcommit")
    guaranteed: int = Field(description="GPUs guaranteed to teams (sum of their quotas)")


class PoolJson(BaseModel):
    """A pool whose size, overcommit or team quotas change."""

    cluster: str = Field(description="The cluster of the pool")
    pool: str = Field(description="The node pool, as the cluster file names it")
    product: str = Field(description="The GPU product of the pool's nodes")
    before: PoolSizeJson | None = Field(description="The pool before the change (null: no GPUs there, a new pool)")
    after: PoolSizeJson | None = Field(description="The pool after the change (null: no GPUs left, a removed pool)")
    formerly: str | None = Field(default=None, description="The pool's name before, where the change renames it (a "
                                                           "pool that goes while one with the same GPUs and teams' "
                                                           "shares arrives)")


class RiskJson(BaseModel):
    """Something a reviewer must look at twice, on the clusters it names."""

    severity: Literal["high", "medium", "low"] = Field(description="The rule severities follow: see the risk "
                                                                   "rules reference")
    rule: str = Field(description="The rule that flagged it (a name of the risk rules reference)")
    message: str = Field(description="The line as the comment shows it, clusters first")
    clusters: list[str] = Field(default_factory=list, description="Every cluster the line holds on (one cause, "
                                                                  "one line)")


class Counts(BaseModel):
    """Objects by what the change does to them."""

    add: int = Field(default=0, description="Synced objects the change adds")
    change: int = Field(default=0, description="Synced objects the change changes")
    destroy: int = Field(default=0, description="Synced objects the change destroys")
    templates: int = Field(default=0, description="Job templates the change adds, changes or removes (never "
                                                  "synced, so not in the counts above)")


class DiffReport(BaseModel):
    """`fleetgen diff --format json`: everything the Markdown comment says, for machines."""

    version: Literal[2] = Field(default=2, description="Version of this format; one a reader must read "
                                                       "differently gets a new number (2: job templates "
                                                       "are counted apart from the synced objects)")
    before: str = Field(description="What the change is compared from, as the report names it: the base git ref "
                                    "and its commit, or the --from folder")
    after: str = Field(description="What the change is compared to, as the report names it: the work tree, or "
                                   "the --to folder")
    summary: Counts = Field(description="Objects added, changed and destroyed, over every cluster")
    clusters: dict[str, Counts] = Field(description="Objects added, changed and destroyed, by cluster")
    changes: list[ChangeJson] = Field(description="Every object added, changed or destroyed, by cluster, group, "
                                                  "kind, namespace and name")
    pools: list[PoolJson] = Field(description="Pools whose size, overcommit or team quotas change")
    capacity: list[CapacityJson] = Field(description="Every team's GPUs in each of those pools, before and after")
    risks: list[RiskJson] = Field(description="What a reviewer must look at twice, most severe first")
    notes: list[str] = Field(default_factory=list, description="How the two sides were made")


@dataclass
class DiffResult:
    """Everything one diff found."""

    before: str
    after: str
    changes: list[Change]
    capacity: list[PoolImpact]
    risks: list[Risk]
    has_fleets: bool
    notes: list[str] = field(default_factory=list)
    """How the sides were made, when a reviewer should know (base rendered by its own generator, ...)."""

    @property
    def changed(self) -> bool:
        """Anything changes: an object, or a pool's GPUs (which no object may show)."""
        return bool(self.changes) or any(pool.resized for pool in self.capacity)

    def counts(self) -> tuple[Counts, dict[str, Counts]]:
        total = Counts()
        per_cluster: dict[str, Counts] = {}
        for change in self.changes:
            what = change.action if change.obj.synced else "templates"
            for bucket in (total, per_cluster.setdefault(change.obj.cluster, Counts())):
                setattr(bucket, what, getattr(bucket, what) + 1)
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
                                synced=c.obj.synced,
                                fields=[FieldJson(path=f.path, op=f.op, old=f.old, new=f.new)  # type: ignore[arg-type]
                                        for f in c.fields]) for c in self.changes],
            pools=[PoolJson(cluster=p.cluster, pool=p.pool, product=p.product,
                            before=PoolSizeJson(gpus=p.capacity_before, limit=p.limit_before,
                                                guaranteed=p.allocated_before) if p.capacity_before else None,
                            after=PoolSizeJson(gpus=p.capacity_after, limit=p.limit_after,
                                               guaranteed=p.allocated_after) if p.capacity_after else None,
                            formerly=p.renamed_from or None)
                   for p in self.capacity],
            capacity=[CapacityJson(cluster=r.cluster, pool=r.pool, team=r.team, before=share(r.before),
                                   after=share(r.after)) for p in self.capacity for r in p.rows],
            risks=[RiskJson(severity=r.severity, rule=r.rule, message=r.message,  # type: ignore[arg-type]
                            clusters=list(r.clusters))
                   for r in self.risks], notes=self.notes)


# --- text ------------------------------------------------------------------------------------------

def unified(change: Change) -> list[str]:
    """A unified diff of the object's YAML (generated-file headers left out)."""
    def lines(text: str | None) -> list[str]:
        return [line for line in (text or "").splitlines() if not line.startswith("# ")]
    old, new = change.before, change.after
    return unified_lines(lines(old.text if old else None), lines(new.text if new else None),
                         old.path if old else "/dev/null", new.path if new else "/dev/null")


_HUNK = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_lines(a: list[str], b: list[str], fromfile: str, tofile: str, context: int = 3) -> list[str]:
    """difflib's unified diff of two lists of lines, with the lines both share at the start and at
    the end set aside first (as git's xdiff does): a 5,000-line ConfigMap with one value changed is
    matched on the few lines around it, not all of them (difflib's matcher over whole texts was
    most of a preview's time at 50 ConfigMaps like that). Hunk headers count from the top of the
    whole text. Where the matcher, given the cut text, put a change next to the cut (a line
    inserted beside its twin can be aligned on either), the cut hunk would lack context: the
    whole texts are diffed instead."""
    same_head, same_tail = common_ends(a, b)
    start, cut = max(0, same_head - context), max(0, same_tail - context)
    out = list(difflib.unified_diff(a[start:len(a) - cut], b[start:len(b) - cut], fromfile=fromfile,
                                    tofile=tofile, lineterm="", n=context))
    if (start or cut) and not _full_context(out, context, start == 0, cut == 0):
        return list(difflib.unified_diff(a, b, fromfile=fromfile, tofile=tofile, lineterm="", n=context))
    if not start:
        return out

    def shifted(m: re.Match[str]) -> str:
        return f"@@ -{int(m[1]) + start}{m[2] or ''} +{int(m[3]) + start}{m[4] or ''} @@"
    return [_HUNK.sub(shifted, line, count=1) if line.startswith("@@ ") else line for line in out]


def common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many lines the two share at the start, and then at the end (never overlapping)."""
    head, shortest = 0, min(len(a), len(b))
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def _full_context(diff: list[str], context: int, at_top: bool, at_end: bool) -> bool:
    """Whether the first hunk opens and the last closes with `context` unchanged lines (or at the
    top or end of the text): GNU patch takes a hunk with fewer as one anchored there."""
    first = next((i for i, line in enumerate(diff) if line.startswith("@@ ")), None)
    if first is None:
        return True
    opening = next((i for i, line in enumerate(diff[first + 1:]) if not line.startswith(" ")), 0)
    closing = next((i for i, line in enumerate(reversed(diff)) if not line.startswith(" ")), 0)
    return (at_top or opening >= context) and (at_end or closing >= context)


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
    out = [f"fleetgen diff {result.before} -> {result.after}", *(f"note: {n}" for n in result.notes)]
    templates = [c for c in result.changes if not c.obj.synced]
    for heading, changes in (("", [c for c in result.changes if c.obj.synced]),
                             (TEMPLATES_HEADING, templates)):
        out += [heading] if heading and changes else []
        for change in changes:
            mark, fg = marks[change.action]
            out.append(paint(f"{mark} {change.obj.cluster}: {change.obj.label}", fg))
            for f in change.fields[:MAX_FIELDS]:
                out.append("    {}: {} -> {}".format(f.path, *shown_pair(f.old, f.new)))
    for pool in result.capacity:
        if pool.resized:
            out.append(paint(f"~ {pool.cluster}: pool {pool.pool} {pool.capacity_before} -> {pool.capacity_after} "
                             f"GPUs (quotas may total {pool.limit_before} -> {pool.limit_after})", "yellow"))
    out += capacity_table(result.capacity)
    for risk in result.risks:
        out.append(paint(f"! {risk.severity}: {risk.message}", "red" if risk.severity == "high" else "yellow"))
    resized = sum(1 for pool in result.capacity if pool.resized)
    out.append(f"{total.add} to add, {total.change} to change, {total.destroy} to destroy"
               + (f", {resized} pool(s) resized" if resized else "") + templates_note(total))
    return "\n".join(out) + "\n"


TEMPLATES_HEADING = "job templates (no engine syncs them; jobs are created from them):"


def templates_note(total: Counts) -> str:
    """The summary's word on job templates, kept out of its counts of synced objects."""
    return f"; {total.templates} job template(s) not synced" if total.templates else ""


def capacity_table(capacity: list[PoolImpact]) -> list[str]:
    """The text format's GPU table: per pool whose teams' shares move, each team that changed
    (guaranteed, borrowable, lendable; before -> after)."""
    out = []
    for pool in capacity:
        rows = [[r.team, *(_moved(*r.moved(share)) for share in SHARES)] for r in pool.rows if r.changed]
        if rows:
            out.append(f"GPUs in {pool.cluster} / {pool.pool} ({pool.product}): {pool.capacity_after} in the pool, "
                       f"guaranteed {pool.allocated_before} -> {pool.allocated_after}")
            shares = table(["team", "guaranteed", "borrowable", "lendable"], rows)
            out += [f"    {line}" for line in shares.splitlines()]
    return out


def _moved(b: int, a: int) -> str:
    return str(a) if a == b else f"{b} -> {a}"


def short(value: Any, limit: int = 80) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_pair(old: Any, new: Any, limit: int = 80) -> tuple[str, str]:
    """A field's old and new value as a reviewer reads them in one line each. Two long or multi-line
    strings (a ConfigMap's JSON, a policy) cut at the same length showed the same start on both
    sides; they are shown from where they differ instead: for text, the first line that differs, with
    its number and how many more lines differ, from just before its first character that differs;
    where only line endings differ, those. The work is linear in the text (the equal head and tail
    are skipped)."""
    breaks = "\r\n"
    if not (isinstance(old, str) and isinstance(new, str)):
        return _alone(old, limit), _alone(new, limit)
    if len(old) <= limit and len(new) <= limit and not any(c in old + new for c in breaks):
        return short(old, limit), short(new, limit)
    a, b = old.splitlines(), new.splitlines()
    if a == b:
        return _endings(old), _endings(new)
    if not any(c in old + new for c in breaks):
        return _from_difference(old, new, limit), _from_difference(new, old, limit)
    head, tail = common_ends(a, b)

    def line(lines: list[str], others: list[str]) -> str:
        changed = lines[head:len(lines) - tail]
        if not changed:
            return f"line {head + 1}: (none)"
        other = others[head] if head < len(others) - tail else ""
        more = f" (+{len(changed) - 1} more lines)" if len(changed) > 1 else ""
        return f"line {head + 1}: {_from_difference(changed[0], other, limit)}{more}"
    return line(a, b), line(b, a)


def _alone(value: Any, limit: int) -> str:
    """A value with nothing to compare it to (the other side is absent or not text): text of several
    lines as its first line and how many more, so no line break reaches the output."""
    if isinstance(value, str) and "\n" in value:
        lines = value.splitlines() or [""]
        more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
        return f"{short(lines[0], limit)}{more}"
    return short(value, limit)


def _from_difference(text: str, other: str, limit: int) -> str:
    """`text` from 20 characters before where it first differs from `other`, at most `limit` of it;
    leading spaces kept, so an indentation change shows."""
    same = next((i for i, (x, y) in enumerate(zip(text, other, strict=False)) if x != y), min(len(text), len(other)))
    start = max(0, same - 20)
    return ("…" if start else "") + short(text[start:], limit)


def _endings(text: str) -> str:
    """What tells two texts with the same lines apart: their line endings and final newline."""
    ending = "CRLF" if "\r\n" in text else "CR" if "\r" in text else "LF"
    final = "a" if text.endswith(("\n", "\r")) else "no"
    return f"same lines, {ending} line endings, {final} final newline"
