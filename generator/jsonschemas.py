"""JSON Schemas of the two config files, for editors (yaml-language-server) and docs."""

from __future__ import annotations

import json

from pydantic import BaseModel

from generator.config.cluster import ClusterConfig
from generator.config.jobs import JobProfile
from generator.config.team import TeamConfig
from generator.kinds import kind_schema

MODELS: dict[str, type[BaseModel]] = {"team": TeamConfig, "cluster": ClusterConfig}


def _model(which: str) -> type[BaseModel]:
    if which == "diff":
        from generator.diff.report import DiffReport

        return DiffReport
    return MODELS[which]


def schema_text(which: str) -> str:
    """The JSON Schema of `team` or `cluster` files (or of `fleetgen diff --format json`)."""
    schema = _model(which).model_json_schema(by_alias=True)
    if which == "team":  # the profile's kind is the registry's to list
        schema["$defs"]["JobProfile"]["properties"]["kind"] = kind_schema(JobProfile.model_fields["kind"].default)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$id": f"https://fleetgen.dev/schemas/{which}.schema.json", **schema}
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schema_files() -> dict[str, str]:
    """`schemas/<which>.schema.json` -> text, for `fleetgen schema --write`."""
    return {f"schemas/{which}.schema.json": schema_text(which) for which in (*MODELS, "diff")}
