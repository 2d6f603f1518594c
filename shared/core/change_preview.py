"""The card of a held change shows the lines it replaces, as the device that will run it has them.

Only the device that runs an edit knows the file. So when an ``editor.replaceText`` is held for the
person's yes, the conductor asks that device for the file first: a call of its own,
``editor.readFile {"path": …}`` with a ``conductor-preview-`` id, sent to that device only. The
card (a diff: the lines as they are now, then the new ones) goes out when its answer comes; the
spoken question does not wait for it. A device that does not run ``editor.readFile``, or an edit
whose arguments make no sense, gets the card at once, saying the lines were not read. A preview
answered after the change was (yes, no, a tap, a deadline) changes nothing. Pure.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from json import decoder
from typing import Any

from shared.core import devices
from shared.core.confirmation_words import REPLACE_TEXT, change_card, describe_change, replaced_range
from shared.core.decision import CoreSettings, Decision, Outcome
from shared.core.speakable import card_patch
from shared.core.state import ModelCall, SessionState
from shared.core.wrapper import OWN_CALL_PREFIX
from shared.wire.protocol import AssistantUIPatch, ToolCall, ToolResult

PREVIEW_PREFIX = f"{OWN_CALL_PREFIX}preview-"
READ_TOOL = "editor.readFile"
_TAIL_TRIM = 8  # characters a cut may leave of an escape sequence at the end of a part
# json's string reader: (text, index after the opening quote) -> (the string, the index after it);
# public in json.decoder, though typeshed leaves it out
_scanstring: Callable[[str, int], tuple[str, int]] = decoder.scanstring  # type: ignore[attr-defined]


def is_preview(call_id: str) -> bool:
    return call_id.startswith(PREVIEW_PREFIX)


def show_or_ask(decision: Decision, call: ModelCall, arguments: dict[str, Any], settings: CoreSettings) -> None:
    """The card of a held change: asked of the device that runs it, or shown now without the
    lines it replaces when that device cannot be asked."""
    device = call.device or decision.state.device_id
    edited = replaced_range(arguments) if call.name == REPLACE_TEXT else None
    if edited is not None and devices.runs_tool(decision.state, device, READ_TOOL, settings):
        call.preview = f"{PREVIEW_PREFIX}{uuid.uuid4().hex[:16]}"
        decision.send(ToolCall(call_id=call.preview, name=READ_TOOL, arguments=json.dumps({"path": edited[0]})))
        return
    decision.send(AssistantUIPatch(patch=card_patch(change_card(describe_change(call.name, arguments)))))


def handle_preview(state: SessionState, result: ToolResult) -> Outcome:
    """The device's answer to a preview: the card, with the lines the change replaces (from the
    first part when the file came in parts)."""
    decision = Decision(state)
    if result.part not in (None, 0):
        return decision.outcome()
    call = devices.previewed(decision.state, result.call_id)
    if call is None:
        return decision.outcome()
    call.preview = None
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        arguments = {}
    edited = replaced_range(arguments) if isinstance(arguments, dict) else None
    current = _current_lines(result, edited) if edited is not None else None
    change = describe_change(call.name, arguments if isinstance(arguments, dict) else {}, current)
    decision.send(AssistantUIPatch(patch=card_patch(change_card(change))))
    return decision.outcome()


def _current_lines(result: ToolResult, edited: tuple[str, int, int]) -> list[str] | str:
    """The replaced lines as the device read them, or why they are not shown."""
    path, start, end = edited
    if result.error is not None:
        return f"{path} could not be read: {result.error}"
    text, whole = _file_text(result.result or "", cut=result.part is not None)
    if text is None:
        return f"{path} could not be read"
    lines = text.splitlines()
    if not whole and lines and not text.endswith("\n"):
        lines = lines[:-1]  # the last line read may go on past the cut
    if start > len(lines):
        if whole:
            return f"{path} has {len(lines)} line{'s' * (len(lines) != 1)}: line {start} is past its end"
        return f"line {start} is further into {path} than the device sent"
    shown = lines[start - 1 : end]
    if end > len(lines) and not whole:
        shown.append(f"… (lines {len(lines) + 1} on are further than the device sent)")
    return shown


def _file_text(raw: str, *, cut: bool) -> tuple[str | None, bool]:
    """The ``text`` of a read's result and whether it is the whole file. The result is JSON
    (``{"path", "text", "truncated"}``), or plain text from an app that answers with the text
    itself; a first part ``cut`` anywhere gives the text up to the cut."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"], not value.get("truncated")
    if value is not None or not cut:
        return (raw, True) if value is None else (None, False)
    marker = raw.find('"text":')
    if marker < 0:
        return None, False
    begin = raw.find('"', marker + len('"text":'))
    if begin < 0:
        return None, False
    for trim in range(_TAIL_TRIM):
        try:
            text, _end = _scanstring(raw[: len(raw) - trim] + '"', begin + 1)
        except ValueError:
            continue
        return text, False
    return None, False
