"""Evaluate the CRDs' own `x-kubernetes-validations` (CEL) rules on compiled objects.

Schemas say what shape a field has; the CEL rules are what the API server enforces beyond
that (flavors must cover every resource of their group, topology levels must be unique, ...).
Rules are read from the upstream CRDs at run time, so they never drift from the release, and
evaluated as the API server does: schema defaults first, then every rule at every place in the
object its schema node applies to. Transition rules (`oldSelf`) only run on updates and are
skipped here.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from generator.cachedir import cache_dir
from generator.compile.manifest import Manifest
from generator.errors import Finding, UsageError
from generator.transport import ReadFailed, read_url
from generator.validate.findings import object_finding

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

KUEUE_MANIFESTS = "https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml"
CRD_DEADLINE = 60.0
"""Seconds a CRD download may take, whole (Kueue's manifests.yaml is about 3 MB)."""
MAX_CRD_BYTES = 64 << 20
"""A CRD download larger than this is refused (a release's manifests are a few MB)."""

Step = tuple[str, str | None]  # ("prop", name) | ("items", None) | ("map", None)


@dataclass(frozen=True)
class Rule:
    """One CEL rule and where in the object its schema node applies."""

    steps: tuple[Step, ...]
    source: str
    message: str
    program: Any


@dataclass(frozen=True)
class KindRules:
    """The rules and the structural schema (for defaults) of one kind and version."""

    schema: dict[str, Any]
    rules: tuple[Rule, ...]


def _collect(schema: dict[str, Any], steps: tuple[Step, ...], out: list[Rule]) -> None:
    import cel  # here, not above: the package loads its command line and prompt_toolkit (0.25 s)

    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule["rule"]
        if "oldSelf" in text:
            continue
        out.append(Rule(steps, text, rule.get("message") or f"failed rule: {text}", cel.compile(text)))
    for name, sub in (schema.get("properties") or {}).items():
        _collect(sub, steps + (("prop", name),), out)
    if isinstance(schema.get("items"), dict):
        _collect(schema["items"], steps + (("items", None),), out)
    if isinstance(schema.get("additionalProperties"), dict):
        _collect(schema["additionalProperties"], steps + (("map", None),), out)


def rules_from_crds(docs: list[dict[str, Any]]) -> dict[tuple[str, str], KindRules]:
    """Rules keyed by (apiVersion, kind) from CustomResourceDefinition documents."""
    out: dict[tuple[str, str], KindRules] = {}
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec["versions"]:
            schema = version.get("schema", {}).get("openAPIV3Schema", {})
            rules: list[Rule] = []
            _collect(schema, (), rules)
            out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = KindRules(schema, tuple(rules))
    return out


Rules = dict[tuple[str, str], KindRules]


@dataclass(frozen=True)
class CrdCatalog:
    """CRD rules per Kueue version; a local CRD folder serves every version."""

    by_version: dict[str, Rules]
    shared: Rules | None = None

    def rules(self, kueue_version: str) -> Rules:
        """The rules of the CRDs released with `kueue_version`."""
        return self.shared if self.shared is not None else self.by_version[kueue_version]


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=_Loader) if d]


def load_crds(location: str | None, versions: list[str], *, offline: bool) -> CrdCatalog | None:
    """Rules from a CRD folder, or from the Kueue release manifests of each version (cached).

    Returns None when no CRDs are at hand offline, so the caller can say the check was skipped.
    """
    if location and not location.startswith(("http://", "https://")):
        folder = Path(location)
        if not folder.is_dir():
            raise UsageError(f"CRD location {location} is not a folder")
        docs = [d for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
                for d in _documents(path.read_text(encoding="utf-8"))]
        return CrdCatalog({}, rules_from_crds(docs))
    by_version: dict[str, Rules] = {}
    for version in sorted(set(versions)):
        url = (location or KUEUE_MANIFESTS).format(version=version)
        cached = cache_dir() / "crds" / hashlib.sha256(url.encode()).hexdigest()
        kept = _cached_crds(cached)
        if kept is None:
            if offline:
                return None
            text, kept = _download_crds(url)
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(text, encoding="utf-8")  # only once it is CRDs: a bad answer is not kept
        by_version[version] = rules_from_crds(kept)
    return CrdCatalog(by_version)


