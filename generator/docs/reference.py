"""The docs site's reference pages, generated from the code: config keys (the models' field docstrings),
alerts (the rule builders), the command line (click's own help), the diff JSON schema, the diff's risk
rules and the Python API.

A test fails when a page differs from what the code says, so the manual can never describe keys,
options or alerts that do not exist or miss ones that do.
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from generator import repofiles
from generator.config.cluster import ClusterConfig
from generator.config.team import TeamConfig
from generator.config.types import TYPE_NAMES
from generator.kinds import KINDS


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        for meta in args[1:]:
            for item in [meta, *getattr(meta, "metadata", [])]:
                pattern = getattr(item, "pattern", None)
                if pattern in TYPE_NAMES:
                    return TYPE_NAMES[pattern]
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(names))
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[1])}"
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(annotation, str(annotation))


def _field_type(field: Any) -> str:
    for item in field.metadata:
        pattern = getattr(item, "pattern", None)
        if pattern in TYPE_NAMES:
            return TYPE_NAMES[pattern]
    if any(getattr(item, "json_schema", None) for item in field.metadata):
        return "quantity"
    return _type_name(field.annotation)


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "optional"
    if isinstance(value, BaseModel):
        return "see below"
    if value in ({}, []):
        return "empty"
    return f"`{value}`"


MAP_KEYS = {"teamLimits": ".<team>"}
"""What the keys of a map of models name, where it is not a pool."""


def _profile_kind() -> tuple[str, str]:
    """A profile's `kind`: its model says only "a string" (config sits below the registry of kinds)."""
    return " \\| ".join(f"`{k.name}`" for k in KINDS), "\n".join(k.doc for k in KINDS)


REGISTRY_FIELDS: dict[str, typing.Callable[[], tuple[str, str]]] = {"jobProfiles[].kind": _profile_kind}
"""Keys whose type and meaning a registry holds: (type, meaning) of each."""


def _rows(model: type[BaseModel], prefix: str, seen: set[str]) -> list[str]:
    rows = []
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        kind, doc = REGISTRY_FIELDS[key]() if key in REGISTRY_FIELDS else (_field_type(field), field.description or "")
        doc = " ".join(doc.split()).replace("|", "\\|")
        rows.append(f"| `{key}` | {kind} | {_default(field)} | {doc} |")
        for sub in _models(field.annotation):
            suffix = "[]" if typing.get_origin(field.annotation) is list or "list of" in _type_name(field.annotation) \
                else ""
            if typing.get_origin(field.annotation) is dict:
                value = typing.get_args(field.annotation)[1]
                # Quotas are keyed by pool, a team's first by cluster; the CPU pool's limits by team.
                suffix = MAP_KEYS.get(field.alias or name) or (".<cluster>.<pool>" if typing.get_origin(value) is dict
                                                               else ".<pool>")
            nested.append((f"{key}{suffix}.", sub))
    for sub_prefix, sub in nested:
        if sub_prefix not in seen:
            seen.add(sub_prefix)
            rows.extend(_rows(sub, sub_prefix, seen))
    return rows


def reference() -> str:
    """The config keys of both files as Markdown tables."""
    parts = []
    for title, model, where in (("Cluster file", ClusterConfig, "clusters/<name>.yaml"),
                                ("Team file", TeamConfig, "teams/<name>.yaml")):
        parts.append(f"#### {title}: `{where}`\n")
        parts.append("| key | type | default | meaning |\n|---|---|---|---|")
        parts.extend(_rows(model, "", set()))
        parts.append("")
    return "\n".join(parts)


def alerts_reference() -> str:
    """Markdown table of every alert fleetgen renders (Prometheus and Loki), from the rule builders."""
    from generator.compile.rules import loki_groups, prometheus_groups

    rows = ["| alert | source | severity | reconciler action | fires when |", "|---|---|---|---|---|"]
    rules = [("Prometheus", r) for _, group in prometheus_groups() for r in group]
    rules += [("Loki", r) for r in loki_groups()[0]["rules"]]
    for source, rule in rules:
        if "alert" not in rule:
            continue
        expr = rule["expr"].replace("|", "\\|").replace("`", "'")
        wait = f" for {rule['for']}" if "for" in rule else ""
        if "keep_firing_for" in rule:
            wait += f", keeps firing {rule['keep_firing_for']} after"
        rows.append(f"| `{rule['alert']}` | {source} | {rule['labels']['severity']} | "
                    f"{rule['labels']['fleetgen_action']} | `{expr}`{wait} |")
    return "\n".join(rows) + "\n"


PAGES_DIR = "docs/reference"


def _page(title: str, intro: str, body: str) -> str:
    return (f"<!-- generated by `python -m generator.docs.reference --write`: do not edit -->\n# {title}\n\n"
            f"{intro}\n\n{body.rstrip()}\n")


