"""Turn pydantic validation errors into located, actionable findings.

pydantic says "String should match pattern '^[a-z0-9]...'"; a platform engineer wants
"teams/x.yaml:3: name: must be a DNS-1123 label ... (got 'ML_Team')". The table below maps each
pydantic error type to a sentence and a fix.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from generator.config.types import PATTERN_HELP
from generator.config.yamlsource import Source, dotted
from generator.errors import Finding


def shown(value: Any, limit: int = 60) -> str:
    """A short, escaped rendering of a user value for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping at `loc`, for listing its allowed keys."""
    current: Any = model
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
            if field is None:
                return None
            current = field.annotation
            continue
        current = _unwrap(current, part)
    current = _unwrap(current, None)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any, part: Any) -> Any:
    """Step from a list/dict/Optional annotation to the annotation of its items."""
    while True:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin in (typing.Union, types.UnionType):
            candidates = [a for a in args if a is not type(None)]
            annotation = candidates[0] if len(candidates) == 1 else annotation
            if len(candidates) != 1:
                return annotation
            continue
        if origin is typing.Annotated:
            annotation = args[0]
            continue
        if part is None:
            return annotation
        if origin is list:
            return args[0]
        if origin is dict:
            return args[1]
        return annotation


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _extra(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
    key = err["loc"][-1]
    parent = _model_at(model, err["loc"][:-1])
    allowed = _keys_of(parent) if parent else []
    from pydantic.alias_generators import to_camel

    if to_camel(str(key)) in allowed and to_camel(str(key)) != key:
        return f"unknown key {shown(key)}: keys are camelCase", f"write '{to_camel(str(key))}'"
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    hint += f"allowed keys here: {', '.join(allowed)}" if allowed else "remove the key"
    return f"unknown key {shown(key)}", hint


def _missing(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
    return f"missing required key '{err['loc'][-1]}'", f"add '{err['loc'][-1]}:' here (see docs/reference/config.md)"


def _pattern(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
    help_text = PATTERN_HELP.get(err["ctx"]["pattern"], f"must match {err['ctx']['pattern']}")
    return f"{help_text} (got {shown(err['input'])})", "change the value to fit the rule above"


def _type(expected: str) -> Callable[[dict[str, Any], type[BaseModel]], tuple[str, str]]:
    def message(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
        value = err["input"]
        got = type(value).__name__.replace("NoneType", "nothing").replace("str", "text")
        if expected == "text" and isinstance(value, (int, float, bool)):
            hint = f'quote the value: "{value}"' if not isinstance(value, bool) else \
                "quote the value; YAML reads yes/no/on/off as true/false"
        elif isinstance(value, str) and expected in ("a whole number", "a number"):
            hint = "write the number without quotes"
        else:
            hint = f"write {expected} here"
        return f"expected {expected}, got {got} {shown(value)}", hint
    return message


def _literal(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
    return f"must be one of {err['ctx']['expected']} (got {shown(err['input'])})", "use one of the listed values"


def _value(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
    text = str(err["ctx"]["error"]) if "ctx" in err and "error" in err["ctx"] else err["msg"]
    return text, "correct the value as the message says"


def _plain(hint: str) -> Callable[[dict[str, Any], type[BaseModel]], tuple[str, str]]:
    def message(err: dict[str, Any], model: type[BaseModel]) -> tuple[str, str]:
        return f"{err['msg'][0].lower()}{err['msg'][1:]} (got {shown(err['input'])})", hint
    return message


_MESSAGES: dict[str, Callable[[dict[str, Any], type[BaseModel]], tuple[str, str]]] = {
    "extra_forbidden": _extra,
    "missing": _missing,
    "string_pattern_mismatch": _pattern,
    "string_type": _type("text"),
    "int_type": _type("a whole number"),
    "float_type": _type("a number"),
    "bool_type": _type("true or false"),
    "list_type": _type("a list"),
    "dict_type": _type("a mapping"),
    "model_type": _type("a mapping"),
    "model_attributes_type": _type("a mapping"),
    "literal_error": _literal,
    "value_error": _value,
    "assertion_error": _value,
    "greater_than_equal": _plain("use a larger value"),
    "greater_than": _plain("use a larger value"),
    "less_than_equal": _plain("use a smaller value"),
    "less_than": _plain("use a smaller value"),
    "too_short": _plain("add entries"),
    "too_long": _plain("remove entries"),
    "string_too_long": _plain("shorten the value"),
}


def findings_from(error: ValidationError, model: type[BaseModel], source: Source) -> list[Finding]:
    """Located findings for every error pydantic reported on `source`."""
    out: list[Finding] = []
    for details in error.errors(include_url=False):
        err: dict[str, Any] = dict(details)
        loc = tuple(err["loc"])
        if loc and loc[-1] == "[key]":  # a bad mapping key: point at the key itself
            loc = loc[:-1]
        message, hint = _MESSAGES.get(err["type"], _plain("correct the value"))(err, model)
        out.append(Finding(source.path, source.line_of(loc), dotted(loc), message, hint))
    return sorted(set(out))
