"""The shape of a job object the SDK reads before the API server does: the pre-submit checks and the
companion Service index each kind's pod templates (spec.template.spec.containers, ...), so a job file
without them, or with a string where a mapping belongs, must be refused by name, not fail as a KeyError.

Each kind lists the paths the SDK reads (`shape` in its record, generator/kinds). A path is dotted keys;
`key[]` is a list whose items are all mappings; `key{}` is a mapping whose values are all of the scalar that
follows; `key?` may be absent (what follows it is then not read); `key:str` / `key:int` / `key:quantity` is
a scalar.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from generator.kinds import BY_OBJECT
from generator.quantity import QuantityError, value_of


def _extended(resource: str) -> bool:
    """A resource outside Kubernetes' own names (nvidia.com/gpu): its quantity must be whole (apimachinery's
    IsExtendedResourceName, as validation.go's ValidateResourceQuantityValue applies it, k8s v1.36.3
    pkg/apis/core/validation/validation.go:8222-8231)."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")) \
        and not resource.startswith("requests.")


def quantity(found: object) -> Decimal:
    """The value of a quantity as a job file may hold it: a string, or a number (JSON and YAML numbers are
    quantities too; apimachinery's Quantity.UnmarshalJSON reads an unquoted number); QuantityError if not one."""
    if isinstance(found, bool) or not isinstance(found, (str, int, float)):
        raise QuantityError(f"{type(found).__name__}, not a quantity")
    return value_of(found if isinstance(found, (str, int)) else repr(found))


def _quantity(found: object, key: str) -> str | None:
    """Why `found`, the quantity of resource `key`, is not one the API server takes; None when it is."""
    try:
        value = quantity(found)
    except QuantityError as exc:
        return f"is {exc}"
    if value < 0:
        return "is negative"
    if _extended(key) and value != value.to_integral_value():
        return f"is {found!r}: {key} counts whole devices (a whole number such as 1 or 8)"
    return None


def _typed(called: str, kind: type) -> Callable[[object, str], str | None]:
    return lambda found, _key: (None if isinstance(found, kind) and not isinstance(found, bool)
                                else f"is {type(found).__name__}, not {called}")


_SCALARS: dict[str, Callable[[object, str], str | None]] = {
    "str": _typed("a string", str), "int": _typed("an integer", int), "quantity": _quantity}
"""Per scalar type, why a value (of a key) is not one; None when it is."""


def _walk(value: Any, steps: list[str], at: str) -> str | None:
    """The first problem along `steps` from `value` (found at `at`), or None."""
    if not steps:
        return None
    step, rest = steps[0], steps[1:]
    key, _, scalar = step.partition(":")
    optional = key.endswith(("?", "?[]", "?{}"))
    many, each = key.endswith("[]"), key.endswith("{}")
    key = key.removesuffix("[]").removesuffix("{}").removesuffix("?")
    here = f"{at}.{key}" if at else key
    if key not in value or value[key] is None:
        return None if optional else f"{here} is missing"
    found = value[key]
    if each:
        if not isinstance(found, dict):
            return f"{here} is {type(found).__name__}, not a mapping"
        return next((f"{here}.{name} {problem}" for name, item in found.items()
                     if (problem := _SCALARS[scalar](item, str(name))) is not None), None)
    if scalar:
        problem = _SCALARS[scalar](found, key)
        return None if problem is None else f"{here} {problem}"
    if many:
        if not isinstance(found, list) or not all(isinstance(item, dict) for item in found):
            return f"{here} is not a list of mappings"
        return next((problem for i, item in enumerate(found)
                     if (problem := _walk(item, rest, f"{here}[{i}]")) is not None), None)
    if not isinstance(found, dict):
        return f"{here} is {type(found).__name__}, not a mapping"
    return _walk(found, rest, here)


def shape_problems(body: dict[str, Any]) -> list[str]:
    """Each path of `body`'s kind (its record's `shape`) that is missing or of the wrong type, once; [] for a kind
    no module makes."""
    problems: list[str] = []
    kind = BY_OBJECT.get(str(body.get("kind")))
    for path in kind.shape if kind is not None else ():
        problem = _walk(body, path.split("."), "")
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


def refuse_misshapen(body: dict[str, Any], where: str, error: type[Exception]) -> None:
    """Raise `error` naming `where` and each field of `body` the SDK would read that is missing or wrong."""
    if problems := shape_problems(body):
        raise error(f"{where}: {'; '.join(problems)}: a {body.get('kind')} needs these fields as its API defines "
                    "them (`fleetgen job new` writes a complete one)")
