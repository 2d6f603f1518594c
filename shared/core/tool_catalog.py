"""The IDE tools an app gets when it declares none: the catalog shipped beside the protocol
(``shared/wire/tool_catalog.json``), read as ``ClientTool``s."""

from __future__ import annotations

import json
from importlib import resources

from shared.core.wrapper import ClientTool


def default_catalog() -> list[ClientTool]:
    raw = resources.files("shared.wire").joinpath("tool_catalog.json").read_text(encoding="utf-8")
    return [ClientTool.model_validate(item) for item in json.loads(raw)]
