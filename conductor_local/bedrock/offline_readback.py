"""How the offline brain says the app's tool results back.

By default as a person would say it ("I opened README.md; it has 120 lines.", "The build succeeded
with no warnings.", "The build is 25 % done: compiling unit5.py.", "Git status didn't work: not a
repository."); builds, tests and the conductor's own tools are worded in ``offline_runs`` (its
memory tools in ``offline_memory``: "I'll remember that you prefer tabs over spaces."), and a
background job's report (the conductor's ``[background report]`` message) is said the same way. With
``CONDUCTOR_LOCAL_READBACK=literal`` (the end-to-end tests set it, to check what reached the model)
word for word: ``<tool.name> returned <result>`` or ``<tool.name> failed: <error>``, joined with
``". "``, and a report's lines as the conductor wrote them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from conductor_local.bedrock.offline_memory import said_memory
from conductor_local.bedrock.offline_runs import said_cancel, said_run, said_status
from conductor_local.bedrock.offline_words import MAX_SAID_CHARS, parsed, short, tool_words, words
from shared.core.background_report import REPORT_MARKER
from shared.wire.protocol_tools import CANCEL_TOOL, STATUS_TOOL

__all__ = ["MAX_SAID_CHARS", "literal_wanted", "said_literally", "said_naturally", "said_report", "tool_words"]

READBACK_ENV = "CONDUCTOR_LOCAL_READBACK"
LITERAL = "literal"

# One outcome of a report (``shared.core.background_report.report_text``); its text may span lines.
_REPORT_OUTCOME = re.compile(
    r"^The (\S+) you started in the background \([^)\n]*\) (finished|did not succeed): ", re.MULTILINE
)


def literal_wanted() -> bool:
    return os.environ.get(READBACK_ENV, "").strip().lower() == LITERAL


def said_literally(name: str, text: str, *, failed: bool) -> str:
    return f"{name} failed: {text or '(empty)'}" if failed else f"{name} returned {text or '(empty)'}"


def said_report(transcript: str) -> str | None:
    """A background report said as a person would, one sentence or two an outcome; None when
    ``transcript`` is not a report the conductor wrote."""
    if not transcript.startswith(REPORT_MARKER):
        return None
    body = "\n".join(transcript.splitlines()[1:-1])  # without the marker and the closing instruction
    found = list(_REPORT_OUTCOME.finditer(body))
    said = []
    for match, following in zip(found, [*found[1:], None], strict=True):
        text = body[match.end() : following.start() if following else len(body)].strip()
        said.append(said_naturally(match[1], None, text, failed=match[2] == "did not succeed"))
    return " ".join(said) or None


def said_naturally(name: str, tool_input: Any, text: str, *, failed: bool) -> str:
    """One or two sentences about one result."""
    label = tool_words(name)
    value = parsed(text)
    arguments = tool_input if isinstance(tool_input, Mapping) else {}
    if (memory := said_memory(name, tool_input, text, failed=failed)) is not None:
        return memory
    if name == STATUS_TOOL and not failed and (status := said_status(value)) is not None:
        return status
    if name == CANCEL_TOOL:
        return said_cancel(value, text, failed=failed)
    if (run := said_run(name, value, text, failed=failed)) is not None:
        return run
    if failed:
        reason = _reason(value) or short(text)
        return f"{label.capitalize()} didn't work" + (f": {reason}." if reason else ".")
    if value in (None, "", {}, []):
        return f"{label.capitalize()} is done."
    if not isinstance(value, Mapping):
        return f"{label.capitalize()} said: {short(text)}."
    path = _path(value, arguments)
    lines = _line_count(value)
    verb = name.rsplit(".", 1)[-1].lower()
    if verb.startswith("open") and path:
        return f"I opened {path}" + (f"; it has {lines} lines." if lines is not None else ".")
    if verb.startswith("read") and path:
        return f"I read {path}" + (f"; it has {lines} lines." if lines is not None else ".")
    if value.get("cancelled") is True:
        return "I stopped it."
    facts = [f"{words(str(key))} {_scalar(item)}" for key, item in value.items() if _scalar(item) is not None]
    if not facts:
        return f"{label.capitalize()} answered."
    return short(f"{label.capitalize()}: {', '.join(facts[:4])}") + "."


def _reason(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in ("reason", "message", "error"):
            if isinstance(value.get(key), str) and value[key].strip():
                return short(value[key])
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


def _scalar(item: Any) -> str | None:
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, int | float | str) and str(item).strip():
        return short(str(item))
    return None
