"""Which checks run where: `render` runs what needs no network, `validate` runs everything.

1. config: done while loading (`generator.config`), before anything compiles.
2. schema: built-in kinds always (schemas ship with kubernetes-validate); custom kinds when the
   schema location is local, or, for `validate`, fetched and cached; kubeconform when on PATH.
3. Kueue: webhook rules always; CRD CEL rules when the CRDs are local or cached, or, for
   `validate`, fetched from the Kueue release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generator.compile.manifest import Manifest
from generator.config.fleet import Fleet
from generator.errors import Finding, UsageError
from generator.kinds import OPERATORS

if TYPE_CHECKING:
    from generator.validate.schemas import SchemaStore


@dataclass(frozen=True)
class Options:
    """Where schemas and CRDs come from and whether the network may be used."""

    schema_location: str | None = None
    crd_location: str | None = None
    network: bool = False
    kubeconform: bool = False
    complete: bool = False
    """`validate`: every check must run; a schema or CRD that cannot be had is a finding or an error."""


@dataclass
class Report:
    """Findings plus notes on checks that could not run (never silently skipped)."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)



OPERATOR_GROUPS = frozenset(group for operator in OPERATORS for group in operator.api_groups)
"""API groups of job templates whose CRDs come with an operator's chart (generator/kinds), not with the
schema catalog. Where no schema of theirs is at hand, their templates are
said unchecked instead of refused; the real operators, Kueue and the API server judge them in tests/test_ray.py,
tests/test_trainer.py and tests/test_lws.py."""


def _operator_templates_without_schema(manifests: list[Manifest], k8s_version: str,
                                       store: SchemaStore) -> tuple[list[Manifest], list[str]]:
    """`manifests` less the operator-kind templates no schema at hand covers, and those kinds."""
    kept, unchecked = [], set()
    for m in manifests:
        if not m.synced and m.api_version.split("/")[0] in OPERATOR_GROUPS \
                and store.validator(m.api_version, m.kind, k8s_version) is None:
            unchecked.add(f"{m.api_version} {m.kind}")
            continue
        kept.append(m)
    return kept, sorted(unchecked)

def _is_local(location: str | None) -> bool:
    return bool(location) and not str(location).startswith(("http://", "https://"))


def _crd_schema_lookup(rules: dict[tuple[str, str], Any] | None) -> Callable[[str, str], dict[str, Any] | None]:
    def lookup(api_version: str, kind: str) -> dict[str, Any] | None:
        found = rules.get((api_version, kind)) if rules else None
        return found.schema if found else None
    return lookup


def validate_compiled(fleet: Fleet, compiled: dict[str, list[Manifest]], options: Options,
                      extra: list[Manifest] | None = None) -> Report:
    """Run every check that `options` allows on the compiled objects of each cluster."""
    from generator.compile import platform_namespaces
    from generator.validate import cel, kubeconform, kueue_rules, limits, schemas, tenancy_rules

    report = Report()
    custom_schemas = options.complete or _is_local(options.schema_location)
    if not custom_schemas:
        report.notes.append("custom-resource schemas not checked (no local --schema-location); "
                            "`fleetgen validate` checks them")
    versions = sorted({fleet.clusters[name].config.kueue.version for name in compiled})
    crd_rules = cel.load_crds(options.crd_location, versions, offline=not options.network)
    if crd_rules is None and options.complete:
        raise UsageError("no CRDs at hand offline for the Kueue CEL rules: pass --crd-location DIR "
                         "or run once without --offline to cache them")
    if crd_rules is None:
        report.notes.append("Kueue CEL rules not checked (no local --crd-location and nothing cached); "
                            "`fleetgen validate` checks them")
    binary = kubeconform.available() if options.kubeconform else None
    if options.kubeconform and binary is None:
        report.notes.append("kubeconform not on PATH: skipped (the in-process schema check ran)")
    # kubeconform reads custom-resource schemas where our check does: the location given, else the
    # public catalog when the network may be used. Offline it never gets a remote location: it
    # would fetch from it (a dead host cost minutes of DNS timeouts); our own check, which reads
    # the cache, says which schemas are missing.
    location = options.schema_location or (schemas.DEFAULT_SCHEMA_LOCATION if options.network else None)
    remote = bool(location) and str(location).startswith(("http://", "https://"))
    kubeconform_location = location if options.network or not remote else None
    stores: dict[str, schemas.SchemaStore] = {}
    for name, everything in compiled.items():
        manifests = [m for m in everything if m.kubernetes]
        cfg = fleet.clusters[name].config
        rules = crd_rules.rules(cfg.kueue.version) if crd_rules is not None else None
        if cfg.kueue.version not in stores:
            stores[cfg.kueue.version] = schemas.SchemaStore(options.schema_location, offline=not options.network,
                                                            fallback=_crd_schema_lookup(rules))
        store = stores[cfg.kueue.version]
        by_schema, unchecked = _operator_templates_without_schema(manifests, cfg.kubernetes_version, store)
        if unchecked and custom_schemas:
            report.notes.append(f"{name}: job templates not checked against a schema, none at hand for "
                                f"{', '.join(unchecked)} (the operator's chart ships its CRDs: pass them with "
                                "--crd-location to check them)")
        report.findings += schemas.validate_schemas(by_schema, cfg.kubernetes_version, store,
                                                    builtin_only=not custom_schemas)
        report.findings += kueue_rules.validate_kueue(manifests)
        report.findings += limits.validate_limits(manifests)
        report.findings += tenancy_rules.validate_tenancy(
            cfg, {t.config.name: t.config for t in fleet.teams_in(name)}, manifests,
            platform_namespaces(fleet.clusters[name]))
        if rules is not None:
            report.findings += cel.validate_cel(manifests, rules)
        if binary:
            report.findings += kubeconform.run_kubeconform(binary, name, by_schema, cfg.kubernetes_version,
                                                           kubeconform_location, _crd_schema_lookup(rules))
    if extra and fleet.clusters:  # objects for the GitOps control plane: custom resources only, by schema
        any_version = fleet.clusters[sorted(fleet.clusters)[0]].config.kubernetes_version
        store = schemas.SchemaStore(options.schema_location, offline=not options.network)
        report.findings += schemas.validate_schemas(extra, any_version, store, builtin_only=not custom_schemas)
        if binary:
            from generator.compile.gitops import GITOPS

            report.findings += kubeconform.run_kubeconform(binary, GITOPS, extra, any_version, kubeconform_location)
    report.findings = sorted(set(report.findings))
    return report
