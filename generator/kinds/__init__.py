"""Every kind of job a profile renders, one module each, registered in order as Kueue registers its job
integrations (sigs.k8s.io/kueue pkg/controller/jobs/<kind>/): adding a kind is its module and one line here.

The checks, the compilers, the validators, member RBAC, the SDK and the command line read what a kind is
from `KINDS`; nothing else in the generator names one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds import batch, deployment, jobset, leaderworkerset, raycluster, rayjob, trainjob
from generator.kinds.base import Body, Kind, Operator

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.platform import Operators
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


def operator_frameworks(operator: Operator) -> list[str]:
    """The Kueue integrations of the kinds `operator` runs, sorted: Kueue must queue them where it runs."""
    return sorted(f for k in operator_kinds(operator) for f in k.frameworks)


def dispatched_frameworks(integrations: tuple[str, ...] | list[str] | None, operators: Operators) -> list[str]:
    """The Kueue integrations a MultiKueue manager dispatches: its `kueue.integrations` when set, else
    MULTIKUEUE_FRAMEWORKS and the kinds of each operator it turns on that a manager may dispatch."""
    from generator.config.cluster import MULTIKUEUE_FRAMEWORKS

    if integrations is not None:
        return list(dict.fromkeys(integrations))
    return [*MULTIKUEUE_FRAMEWORKS, *(f for op in OPERATORS if getattr(operators, op.key) and not op.multikueue_refusal
                                      for f in operator_frameworks(op))]


def frameworks_of(cluster: ClusterConfig) -> list[str]:
    """The Kueue integrations of the cluster: a manager's are what it can dispatch."""
    if cluster.multikueue is not None:
        return dispatched_frameworks(cluster.kueue.integrations, cluster.operators)
    return cluster.kueue.frameworks


def job_object(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, **changes: Any) -> Body:
    """The object of `profile`'s kind, with the changes its builder takes (name, nodes, image, command)."""
    return kind_of(profile.kind).build(team, cluster, profile, **changes)


def companion_service(job: Body) -> Body | None:
    """The Service a job needs beside it, created with it, as its kind says (None for most)."""
    kind = BY_OBJECT.get(str(job.get("kind")))
    return kind.companion(job) if kind is not None else None
