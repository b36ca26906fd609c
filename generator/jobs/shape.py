"""The shape of a job object the SDK reads before the API server does: the pre-submit checks and the
companion Service index each kind's pod templates (spec.template.spec.containers, ...), so a job file
without them, or with a string where a mapping belongs, must be refused by name, not fail as a KeyError.

Each kind lists the paths the SDK reads. A path is dotted keys; `key[]` is a list whose items are all
mappings; `key?` may be absent (what follows it is then not read); `key:str` / `key:int` is a scalar.
"""

from __future__ import annotations

from typing import Any

_POD = "template.spec.containers[].ports?[].name?:str"
_RESOURCES = "template.spec.containers[].resources?.requests?"
_RAY = ("headGroupSpec." + _POD, "headGroupSpec." + _RESOURCES,
        "workerGroupSpecs?[]." + _POD, "workerGroupSpecs?[]." + _RESOURCES, "workerGroupSpecs?[].replicas?:int")

SHAPES: dict[str, tuple[str, ...]] = {
    "JobSet": ("spec.replicatedJobs[].name:str", "spec.replicatedJobs[].replicas?:int",
               "spec.replicatedJobs[].template.spec.completions?:int",
               "spec.replicatedJobs[].template.spec.parallelism?:int",
               "spec.replicatedJobs[].template.spec." + _POD, "spec.replicatedJobs[].template.spec." + _RESOURCES),
    "Job": ("spec.completions?:int", "spec.parallelism?:int", "spec." + _POD, "spec." + _RESOURCES,
            "spec.template.spec.subdomain?:str"),
    "RayJob": tuple("spec.rayClusterSpec." + p for p in _RAY),
    "RayCluster": tuple("spec." + p for p in _RAY),
    "TrainJob": ("spec.trainer?.numNodes?:int", "spec.trainer?.resourcesPerNode?.requests?"),
    "Deployment": ("spec.replicas?:int", "spec.selector.matchLabels", "spec." + _POD, "spec." + _RESOURCES),
    "LeaderWorkerSet": ("spec.replicas?:int", "spec.leaderWorkerTemplate.size?:int",
                        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[].ports?[].name?:str",
                        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[].resources?.requests?"),
}
"""Per kind, the paths of its object the SDK reads (generator.jobs.presubmit, compile.jobs.companion_service,
the rank selectors of generator.jobs.job)."""

_SCALARS: dict[str, tuple[type, str]] = {"str": (str, "a string"), "int": (int, "an integer")}


def _walk(value: Any, steps: list[str], at: str) -> str | None:
    """The first problem along `steps` from `value` (found at `at`), or None."""
    if not steps:
        return None
    step, rest = steps[0], steps[1:]
    key, _, scalar = step.partition(":")
    optional, many = key.endswith("?") or key.endswith("?[]"), key.endswith("[]")
    key = key.removesuffix("[]").removesuffix("?")
    here = f"{at}.{key}" if at else key
    if key not in value or value[key] is None:
        return None if optional else f"{here} is missing"
    found = value[key]
    if scalar:
        wanted, called = _SCALARS[scalar]
        ok = isinstance(found, wanted) and not isinstance(found, bool)
        return None if ok else f"{here} is {type(found).__name__}, not {called}"
    if many:
        if not isinstance(found, list) or not all(isinstance(item, dict) for item in found):
            return f"{here} is not a list of mappings"
        return next((problem for i, item in enumerate(found)
                     if (problem := _walk(item, rest, f"{here}[{i}]")) is not None), None)
    if not isinstance(found, dict):
        return f"{here} is {type(found).__name__}, not a mapping"
    return _walk(found, rest, here)


def shape_problems(body: dict[str, Any]) -> list[str]:
    """Each path of `body`'s kind (SHAPES) that is missing or of the wrong type, once; [] for a kind not listed."""
    problems: list[str] = []
    for path in SHAPES.get(str(body.get("kind")), ()):
        problem = _walk(body, path.split("."), "")
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


def refuse_misshapen(body: dict[str, Any], where: str, error: type[Exception]) -> None:
    """Raise `error` naming `where` and each field of `body` the SDK would read that is missing or wrong."""
    if problems := shape_problems(body):
        raise error(f"{where}: {'; '.join(problems)}: a {body.get('kind')} needs these fields as its API defines "
                    "them (`fleetgen job new` writes a complete one)")
