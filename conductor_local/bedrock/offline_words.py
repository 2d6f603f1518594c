"""Small wording helpers of the offline brain's read-back: tool names as words, text made short
enough to say, a result's text parsed when it is JSON."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_SAID_CHARS = 200


def words(text: str) -> str:
    """``openFile`` / ``open_file`` as words: "open file"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text).replace("_", " ").lower().strip()


def tool_words(name: str) -> str:
    """``editor.openFile`` as words: "editor open file"."""
    return " ".join(words(part) for part in name.split(".") if part) or "the tool"


def short(text: str, limit: int = MAX_SAID_CHARS) -> str:
    """``text`` on one line, cut with an ellipsis past ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def parsed(text: str) -> Any:
    """The JSON value ``text`` holds, else the text itself, stripped."""
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()


def sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop (unless it already ends a sentence)."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!…" else text + "."
