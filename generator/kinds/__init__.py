"""Every kind of job a profile renders, one module each, registered in order as Kueue registers its job
integrations (sigs.k8s.io/kueue pkg/controller/jobs/<kind>/): adding a kind is its module and one line here.

The checks, the compilers, the validators, member RBAC, the SDK and the command line read what a kind is
from `KINDS`. What config keeps below the registry (each operator's Kueue integrations in
config/cluster.py, which a cluster file is validated against before any kind is known) is held equal to
it by tests/test_kinds_registry.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds import batch, deployment, jobset, leaderworkerset, raycluster, rayjob, trainjob
from generator.kinds.base import Body, Kind, Operator

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

KINDS: tuple[Kind, ...] = (
    jobset.KIND,
    batch.KIND,
    rayjob.KIND,
    trainjob.KIND,
    raycluster.KIND,
    deployment.KIND,
    leaderworkerset.KIND,
)
"""The registry, in the order the reference and `--kind` list them."""
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
"""Each kind by its profile `kind` (and `--kind`)."""
BY_OBJECT: dict[str, Kind] = {k.kind: k for k in KINDS}
"""Each kind by its object's Kubernetes kind."""
OPERATORS: tuple[Operator, ...] = tuple(dict.fromkeys(k.operator for k in KINDS if k.operator is not None))
"""The operators the kinds name, in the order of the kinds that first name them."""


def kind_of(name: str) -> Kind:
    """The kind of a profile's `kind` (checked by `unknown_kind` where the profile is read)."""
    return BY_NAME[name]


def unknown_kind(name: str) -> str | None:
    """Why `name` is no kind ("Input should be 'jobset', ... or 'leaderworkerset'"), None if it is one."""
    if name in BY_NAME:
        return None
    names = [repr(k.name) for k in KINDS]
    return f"Input should be {', '.join(names[:-1])} or {names[-1]}"


def kind_schema(default: str) -> dict[str, object]:
    """The JSON Schema of a profile's `kind` (the model's is a plain string, as config sits below the
    registry): the registry's names, each described."""
    return {"default": default, "description": "\n".join(k.doc for k in KINDS), "enum": [k.name for k in KINDS],
            "title": "Kind", "type": "string"}


def operator_kinds(operator: Operator) -> tuple[Kind, ...]:
    """The kinds `operator` runs."""
    return tuple(k for k in KINDS if k.operator is operator)


def job_object(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, **changes: Any) -> Body:
    """The object of `profile`'s kind, with the changes its builder takes (name, nodes, image, command)."""
    return kind_of(profile.kind).build(team, cluster, profile, **changes)


def companion_service(job: Body) -> Body | None:
    """The Service a job needs beside it, created with it, as its kind says (None for most)."""
    kind = BY_OBJECT.get(str(job.get("kind")))
    return kind.companion(job) if kind is not None else None
