"""How the offline brain says the app's tool results back.

By default as a person would say it ("I opened README.md; it has 120 lines.", "The build succeeded
with no warnings.", "Git status didn't work: not a repository."). With
``CONDUCTOR_LOCAL_READBACK=literal`` (the end-to-end tests set it, to check what reached the model)
word for word: ``<tool.name> returned <result>`` or ``<tool.name> failed: <error>``, joined with
``". "``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

READBACK_ENV = "CONDUCTOR_LOCAL_READBACK"
LITERAL = "literal"
MAX_SAID_CHARS = 200


def literal_wanted() -> bool:
    return os.environ.get(READBACK_ENV, "").strip().lower() == LITERAL


def said_literally(name: str, text: str, *, failed: bool) -> str:
    return f"{name} failed: {text or '(empty)'}" if failed else f"{name} returned {text or '(empty)'}"


def said_naturally(name: str, tool_input: Any, text: str, *, failed: bool) -> str:
    """One or two sentences about one result."""
    label = tool_words(name)
    value = _parsed(text)
    arguments = tool_input if isinstance(tool_input, Mapping) else {}
    if failed:
        reason = _reason(value) or _short(text)
        return f"{label.capitalize()} didn't work" + (f": {reason}." if reason else ".")
    if value in (None, "", {}, []):
        return f"{label.capitalize()} is done."
    if not isinstance(value, Mapping):
        return f"{label.capitalize()} said: {_short(text)}."
    path = _path(value, arguments)
    lines = _line_count(value)
    verb = name.rsplit(".", 1)[-1].lower()
    if verb.startswith("open") and path:
        return f"I opened {path}" + (f"; it has {lines} lines." if lines is not None else ".")
    if verb.startswith("read") and path:
        return f"I read {path}" + (f"; it has {lines} lines." if lines is not None else ".")
    if isinstance(value.get("status"), str):
        return f"The {label} {value['status']}" + _counts(value) + "."
    if value.get("cancelled") is True:
        return "I stopped it."
    facts = [f"{_words(str(key))} {_scalar(item)}" for key, item in value.items() if _scalar(item) is not None]
    if not facts:
        return f"{label.capitalize()} answered."
    return _short(f"{label.capitalize()}: {', '.join(facts[:4])}") + "."


def tool_words(name: str) -> str:
    """``editor.openFile`` as words: "editor open file"."""
    return " ".join(_words(part) for part in name.split(".") if part) or "the tool"


def _words(text: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text).replace("_", " ").lower().strip()


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()


def _reason(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("reason", "message", "error"):
            if isinstance(value.get(key), str) and value[key].strip():
                return _short(value[key])
    return ""


def _path(value: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    for candidate in (value.get("path"), value.get("opened"), value.get("file"), arguments.get("path")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return None


def _line_count(value: Mapping[str, Any]) -> int | None:
    lines = value.get("lines")
    if isinstance(lines, int) and not isinstance(lines, bool):
        return lines
    content = value.get("content", value.get("text"))
    if isinstance(content, str):
        return len(content.splitlines())
    return None


def _counts(value: Mapping[str, Any]) -> str:
    counted = [
        (key, item)
        for key, item in value.items()
        if key in ("warnings", "errors", "failures") and isinstance(item, int)
    ]
    if not counted:
        return ""
    return " with " + " and ".join(f"{item or 'no'} {key if item != 1 else key[:-1]}" for key, item in counted)


def _scalar(item: Any) -> str | None:
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, int | float | str) and str(item).strip():
        return _short(str(item))
    return None


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_SAID_CHARS else text[: MAX_SAID_CHARS - 1].rstrip() + "…"
