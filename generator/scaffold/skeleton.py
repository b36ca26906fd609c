"""A config file written from its model: the values given, and every other key commented out with
its meaning and default, so a new fleet's files document themselves and can never name a key the
models do not have (the skeleton is generated, not kept beside them)."""

from __future__ import annotations

import textwrap
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from generator.yamltext import to_yaml

WIDTH = 100


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds directly (`X` or `X | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return found[0] if len(found) == 1 else None
    return None


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a list's items (`list[X]` or `list[X] | None`), if any."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(candidate) is list:
            return _model_of(typing.get_args(candidate)[0])
    return None


Line = tuple[bool, str]
"""(is a description, text): the list handling needs to find an item's first key."""


def _doc(field: Any, pad: str) -> list[Line]:
    text = " ".join((field.description or "").split())
    return [(True, f"{pad}# {line}") for line in textwrap.wrap(text, WIDTH - len(pad) - 2)] if text else []


def _scalar_block(key: str, value: Any, pad: str, mark: str) -> list[Line]:
    """`key: value` through the one emitter (so quoting is right), block values indented under it."""
    text = to_yaml({key: value}).rstrip("\n")
    return [(False, f"{pad}{mark}{line}") for line in text.splitlines()]


def _default(field: Any) -> Any:
    value = field.default
    if value is PydanticUndefined:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True)
    return value


def _item(model: type[BaseModel], entry: dict[str, Any], pad: str, commented: bool) -> list[Line]:
    """One list item: its fields indented under `- `, the dash on its first key."""
    body = _lines(model, entry, pad + "    ", commented)
    first = next(i for i, (is_doc, _) in enumerate(body) if not is_doc)
    text = body[first][1]
    if commented:
        body[first] = (False, f"{pad}  # - {text.lstrip()[2:]}")
    else:
        body[first] = (False, f"{pad}  - {text.lstrip()}")
    return body


def _lines(model: type[BaseModel], values: dict[str, Any], pad: str, commented: bool) -> list[Line]:
    out: list[Line] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        given = key in values
        hidden = commented or not given
        mark = "# " if hidden else ""
        out.extend(_doc(field, pad))
        sub, item = _model_of(field.annotation), _item_model(field.annotation)
        value = values.get(key)
        required = "   # required" if field.is_required() and not given else ""
        if sub is not None and (isinstance(value, dict) or not given):
            out.append((False, f"{pad}{mark}{key}:{required}"))
            out.extend(_lines(sub, value if isinstance(value, dict) else {}, pad + "  ", hidden))
        elif item is not None and (not given or (isinstance(value, list) and value and isinstance(value[0], dict))):
            out.append((False, f"{pad}{mark}{key}:{required}"))
            for entry in (value if isinstance(value, list) else [{}]):
                out.extend(_item(item, entry, pad, hidden))
        elif given:
            out.extend(_scalar_block(key, value, pad, mark))
        elif required:
            out.append((False, f"{pad}{mark}{key}:{required}"))
        else:
            default = _default(field)
            out.extend(_scalar_block(key, default, pad, mark) if default not in (None, {}, [])
                       else [(False, f"{pad}{mark}{key}:")])
    return out


def lines(model: type[BaseModel], values: dict[str, Any]) -> list[str]:
    """The fields of `model` in declaration order: given ones as YAML, the rest as comments."""
    return [text for _, text in _lines(model, values, "", False)]


def skeleton(model: type[BaseModel], values: dict[str, Any], header: str) -> str:
    """A whole file: a header comment, then `lines`."""
    head = [f"# {part}" for line in header.splitlines() for part in textwrap.wrap(line, WIDTH - 2) or [""]]
    return "\n".join([*head, *lines(model, values)]) + "\n"
