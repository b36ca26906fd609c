"""What a team's profile or a YAML file makes: a Job, or a RayCluster for a Ray cluster (`kind: raycluster`),
for the commands that take either (`fleetgen job new` and `fleetgen job submit`)."""

from __future__ import annotations

from pathlib import Path

from generator.connection import Connection
from generator.errors import UsageError
from generator.jobs.job import KINDS, Job, checked_object, read_job_file, resolve_profile
from generator.jobs.ray import RayCluster
from generator.kinds import BY_OBJECT, kind_of
from generator.kinds import KINDS as REGISTRY


def from_profile(team: str, profile: str, *, root: str | Path | None = None, api: Connection | None = None,
                 name: str | None = None, nodes: int | None = None, image: str | None = None,
                 command: list[str] | None = None) -> Job | RayCluster:
    """TEAM's PROFILE made concrete (as Job.from_profile or RayCluster.from_profile), its fleet read once."""

    fleet, tcfg, found, label = resolve_profile(team, profile, root, api, nodes)
    body = checked_object(fleet, tcfg, found, label, name=name, image=image, command=command)
    made = RayCluster(None, api, body=body) if not kind_of(found.kind).runs_program else Job(body, api)
    return made.made_by(fleet, found, root)


def from_file(path: str | Path) -> Job | RayCluster:
    """A job of one of KINDS, or a RayCluster, from a YAML file (as `fleetgen job new` writes them)."""
    body = read_job_file(path)
    of = BY_OBJECT.get(str(body.get("kind")))
    if not (body.get("metadata") or {}).get("name") or of is None:
        raise UsageError(f"{path} is not a job: a job file needs kind: {', '.join(KINDS)} or "
                         f"{' or '.join(k.kind for k in REGISTRY if not k.sdk_job)}, and metadata.name")
    return Job(body) if of.sdk_job else RayCluster(None, None, body=body)