def cli_reference() -> str:
    """Every command's --help, as click prints it at a fixed width (so the page is the same anywhere)."""
    import click

    from generator.cli import cli

    parts: list[str] = []

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        # The command's own context settings (-h), as a real invocation has them: click caches each
        # command's help option on first use, so a context without them would make the page depend on order.
        settings = {**command.context_settings, "terminal_width": 100, "max_content_width": 100}
        ctx = click.Context(command, info_name=path[-1], parent=parent, **settings)
        parts.append(f"## `{' '.join(path)}`\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], ctx)

    walk(cli, ["fleetgen"], None)
    return "\n".join(parts)


def python_reference() -> str:
    """The jobs SDK's public names (`generator.jobs.__all__`): signatures and docstrings."""
    import inspect

    import generator.jobs as sdk

    parts = []
    for name in sdk.__all__:
        obj = getattr(sdk, name)
        kind = "class" if inspect.isclass(obj) else "function"
        try:
            signature = str(inspect.signature(obj)) if kind == "function" else ""
        except (TypeError, ValueError):
            signature = ""
        parts.append(f"## {kind} `{name}{signature}`\n\n{inspect.cleandoc(obj.__doc__ or '')}\n")
        if inspect.isclass(obj):
            for attr, member in sorted(vars(obj).items()):
                if attr.startswith("_") or not (inspect.isfunction(member)
                                                or isinstance(member, (property, classmethod, staticmethod))):
                    continue
                func: Any = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                sig = "" if isinstance(member, property) else str(inspect.signature(func))
                doc = inspect.cleandoc(func.__doc__ or "").replace("\n", " ")
                parts.append(f"- `{name}.{attr}{sig}`: {doc}" if doc else f"- `{name}.{attr}{sig}`")
            parts.append("")
    return "\n".join(parts)


def diff_json_reference() -> str:
    """`fleetgen diff --format json`: its JSON Schema, from the report's model."""
    from generator.jsonschemas import schema_text

    return f"```json\n{schema_text('diff').rstrip()}\n```\n"


def risks_reference() -> str:
    """The diff's risk rules: the severity rule first, then every rule (`generator.diff.risks.RULEBOOK`)."""
    from generator.diff.risks import RULEBOOK, SEVERITIES

    parts = ["## Severities\n", *(f"- **{name}**: {text}" for name, text in SEVERITIES.items()),
             "\nA routine pull request (a quota raise, a new member, a new team) has no high line. One cause is one "
             "line: a team's arrival is one `team-added` line, not one per object it adds, and a line that holds "
             "on several clusters names them all once.\n", "## Rules\n", "| rule | severity | fires when |",
             "|---|---|---|"]
    parts += [f"| `{name}` | {rule.severity} | {rule.cause.replace('|', chr(92) + '|')} |"
              for name, rule in sorted(RULEBOOK.items())]
    return "\n".join(parts) + "\n"


def job_kinds_reference() -> str:
    """Every job kind a profile may be (`generator.kinds.KINDS`): its object, operator, Kueue integrations and
    the profile fields it refuses, with why."""
    parts = ["| kind | object | operator | Kueue integrations | SkyPilot task |", "|---|---|---|---|---|"]
    for kind in KINDS:
        operator = f"{kind.operator.title} (`operators.{kind.operator.key}`)" if kind.operator else "none (built in)"
        parts.append(f"| `{kind.name}` | {kind.kind} (`{kind.api_version}`) | {operator} | "
                     f"{', '.join(f'`{f}`' for f in kind.frameworks)} | {'yes' if kind.skypilot else 'no'} |")
    for kind in KINDS:
        parts.append(f"\n## `{kind.name}`\n\n{' '.join(kind.doc.split())}\n")
        refused = [f"`{key}`" for _, key in kind.refused.fields] if kind.refused else []
        if refused:
            parts.append(f"- Refuses {', '.join(refused)}: {kind.refused.why if kind.refused else ''}.")
        if kind.leader_refused:
            parts.append(f"- Refuses `leader`: {kind.leader_refused[0].format(what=kind.what)}.")
        if not kind.runs_program:
            parts.append("- Runs no program of the profile's: `command` is left out.")
        if kind.reserved_env:
            parts.append(f"- Refuses in `env` what is set {kind.reserved_by}: "
                         f"{', '.join(f'`{v}`' for v in sorted(kind.reserved_env))}.")
        if kind.cpu_only:
            parts.append("- May run on the cluster's `cpuPool` (a CPU-only server).")
    return "\n".join(parts) + "\n"


def member_rights_reference() -> str:
    """What team members may do beyond `edit`, and what they may not (`generator.compile.member_rights`)."""
    from generator.compile.member_rights import RIGHTS, WITHHELD

    who = {"namespace": "the team's members, in its namespaces (`fleetgen-team-member`)",
           "cluster": "the team's members, cluster-wide (`fleetgen-members-<team>`)",
           "everyone": "every authenticated user (`fleetgen-priority-reader`)"}
    parts = ["Every member also holds Kubernetes' own `edit` role in each of the team's namespaces (pods, logs, "
             "exec, Services, ConfigMaps, Secrets, batch Jobs, Deployments).\n", "## Granted\n",
             "| right | who | where | why |", "|---|---|---|---|"]
    for right in RIGHTS:
        group = right.api_group or "core"
        what = f"{', '.join(right.verbs)} `{'`, `'.join(right.resources)}` ({group})"
        if right.names is not None:
            what += ", the team's own only"
        parts.append(f"| {what} | {who[right.scope]} | {right.when_text or 'every cluster'} | {right.why} |")
    parts += ["\n## Refused on purpose\n", "| right | why |", "|---|---|"]
    parts += [f"| {w.what} | {w.why} |" for w in WITHHELD]
    return "\n".join(parts) + "\n"


def releases_reference() -> str:
    """Every release a cluster may run (`generator/releases.yaml`): what it needs, where that is read, whether
    this repository builds and tests it, and what moving to it changes."""
    from generator import releases
    from generator.config.cluster import ClusterConfig
    from generator.versions import component

    parts = ["| component | release | needs | read in | here |", "|---|---|---|---|---|"]
    for name, rows in releases.table().items():
        default = component(name).version
        for row in rows.values():
            needs = ", ".join(f"{n} >= {v}" for n, v in row.requires) or "nothing listed"
            here = "built and run on the fleet twin" if row.tested else "cited only"
            if releases.key(row.version) == releases.key(default):
                here += "; the fleet default"
            parts.append(f"| {name} | {row.version} | {needs} | {'; '.join(row.sources)} | {here} |")
    parts.append("\n## What each release changes\n")
    parts += [f"- **{row.label}**: {' '.join(note.split())}" for rows in releases.table().values()
              for row in rows.values() for note in row.upgrade]
    field = ClusterConfig.model_fields["versions"].description or ""
    parts.append(f"\n## Pinning a release\n\n`kueue.version` pins Kueue; `versions` pins the others. "
                 f"{' '.join(field.split())}")
    return "\n".join(parts) + "\n"


def pages() -> dict[str, str]:
    """docs/reference/*.md, each generated whole from the code it describes."""
    return {
        f"{PAGES_DIR}/config.md": _page("Config keys", "Every key of the two hand-written files, from the models' "
                                        "field docstrings (`generator/config/`). Keys are camelCase; unknown keys "
                                        "are errors; types are strict (`gpus: \"8\"` is an error, not a silent "
                                        "conversion).", reference()),
        f"{PAGES_DIR}/alerts.md": _page("Alerts", "Every alert fleetgen renders, from the rule builders "
                                        "(`generator/compile/rules.py`).", alerts_reference()),
        f"{PAGES_DIR}/cli.md": _page("Command line", "Every command and option, as `fleetgen ... --help` prints "
                                     "it.", cli_reference()),
        f"{PAGES_DIR}/diff-json.md": _page("Diff JSON", "The schema of `fleetgen diff --format json` (also "
                                           "`schemas/diff.schema.json`).", diff_json_reference()),
        f"{PAGES_DIR}/risks.md": _page("Risk rules", "What the diff preview flags, and how severe "
                                       "(`generator/diff/risks.py`).", risks_reference()),
        f"{PAGES_DIR}/job-kinds.md": _page("Job kinds", "Every kind a job profile may be (`kind:` in team files), "
                                           "one module each under `generator/kinds/`, in the order of its "
                                           "registry.", job_kinds_reference()),
        f"{PAGES_DIR}/member-rights.md": _page("Member rights", "What a team's members may do on a cluster beyond "
                                               "`edit`, who gets each right, and what stays refused "
                                               "(`generator/compile/member_rights.py`).",
                                               member_rights_reference()),
        f"{PAGES_DIR}/releases.md": _page("Releases", "The platform releases a cluster may run and what each needs "
                                          "of the others (`generator/releases.yaml`): a pin outside this table, or a "
                                          "pair it rules out, fails the render at the pin's line.",
                                          releases_reference()),
        f"{PAGES_DIR}/python-api.md": _page("Python API", "The jobs SDK (`import generator.jobs`), from its "
                                            "docstrings.", python_reference()),
    }


def stale_pages(root: Path) -> list[str]:
    """Generated pages that differ from what the code says now."""
    return [rel for rel, text in pages().items()
            if not (root / rel).is_file() or (root / rel).read_text(encoding="utf-8") != text]


def main(argv: list[str]) -> int:
    root = Path.cwd()
    if argv == ["--write"]:
        for rel, text in pages().items():  # through the one door: never through a committed link
            repofiles.write_bytes(root, rel, text.encode("utf-8"))
        return 0
    if argv == ["--check"]:
        stale = stale_pages(root)
        for rel in stale:
            print(f"{rel} is out of date: run `python -m generator.docs.reference --write`", file=sys.stderr)
        return 1 if stale else 0
    print("usage: python -m generator.docs.reference --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
