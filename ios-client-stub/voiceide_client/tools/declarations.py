"""The stub's tools as an app declares them in ``sessionStart``: the names its router answers,
described as the conductor's catalog describes them (arguments, deadline, background, effects)."""

from __future__ import annotations

from collections.abc import Iterable

from shared.core.tool_catalog import default_catalog
from shared.wire.protocol_tools import RESERVED_TOOL_NAMES, DeclaredTool


def declared_tools(names: Iterable[str]) -> list[DeclaredTool]:
    """A declaration for each of ``names`` (the protocol's own calls left out: they always are)."""
    catalog = {tool.name: tool for tool in default_catalog()}
    declared: list[DeclaredTool] = []
    for name in sorted(set(names) - RESERVED_TOOL_NAMES):
        tool = catalog.get(name)
        if tool is None:
            declared.append(DeclaredTool(name=name, description=f"{name}, a tool of the app"))
            continue
        declared.append(
            DeclaredTool(
                name=name,
                description=tool.description,
                arguments=tool.arguments,
                deadlineSeconds=int(tool.deadline_s) if tool.deadline_s else None,
                effects=tool.effects,
                background=tool.background,
            )
        )
    return declared
