"""JSON-schema validation of compiled objects, like kubeconform but in process.

Built-in kinds use the strict schemas shipped by the `kubernetes-validate` package for the
cluster's Kubernetes version; custom resources use a schema location in kubeconform's catalog
layout `{group}/{kind}_{version}.json`: a local folder, or a URL template whose downloads are
cached on disk. Each schema is compiled once (jsonschema-rs) and reused for every object.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs

from generator.cachedir import cache_dir
from generator.compile.manifest import Manifest
from generator.errors import Finding, UsageError
from generator.kubeschemas import builtin_root, builtin_versions
from generator.transport import ReadFailed, read_url
from generator.validate.findings import object_finding

DEFAULT_SCHEMA_LOCATION = "https://raw.githubusercontent.com/datreeio/CRDs-catalog/main/{group}/{kind}_{version}.json"
_K8S_DEFS_ID = "https://kubernetes.io/api/_definitions.json"
SCHEMA_DEADLINE = 30.0
"""Seconds one schema download may take, whole."""
MAX_SCHEMA_BYTES = 16 << 20
"""A schema download larger than this is refused (the catalog's largest, ApplicationSet, is 2 MB)."""


def builtin_dir(k8s_version: str) -> Any:
    """kubernetes-validate's strict schema folder for a Kubernetes minor (UsageError if it has none)."""
    if k8s_version not in builtin_versions():
        raise UsageError(f"no built-in schemas for Kubernetes {k8s_version}; "
                         f"supported: {', '.join(builtin_versions())}")
    return builtin_root().joinpath(f"v{k8s_version}.0-local-strict")


@functools.cache
def _builtin_registry(k8s_version: str) -> jsonschema_rs.Registry:
    defs = json.loads(builtin_dir(k8s_version).joinpath("_definitions.json").read_text(encoding="utf-8"))
    return jsonschema_rs.Registry([(_K8S_DEFS_ID, defs)])


def is_builtin(api_version: str) -> bool:
    """Built-in API groups have no dot (core `v1`, `apps/v1`) or end in `.k8s.io` (not x-k8s.io)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def crd_json_schema(openapi: dict[str, Any], root: bool = True) -> dict[str, Any]:
    """A CRD's openAPIV3Schema as strict JSON Schema, the way kubeconform's catalog converts it.

    `x-kubernetes-int-or-string` gains oneOf string/integer, `nullable` admits null, and nested
    objects with declared properties refuse unknown keys (the root stays open, as in kubeconform).
    """
    out: dict[str, Any] = {}
    for key, value in openapi.items():
        if key == "properties":
            out[key] = {name: crd_json_schema(sub, False) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = crd_json_schema(value, False)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [crd_json_schema(sub, False) for sub in value]
        else:
            out[key] = value
    if openapi.get("x-kubernetes-int-or-string"):
        out["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    if openapi.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
    if not root and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class SchemaStore:
    """Compiled validators by (apiVersion, kind), loaded on first use.

    `fallback` gives the openAPIV3Schema from a CRD for a custom kind the schema location lacks
    (the catalog does not carry every version of every kind; the release CRDs do).
    """

    def __init__(self, location: str | None = None, *, offline: bool = False,
                 fetch: Callable[[str], bytes] | None = None,
                 fallback: Callable[[str, str], dict[str, Any] | None] | None = None) -> None:
        self.location = location or DEFAULT_SCHEMA_LOCATION
        self.offline = offline
        self._fetch = fetch or _download
        self._fallback = fallback
        self._validators: dict[tuple[str, str, str], jsonschema_rs.Validator | None] = {}

    @property
    def custom_is_remote(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    def validator(self, api_version: str, kind: str, k8s_version: str) -> jsonschema_rs.Validator | None:
        key = (api_version, kind, k8s_version if is_builtin(api_version) else "")
        if key not in self._validators:
            self._validators[key] = self._load(api_version, kind, k8s_version)
        return self._validators[key]

    def _load(self, api_version: str, kind: str, k8s_version: str) -> jsonschema_rs.Validator | None:
        group, _, version = api_version.rpartition("/")
        if is_builtin(api_version):
            short = group.split(".")[0]
            name = f"{kind.lower()}-{short}-{version}.json" if group else f"{kind.lower()}-{version}.json"
            ref = builtin_dir(k8s_version).joinpath(name)
            if not ref.is_file():
                return None
            return jsonschema_rs.validator_for(json.loads(ref.read_text(encoding="utf-8")),
                                               registry=_builtin_registry(k8s_version))
        found = self._custom(group, kind.lower(), version)
        if found is not None:
            return found
        crd_schema = self._fallback(api_version, kind) if self._fallback else None
        return None if crd_schema is None else jsonschema_rs.validator_for(crd_json_schema(crd_schema))

    def _custom(self, group: str, kind: str, version: str) -> jsonschema_rs.Validator | None:
        """The custom kind's schema compiled, or None where the location has none."""
        where = self.location.format(group=group, kind=kind, version=version,
                                     ResourceKind=kind, Group=group, ResourceAPIVersion=version)
        if not self.custom_is_remote:
            path = Path(where) if "{" in self.location else Path(self.location) / group / f"{kind}_{version}.json"
            return _compiled(path.read_text(encoding="utf-8"), str(path)) if path.is_file() else None
        cached = cache_dir() / "schemas" / hashlib.sha256(where.encode()).hexdigest()
        kept = _cached(cached)
        if kept is not None:
            return kept[0]
        if self.offline:
            return None
        try:
            data = self._fetch(where)
        except ReadFailed as exc:
            raise UsageError(f"cannot fetch schema {exc.url}: {exc.why}; pass --schema-location DIR for a local "
                             "schema folder") from None
        validator = _compiled(data.decode("utf-8", "replace"), where) if data else None  # a bad answer is not kept
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(data)  # a 404 too, empty, so an offline run knows the catalog lacks it
        return validator


def _cached(cached: Path) -> tuple[jsonschema_rs.Validator | None] | None:
    """A kept download compiled (None for a kept 404), or None to fetch again (absent, or not a schema)."""
    try:
        text = cached.read_text(encoding="utf-8")
        return (_compiled(text, str(cached)) if text else None,)
    except (OSError, UnicodeDecodeError, UsageError):
        return None


def _refuse(uri: str, /) -> jsonschema_rs.JSONType:
    raise ValueError(f"fleetgen does not fetch {uri}: a schema must hold its own definitions")


def _compiled(text: str, where: str) -> jsonschema_rs.Validator:
    """The schema `text` (from `where`) compiled, or UsageError naming it. A `$ref` outside it is
    refused, not fetched: jsonschema-rs would fetch it itself, with no deadline or size cap."""
    try:
        schema = json.loads(text)
        if not isinstance(schema, dict):
            raise ValueError(f"a JSON {type(schema).__name__}, not an object")
        return jsonschema_rs.validator_for(schema, retriever=_refuse)
    except RecursionError:
        problem = "JSON nested deeper than Python reads"
    except ValueError as exc:  # not JSON, or jsonschema-rs's ValidationError: not a schema
        problem = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    raise UsageError(f"schema {where} is not a JSON schema ({problem}); pass --schema-location with a location "
                     "that serves the catalog's schemas")


def _download(url: str) -> bytes:
    """The schema at `url` ("" for a 404: the catalog lacks it), or ReadFailed."""
    try:
        return read_url(url, SCHEMA_DEADLINE, MAX_SCHEMA_BYTES)
    except ReadFailed as exc:
        if exc.status == 404:
            return b""
        raise


def _json_path(path: list[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def validate_schemas(manifests: list[Manifest], k8s_version: str, store: SchemaStore, *,
                     builtin_only: bool = False) -> list[Finding]:
    """Findings for every object that breaks its schema or has no schema to check against."""
    findings: list[Finding] = []
    for m in manifests:
        if builtin_only and not is_builtin(m.api_version):
            continue
        validator = store.validator(m.api_version, m.kind, k8s_version)
        if validator is None:
            findings.append(object_finding(m, "", f"no schema found for {m.api_version} {m.kind}",
                                           "pass --schema-location with a folder that has it", "schema"))
            continue
        for err in validator.iter_errors(m.body):
            findings.append(object_finding(m, _json_path(list(err.instance_path)), err.message,
                                           "change the config value that produces this field", "schema"))
    return findings
