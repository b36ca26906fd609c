"""Job templates: each team profile's object, as its kind builds it (generator/kinds), with the Service it
needs beside it and, for the batch kinds, a SkyPilot task. Templates live outside the synced tree: Kueue
mutates jobs, so GitOps must not.
"""

from __future__ import annotations

from generator.compile.manifest import Manifest
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.kinds import companion_service, job_object, kind_of
from generator.kinds.skypilot import skypilot_config, skypilot_task


def compile_templates(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The job of every profile that targets this cluster, its companion Service and SkyPilot task, and the
    team's SkyPilot configuration (not synced by GitOps)."""
    out = []
    for team in teams:
        for i, profile in enumerate(team.config.job_profiles):
            if profile.cluster != cluster.config.name:
                continue
            body = job_object(team.config, cluster.config, profile)
            folder, source = ("templates", team.config.name), team.at("jobProfiles", i)
            out.append(Manifest(folder, body, source, synced=False, file=f"{profile.name}.{profile.kind}.yaml"))
            service = companion_service(body)
            if service is not None:
                out.append(Manifest(folder, service, source, synced=False, file=f"{profile.name}.service.yaml"))
            if kind_of(profile.kind).skypilot:
                out.append(Manifest(folder, skypilot_task(team.config, cluster.config, profile), source,
                                    synced=False, file=f"{profile.name}.sky.yaml", kubernetes=False))
        if any(p.cluster == cluster.config.name and kind_of(p.kind).skypilot for p in team.config.job_profiles):
            out.append(Manifest(("templates", team.config.name), skypilot_config(team.config),
                                team.at("namespaces"), synced=False, file="skypilot-config.yaml", kubernetes=False))
    return out
