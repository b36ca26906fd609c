"""The pull-request comment: Markdown parts, each within a size budget, in one linear pass.

A reviewer reads the verdict, the risks and the capacity first, then the changes per cluster
and team, each object collapsed with its field changes and (when the budget allows) its diff.
The report is a stream of blocks; a block never exceeds what one part can hold (a long table is
cut into tables that repeat the header), and blocks are packed into parts in order. A cluster or
team section that continues in the next part is reopened there ("continued"), so every part
closes every `<details>` it opens. Every part names the head commit and when it was made.

Cost is linear in the size of the report: blocks are built once, and a part is the
concatenation of its blocks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from generator.diff.impact import SHARES, CapacityRow, PoolImpact
from generator.diff.objects import Change
from generator.diff.report import DiffResult, shown_pair, templates_note, unified

DEFAULT_BUDGET = 60_000
"""Characters per part: under GitHub's 65,536 with room for the workflow's marker line."""
MIN_BUDGET = 4_000
MAX_FIELDS = 40
TOP_RISKS = 60
"""Risks listed before the capacity section (most severe first); the rest follow it."""
CHART_MAX_TEAMS = 12
"""Above this many teams a pool gets no chart (50 bars are unreadable) and its table lists the
teams that change only."""
_HEADER_RESERVE = 400
"""The part line and the reopened cluster and team sections at the top of a part."""
_CLOSE_RESERVE = 40


# --- escaping --------------------------------------------------------------------------------------

def md(value: object) -> str:
    """Inline Markdown-safe text: no table breaks, code spans, HTML or line breaks from data."""
    text = str(value)
    for char, repl in (("\\", "\\\\"), ("|", "\\|"), ("`", "\\`"), ("<", "&lt;"), (">", "&gt;"),
                       ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        text = text.replace(char, repl)
    text = re.sub(r"[\r\n\u2028\u2029]+", " ", text)
    # GitHub links `@name` (notifying that user or team) and `#123` / `GH-123` (cross-referencing
    # an issue) in comment text: a zero-width space, written as an entity, breaks both and reads the same.
    return _REFERENCE.sub(lambda m: f"{m.group(1)}&#8203;", text)


_REFERENCE = re.compile(r"(@|#|GH-)(?=[A-Za-z0-9])", re.IGNORECASE)


def fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so data cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# --- blocks ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    """A piece of the comment, placed whole in one part, inside `section` (cluster, team) if set."""

    text: str
    section: tuple[str, str] | None = None


@dataclass(frozen=True)
class Stamp:
    """What every part says about where it comes from."""

    head: str = ""
    """Head commit of the pull request (empty outside one)."""
    time: str = ""
    """When the preview was made, UTC."""

    def line(self) -> str:
        parts = []
        if self.head:
            parts.append(f"head `{md(self.head[:12])}`")
        if self.time:
            parts.append(f"made {md(self.time)}")
        return ", ".join(parts)


def _verdict(result: DiffResult) -> str:
    if not result.changed:
        return "no changes"
    if not result.changes:
        return "GPU capacity changes (no object changes), review needed"
    if any(r.severity == "high" for r in result.risks):
        return "changes with high risks, review carefully"
    return "changes, review needed"


def _summary(result: DiffResult) -> Iterator[Block]:
    total, per = result.counts()
    yield Block(f"**{total.add} to add, {total.change} to change, {total.destroy} to destroy**"
                f"{md(templates_note(total))} ({md(result.before)} → {md(result.after)})\n\n"
                + "".join(f"> {md(note)}\n" for note in result.notes) + ("\n" if result.notes else ""))
    if per:
        templates = total.templates > 0  # a column only when some change is a job template
        rows = [f"| {md(name)} | {c.add} | {c.change} | {c.destroy} |" + (f" {c.templates} |" if templates else "")
                for name, c in per.items()]
        yield from _table("| cluster | add | change | destroy |" + (" job templates |" if templates else "")
                          + "\n|---|---:|---:|---:|" + ("---:|" if templates else ""), rows)
        yield Block("\n")


def _risks(result: DiffResult) -> Iterator[Block]:
    if not result.risks:
        yield Block("#### Risks\nNone found.\n\n")
        return
    yield Block(f"#### Risks ({len(result.risks)})\n")
    for risk in result.risks[:TOP_RISKS]:
        yield Block(f"- **{risk.severity}** `{risk.rule}`: {md(risk.message)}\n")
    if len(result.risks) > TOP_RISKS:
        yield Block(f"- … and {len(result.risks) - TOP_RISKS} more, after the GPU capacity\n")
    yield Block("\n")


def _more_risks(result: DiffResult) -> Iterator[Block]:
    if len(result.risks) <= TOP_RISKS:
        return
    yield Block(f"#### More risks ({len(result.risks) - TOP_RISKS})\n")
    for risk in result.risks[TOP_RISKS:]:
        yield Block(f"- **{risk.severity}** `{risk.rule}`: {md(risk.message)}\n")
    yield Block("\n")


def _share(row: CapacityRow, attr: str) -> str:
    b, a = row.moved(attr)
    return str(a) if a == b else f"{b} → **{a}**"


def _chart(pool: PoolImpact) -> str:
    """Guaranteed GPUs per team: bars after, a line before (xychart-beta draws two bar series on
    top of each other). None for an empty pool (`x-axis []` does not parse) or too many teams."""
    rows = pool.rows
    if not rows or len(rows) > CHART_MAX_TEAMS:
        return ""
    top = max([pool.capacity_after, pool.capacity_before, 1, *[r.before.guaranteed for r in rows if r.before],
               *[r.after.guaranteed for r in rows if r.after]])
    names = ", ".join(f'"{r.team}"' for r in rows)  # team names are DNS labels: nothing to escape
    after = ", ".join(str(r.after.guaranteed if r.after else 0) for r in rows)
    before = ", ".join(str(r.before.guaranteed if r.before else 0) for r in rows)
    return ("```mermaid\nxychart-beta\n"
            f'  title "{pool.cluster} / {pool.pool}: guaranteed GPUs, bars after, line before"\n'
            f"  x-axis [{names}]\n  y-axis \"GPUs\" 0 --> {top}\n  bar [{after}]\n  line [{before}]\n```\n\n")


def _capacity(result: DiffResult) -> Iterator[Block]:
    if not result.capacity:
        if not result.has_fleets:
            yield Block("_No capacity table: one side is a rendered tree, not a fleet repository._\n\n")
        return
    yield Block("#### GPU capacity\n")
    for pool in result.capacity:
        size = (f"{pool.capacity_after} GPUs" if pool.capacity_before == pool.capacity_after
                else f"**{pool.capacity_before} → {pool.capacity_after} GPUs**")
        renamed = f" (renamed from {md(pool.renamed_from)})" if pool.renamed_from else ""
        head = (f"\n**{md(pool.cluster)} / {md(pool.pool)}**{renamed} ({md(pool.product)}): {size}, guaranteed "
                f"{pool.allocated_before} → {pool.allocated_after}, held by no team {pool.unallocated_before} → "
                f"{pool.unallocated_after}\n\n")
        if not pool.rows:
            yield Block(head + "No team has a quota in this pool.\n")
            continue
        yield Block(head)
        shown = pool.rows if len(pool.rows) <= CHART_MAX_TEAMS else [r for r in pool.rows if r.changed]
        rows = [f"| {md(r.team)}{' **(changed)**' if r.changed else ''} | "
                + " | ".join(_share(r, share) for share in SHARES) + " |" for r in shown]
        if rows:
            yield from _table("| team | guaranteed | borrowable | lendable |\n|---|---|---|---|", rows)
        if len(shown) < len(pool.rows):
            yield Block(f"\n_{len(pool.rows) - len(shown)} other teams in this pool: unchanged._\n")
        chart = _chart(pool)
        yield Block("\n" + chart if chart else "\n")


def _table(header: str, rows: list[str], chunk: int = 200) -> Iterator[Block]:
    """A table as blocks of at most `chunk` rows, each repeating the header (a part may end between)."""
    for first in range(0, len(rows), chunk):
        yield Block(header + "\n" + "\n".join(rows[first:first + chunk]) + "\n")


@dataclass
class _Entry:
    change: Change
    fields: str
    diff: str
    keep_diff: bool = True
    section: tuple[str, str] = field(default=("", ""))

    def text(self) -> str:
        # Emoji without a variation selector (U+FE0F): output escapes it as the invisible character it is.
        marks = {"add": "➕", "change": "📝", "destroy": "➖"}
        label = md(self.change.obj.label) + ("" if self.change.obj.synced else " (job template, not synced)")
        body = f"<details><summary>{marks[self.change.action]} {label}</summary>\n\n{self.fields}"
        if self.diff and self.keep_diff:
            body += self.diff
        elif self.diff:
            body += "_Diff left out to keep the comment within its size budget; see the full diff artifact._\n"
        return body + "\n</details>\n"


def _entries(result: DiffResult, budget: int) -> list[_Entry]:
    out = []
    for change in result.changes:
        lines = ["- **{}**: {} → {}".format(md(f.path), *map(md, shown_pair(f.old, f.new)))
                 for f in change.fields[:MAX_FIELDS]]
        if len(change.fields) > MAX_FIELDS:
            lines.append(f"- … {len(change.fields) - MAX_FIELDS} more fields (see the full diff)")
        diff_text = "\n".join(unified(change))
        mark = fence(diff_text)
        entry = _Entry(change, "\n".join(lines) + ("\n\n" if lines else ""),
                       f"{mark}diff\n{diff_text}\n{mark}\n" if diff_text else "",
                       section=(change.obj.cluster, change.obj.team or "(shared)"))
        room = budget - _HEADER_RESERVE - _CLOSE_RESERVE
        if len(entry.text()) > room:
            entry.keep_diff = False
        while len(entry.text()) > room and entry.fields.count("\n- ") > 1:  # pathological: halve the field list
            kept = entry.fields.rstrip("\n").split("\n")
            entry.fields = "\n".join(kept[: len(kept) // 2]) + "\n- … more fields (see the full diff)\n\n"
        out.append(entry)
    return out


def _changes(result: DiffResult, budget: int, one_part: int) -> Iterator[Block]:
    """Object entries; their diffs kept, largest dropped first, while everything fits `one_part`."""
    entries = _entries(result, budget)
    if not entries:
        return
    total = sum(len(e.text()) for e in entries)
    for entry in sorted(entries, key=lambda e: -len(e.diff)):
        if total <= one_part:
            break
        if entry.keep_diff and entry.diff:
            before = len(entry.text())
            entry.keep_diff = False
            total -= before - len(entry.text())
    yield Block("#### Changes\n\n")
    for entry in entries:
        yield Block(entry.text(), entry.section)


def blocks(result: DiffResult, budget: int) -> list[Block]:
    """Every block of the report, in reading order."""
    head = [*_summary(result), *_risks(result), *_capacity(result), *_more_risks(result)]
    used = sum(len(b.text) for b in head)
    return [*head, *_changes(result, budget, budget - _HEADER_RESERVE - _CLOSE_RESERVE - used - 200)]


# --- packing ---------------------------------------------------------------------------------------

def _open(section: tuple[str, str], continued: bool) -> str:
    more = " (continued)" if continued else ""
    return (f"<details><summary><b>cluster {md(section[0])}</b>{more}</summary>\n\n"
            f"<details><summary>team {md(section[1])}{more}</summary>\n\n")


def _reopen_team(section: tuple[str, str], continued: bool) -> str:
    return f"<details><summary>team {md(section[1])}{' (continued)' if continued else ''}</summary>\n\n"


_CLOSE_TEAM = "</details>\n"
_CLOSE_BOTH = "</details>\n</details>\n"


def pack(items: list[Block], budget: int) -> list[str]:
    """Bodies of the parts, each within `budget - _HEADER_RESERVE`, in one pass over the blocks."""
    bodies: list[list[str]] = [[]]
    sizes = [0]
    limit = budget - _HEADER_RESERVE
    section: tuple[str, str] | None = None

    def add(text: str) -> None:
        bodies[-1].append(text)
        sizes[-1] += len(text)

    for block in items:
        transition = ""
        if block.section != section:
            if section is not None and block.section is not None and block.section[0] == section[0]:
                transition = _CLOSE_TEAM + _reopen_team(block.section, False)
            else:
                transition = (_CLOSE_BOTH if section is not None else "") + (
                    _open(block.section, False) if block.section is not None else "")
        closing = _CLOSE_BOTH if block.section is not None else ""
        if sizes[-1] and sizes[-1] + len(transition) + len(block.text) + len(closing) > limit:
            if section is not None:
                add(_CLOSE_BOTH)
            bodies.append([])
            sizes.append(0)
            if block.section is not None:
                add(_open(block.section, block.section == section))
        elif transition:
            add(transition)
        section = block.section
        add(block.text)
    if section is not None:
        add(_CLOSE_BOTH)
    return ["".join(b) for b in bodies]


def markdown_parts(result: DiffResult, budget: int = DEFAULT_BUDGET, stamp: Stamp | None = None) -> list[str]:
    """The comment parts, every one at most `budget` characters."""
    if budget < MIN_BUDGET:
        raise ValueError(f"a comment budget under {MIN_BUDGET} characters cannot hold a part")
    stamp = stamp or Stamp()
    bodies = pack(blocks(result, budget), budget)
    out = []
    for i, body in enumerate(bodies, 1):
        meta = ", ".join(x for x in (f"part {i}/{len(bodies)}" if len(bodies) > 1 else "", stamp.line()) if x)
        if i == 1:
            out.append(f"### fleetgen diff: {_verdict(result)}\n\n{'_' + meta + '_' if meta else ''}\n\n{body}")
        else:
            out.append(f"**fleetgen diff, part {i}/{len(bodies)}** (continued; {stamp.line() or 'same run'})"
                       f"\n\n{body}")
    return out


def error_comment(message: str, stamp: Stamp | None = None, budget: int = DEFAULT_BUDGET) -> str:
    """The comment when the head's fleet does not load: what is wrong, first findings first."""
    where = (stamp or Stamp()).line()
    text = message if len(message) < budget - 1000 else message[: budget - 1000] + "\n… (see the workflow log)"
    mark = fence(text)
    return ("### fleetgen diff: the fleet in this pull request does not load\n\n"
            f"{'_' + where + '_' if where else ''}\n\n"
            "Nothing was compared. Fix these and push again (`fleetgen render` shows the same):\n\n"
            f"{mark}text\n{text}\n{mark}\n")
