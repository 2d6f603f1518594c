"""A request's parameters checked against every constraint of the botocore model, as the service checks them.

botocore checks only required members, types and minimums before sending; the service also checks
maximums, patterns (matched whole), enum values and unions (exactly one member set). Problems are
reported in AWS's words, every one of them: ``N validation error(s) detected: Value '<v>' at '<path>'
failed to satisfy constraint: Member must …``, paths dotted, list items 1-based (``records.1.member``).
Sensitive values (the model's ``sensitive`` trait, e.g. a search query or an event's text) are never
echoed back.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StructureShape

from conductor_local.agentcore_memory.errors import ServiceError, validation_error

MAX_SHOWN = 200  # a longer value is not echoed in a problem


@functools.cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _at(shape: Shape, value: Any, path: str) -> str:
    shown = isinstance(value, str | int | float) and not isinstance(value, bool)
    if not shown or shape.metadata.get("sensitive") or len(str(value)) > MAX_SHOWN:
        return f"Value at '{path}'"
    return f"Value '{value}' at '{path}'"


def _failed(at: str, constraint: str) -> str:
    return f"{at} failed to satisfy constraint: Member must {constraint}"


def _length_problems(shape: Shape, size: int, at: str) -> list[str]:
    metadata = shape.metadata
    if "min" in metadata and size < metadata["min"]:
        return [_failed(at, f"have length greater than or equal to {metadata['min']}")]
    if "max" in metadata and size > metadata["max"]:
        return [_failed(at, f"have length less than or equal to {metadata['max']}")]
    return []


def _string_problems(shape: Shape, value: str, at: str) -> list[str]:
    problems = _length_problems(shape, len(value), at)
    enum = getattr(shape, "enum", None) or []
    if enum and value not in enum:
        problems.append(_failed(at, f"satisfy enum value set: [{', '.join(enum)}]"))
    pattern = shape.metadata.get("pattern")
    if pattern is not None and _pattern(pattern).fullmatch(value) is None:
        problems.append(_failed(at, f"satisfy regular expression pattern: {pattern}"))
    return problems


def _number_problems(shape: Shape, value: float, at: str) -> list[str]:
    metadata = shape.metadata
    if "min" in metadata and value < metadata["min"]:
        return [_failed(at, f"have value greater than or equal to {metadata['min']}")]
    if "max" in metadata and value > metadata["max"]:
        return [_failed(at, f"have value less than or equal to {metadata['max']}")]
    return []


def _structure_problems(shape: StructureShape, value: dict[str, Any], path: str) -> list[str]:
    problems = []
    for name in shape.required_members:
        if value.get(name) is None:
            problems.append(_failed(f"Value null at '{_join(path, name)}'", "not be null"))
    if shape.is_tagged_union and sum(1 for name in shape.members if value.get(name) is not None) != 1:
        members = ", ".join(shape.members)
        problems.append(_failed(f"Value at '{path}'", f"have exactly one of its members set: [{members}]"))
    for name, member in shape.members.items():
        if value.get(name) is not None:
            problems += problems_of(member, value[name], _join(path, name))
    return problems


def _map_problems(shape: MapShape, value: dict[str, Any], path: str) -> list[str]:
    problems = _length_problems(shape, len(value), f"Value at '{path}'")
    for key, item in value.items():
        key_problems = _string_problems(shape.key, key, "Member")
        if key_problems:
            constraints = ", ".join(problem.split("Member must ", 1)[1] for problem in key_problems)
            problems.append(f"{_at(shape.key, key, path)} failed to satisfy constraint: Map keys must {constraints}")
        problems += problems_of(shape.value, item, f"{path}.{key}")
    return problems


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def problems_of(shape: Shape, value: Any, path: str = "") -> list[str]:
    """Every constraint of ``shape`` that ``value`` (already of the shape's type) breaks."""
    if shape.metadata.get("document"):
        return []
    if isinstance(shape, StructureShape):
        return _structure_problems(shape, value, path)
    if isinstance(shape, ListShape):
        problems = _length_problems(shape, len(value), f"Value at '{path}'")
        for index, item in enumerate(value, 1):
            problems += problems_of(shape.member, item, f"{path}.{index}.member")
        return problems
    if isinstance(shape, MapShape):
        return _map_problems(shape, value, path)
    at = _at(shape, value, path)
    if shape.type_name == "string":
        return _string_problems(shape, value, at)
    if shape.type_name in ("integer", "long", "double", "float"):
        return _number_problems(shape, value, at)
    if shape.type_name == "blob":
        return _length_problems(shape, len(value), at)
    return []


def validation_message(problems: list[str]) -> str:
    errors = "validation error" if len(problems) == 1 else "validation errors"
    return f"{len(problems)} {errors} detected: {'; '.join(problems)}"


def check(shape: StructureShape | None, params: dict[str, Any]) -> None:
    """Refuse (``ValidationException``) a request that breaks any constraint of its input shape."""
    if shape is None:
        return
    problems = problems_of(shape, params)
    if problems:
        raise validation_error(validation_message(problems))


def refuse(path: str, value: Any, constraint: str, *, shown: bool = True) -> ServiceError:
    """One problem the model cannot express (e.g. ``namespace`` or ``namespacePath`` required), in
    the same words."""
    at = f"Value '{value}' at '{path}'" if shown and value is not None else f"Value at '{path}'"
    if value is None:
        at = f"Value null at '{path}'"
    return validation_error(validation_message([_failed(at, constraint)]))