def _crds_in(text: str) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions among the YAML documents of `text`, each of the shape
    `rules_from_crds` reads; ValueError if one is not, or there are none."""
    crds = [d for d in _documents(text) if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise ValueError("no CustomResourceDefinition in it")
    for crd in crds:
        spec = crd.get("spec")
        if not (isinstance(spec, dict) and isinstance(spec.get("group"), str)
                and isinstance(spec.get("names"), dict) and isinstance(spec["names"].get("kind"), str)
                and isinstance(spec.get("versions"), list)
                and all(isinstance(v, dict) and isinstance(v.get("name"), str)
                        and isinstance(v.get("schema", {}), dict) for v in spec["versions"])):
            name = crd.get("metadata", {}).get("name") if isinstance(crd.get("metadata"), dict) else None
            raise ValueError(f"CustomResourceDefinition {name or '(no name)'} lacks spec.group, spec.names.kind "
                             "or spec.versions[].name")
    return crds


def _cached_crds(cached: Path) -> list[dict[str, Any]] | None:
    """The CRDs of an earlier download, or None to download again (absent, or not what was kept)."""
    try:
        return _crds_in(cached.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None


def _download_crds(url: str) -> tuple[str, list[dict[str, Any]]]:
    """The text at `url` and its CRDs, read within CRD_DEADLINE and MAX_CRD_BYTES, or UsageError
    naming the URL and what went wrong."""
    fix = "pass --crd-location DIR (a folder of the release's CRDs) or a URL that serves them"
    try:
        text = read_url(url, CRD_DEADLINE, MAX_CRD_BYTES).decode("utf-8")
        return text, _crds_in(text)
    except ReadFailed as exc:
        raise UsageError(f"cannot fetch CRDs {exc.url}: {exc.why}; {fix}") from None
    except UnicodeDecodeError:
        raise UsageError(f"CRDs {url} are not text (not UTF-8); {fix}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"CRDs {url} are not YAML{where} ({getattr(exc, 'problem', None) or exc}); {fix}") from None
    except ValueError as exc:
        raise UsageError(f"CRDs {url}: {exc}; {fix}") from None


def with_defaults(schema: dict[str, Any], value: Any) -> Any:
    """`value` with the schema's `default`s filled in, as the API server does before CEL."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = dict(value)
        for name, sub in props.items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
        for name, sub in props.items():
            if name in out:
                out[name] = with_defaults(sub, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name in out:
                if name not in props:
                    out[name] = with_defaults(extra, out[name])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [with_defaults(schema["items"], item) for item in value]
    return value


def _instances(value: Any, steps: tuple[Step, ...], path: str) -> Iterator[tuple[str, Any]]:
    if not steps:
        yield path, value
        return
    (kind, name), rest = steps[0], steps[1:]
    if kind == "prop" and isinstance(value, dict) and name in value:
        yield from _instances(value[name], rest, f"{path}.{name}" if path else str(name))
    elif kind == "items" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _instances(item, rest, f"{path}[{i}]")
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            yield from _instances(item, rest, f"{path}[{key}]")


def validate_cel(manifests: list[Manifest], rules: Rules) -> list[Finding]:
    """Findings for every CEL rule an object breaks (or on which evaluation fails)."""
    findings: list[Finding] = []
    for m in manifests:
        kind_rules = rules.get((m.api_version, m.kind))
        if kind_rules is None or not kind_rules.rules:
            continue
        body = with_defaults(kind_rules.schema, m.body)
        for rule in kind_rules.rules:
            for path, value in _instances(body, rule.steps, ""):
                try:
                    ok = rule.program.execute({"self": value})
                except Exception as exc:  # noqa: BLE001 - the CEL runtime raises plain errors
                    findings.append(object_finding(m, path, f"CEL rule could not be evaluated ({exc}): "
                                                   f"{rule.source}", "check the field's value", "cel"))
                    continue
                if ok is not True:
                    findings.append(object_finding(m, path, rule.message,
                                                   f"the CRD requires: {' '.join(rule.source.split())}", "cel"))
    return findings
