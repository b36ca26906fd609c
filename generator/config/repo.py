"""`fleet.yaml` at the repository root: settings that belong to the repository, not a cluster."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, StrictBool, ValidationError

from generator.config.base import ConfigModel
from generator.config.messages import findings_from
from generator.config.types import Owner
from generator.config.yamlsource import load_source
from generator.errors import InputError

FLEET_FILE = "fleet.yaml"


class RepoConfig(ConfigModel):
    """Repository-wide settings."""

    platform_owners: list[Owner] = Field(min_length=1)
    """The platform team: owns clusters/, rendered/gitops/, the generator and every file by default."""
    platform_approves_quotas: StrictBool = True
    """Team files also need the platform team's approval, so no team can raise its own quota alone."""


def load_repo_config(root: Path) -> RepoConfig | None:
    """`fleet.yaml` if the repository has one."""
    path = root / FLEET_FILE
    if not path.is_file() and not path.is_symlink():
        return None
    source = load_source(root, FLEET_FILE)
    try:
        return RepoConfig.model_validate(source.data if isinstance(source.data, dict) else {}, by_alias=True,
                                          by_name=False)
    except ValidationError as exc:
        raise InputError(findings_from(exc, RepoConfig, source)) from None
