"""What the devices see of the person's project, kept and given to the model.

A device's ``workspaceContext`` is kept rendered, per device, bounded (``MAX_CONTEXT_CHARS``, about
600 tokens): the latest replaces the one before; nothing is posted. Its ``workspaceNames`` parts
are stored beside the state (one item a part, like a tool result's parts) and the set is used once
all its parts are in; the first part's names give the voice devices their recognizer's phrases
(``vocabulary``).

At each model request the conductor adds blocks after the cached prefix (system prompt, tools and
the history up to the newest message stay cached): the devices' contexts, the files the
conversation's tool calls touched lately, the background tasks running, and the names the newest
transcript's words may have meant. Each block is a text ``<context kind="…">`` … ``</context>``
on the newest user message of the request only; the stored history never holds it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shared.core import devices
from shared.core.decision import Decision, Outcome, PartWrite
from shared.core.messages import Message
from shared.core.state import NameSet, SessionState
from shared.core.wrapper import WRAPPER_TOOL_NAME
from shared.wire.workspace import MAX_VOCABULARY, Vocabulary, WorkspaceContext, WorkspaceNames

if TYPE_CHECKING:  # the name matching, imported where names are read: only a companion sends them
    from shared.core.identifiers import KnownName, NameMatch

MAX_CONTEXT_CHARS = 2_400
MAX_SELECTION_CHARS = 1_200
MAX_RECENT_FILES = 8
NAMES_PART_PREFIX = "names:"
CONTEXT_OPEN = '<context kind="{kind}">'
CONTEXT_CLOSE = "</context>"


def names_key(set_id: str) -> str:
    """The stored parts' key of a names set (beside a tool result's parts)."""
    return f"{NAMES_PART_PREFIX}{set_id}"


# ---- kept --------------------------------------------------------------------------------------


def render(context: WorkspaceContext) -> str:
    """The context as the model reads it: short lines, bounded; the selection's text is cut first."""
    lines = [f"workspace: {context.workspace}"]
    if context.branch:
        lines.append(f"branch: {context.branch}")
    if context.open_file is not None:
        opened = context.open_file
        where = f", line {opened.cursor_line}" if opened.cursor_line else ""
        language = f" ({opened.language})" if opened.language else ""
        lines.append(f"open file: {opened.path}{language}{where}")
    if context.selection is not None:
        chosen = context.selection
        lines.append(f"selection: {chosen.path} lines {chosen.start_line}-{chosen.end_line}")
        if chosen.text:
            text = chosen.text[:MAX_SELECTION_CHARS]
            cut = " (cut)" if len(chosen.text) > MAX_SELECTION_CHARS else ""
            lines.append(f"selected text{cut}:\n{text}")
    if context.changed_files:
        lines.append("changed files: " + ", ".join(context.changed_files))
    for diagnostic in context.diagnostics:
        lines.append(f"{diagnostic.severity}: {diagnostic.path}:{diagnostic.line}: {diagnostic.message}")
    if context.running_tasks:
        lines.append("running: " + ", ".join(context.running_tasks))
    text = "\n".join(lines)
    return text if len(text) <= MAX_CONTEXT_CHARS else text[: MAX_CONTEXT_CHARS - 6] + "\n(cut)"


def _sender(state: SessionState, connection_id: str) -> str:
    return devices.device_of(state, connection_id) or state.device_id


def handle_context(state: SessionState, connection_id: str, context: WorkspaceContext) -> Outcome:
    """Keep the device's latest context (nothing changes when it says the same again)."""
    device = _sender(state, connection_id)
    rendered = render(context)
    decision = Decision(state)
    if state.workspace.get(device) != rendered:
        decision.state.workspace = {**state.workspace, device: rendered}
        shown = context.model_copy(update={"device": devices.name_of(state, device)})
        decision.unnumbered.append(shown)  # to the displays (``namesHeard``'s route)
    return decision.outcome()


def names_of(files_text: str) -> list[KnownName]:
    """A stored part's names, in their order."""
    from shared.core.identifiers import KnownName

    return [
        KnownName(name=name, path=entry["path"])
        for entry in json.loads(files_text)
        for name in entry["names"]
        if isinstance(name, str)
    ]


def handle_names(state: SessionState, connection_id: str, part: WorkspaceNames) -> Outcome:
    """Store one part of a device's names; the set replaces the device's last complete one when
    all its parts are in. The first part's names become the voice devices' vocabulary."""
    device = _sender(state, connection_id)
    decision = Decision(state)
    kept = decision.state.name_sets.get(device, NameSet())
    if part.part >= part.parts or (kept.complete == part.set_id):
        return decision.outcome()  # a part out of its set's range, or of a set already complete
    if kept.arriving != part.set_id:
        if kept.arriving is not None and kept.received:
            decision.parts_dropped.append((names_key(kept.arriving), kept.arriving_parts))
        kept = kept.model_copy(update={"arriving": part.set_id, "arriving_parts": part.parts, "received": []})
    files = json.dumps([{"path": entry.path, "names": list(entry.names)} for entry in part.files], ensure_ascii=False)
    decision.part_writes.append(PartWrite(names_key(part.set_id), part.part, files))
    received = sorted({*kept.received, part.part})
    kept = kept.model_copy(update={"received": received})
    if len(received) == kept.arriving_parts:
        if kept.complete is not None:
            decision.parts_dropped.append((names_key(kept.complete), kept.complete_parts))
        kept = NameSet(complete=part.set_id, complete_parts=part.parts)
    decision.state.name_sets = {**decision.state.name_sets, device: kept}
    if part.part == 0:
        from shared.core.identifiers import vocabulary

        phrases = vocabulary(names_of(files), limit=MAX_VOCABULARY)
        if phrases:
            decision.unnumbered.append(Vocabulary(phrases=tuple(phrases)))
    return decision.outcome()


def first_parts(state: SessionState) -> list[str]:
    """The keys of the first part of each device's names: what the voice devices' phrases come from."""
    keys = []
    for kept in state.name_sets.values():
        if kept.complete is not None:
            keys.append(names_key(kept.complete))
        elif kept.arriving is not None and 0 in kept.received:
            keys.append(names_key(kept.arriving))
    return keys


def vocabulary_of(first_parts_text: list[str]) -> Vocabulary | None:
    """The phrases of the devices' first parts (their most relevant names), at most ``MAX_VOCABULARY``."""
    from shared.core.identifiers import vocabulary

    names = [name for text in first_parts_text for name in names_of(text)]
    phrases = vocabulary(names, limit=MAX_VOCABULARY)
    return Vocabulary(phrases=tuple(phrases)) if phrases else None


def complete_sets(state: SessionState) -> list[tuple[str, int]]:
    """The names sets to match against: (set id, parts), one per device with a complete set."""
    return [(kept.complete, kept.complete_parts) for kept in state.name_sets.values() if kept.complete is not None]


# ---- given to the model ---------------------------------------------------------------------------


def _block(kind: str, text: str) -> str:
    return f"{CONTEXT_OPEN.format(kind=kind)}\n{text}\n{CONTEXT_CLOSE}"


def recent_files(messages: Sequence[Message]) -> list[str]:
    """The files the conversation's tool calls named lately (newest first, distinct)."""
    found: list[str] = []
    for message in reversed(messages):
        for block in reversed(message.get("content", [])):
            use = block.get("toolUse") if isinstance(block, dict) else None
            if not isinstance(use, dict) or use.get("name") != WRAPPER_TOOL_NAME:
                continue
            arguments = (use.get("input") or {}).get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            path = arguments.get("path") if isinstance(arguments, dict) else None
            if isinstance(path, str) and path and path not in found:
                found.append(path)
            if len(found) >= MAX_RECENT_FILES:
                return found
    return found


def heard_block(matches: Sequence[NameMatch]) -> str | None:
    if not matches:
        return None
    lines = [
        f"heard '{match.heard}': `{match.name}`" + (f" in {match.path}" if match.path else "") for match in matches
    ]
    return _block("names heard", "The person's words may name these (their words are as heard):\n" + "\n".join(lines))


def blocks(state: SessionState, messages: Sequence[Message], matches: Sequence[NameMatch] = ()) -> list[str]:
    """The blocks the model's next request carries after its cached prefix. A session whose devices
    send no context (switched off, or an app that never does) gets none: its requests are as before."""
    found: list[str] = []
    present = {state.device_id, *(entry.device_id for entry in state.devices)}
    for device, rendered in sorted(state.workspace.items()):
        if device in present:  # a device's own name may hold a folder's path: the model never sees it
            found.append(_block("workspace", rendered))
    heard = heard_block(matches)
    if not found:
        return [heard] if heard is not None else []
    files = recent_files(messages)
    if files:
        found.append(_block("files discussed", ", ".join(files)))
    running = [job.name for job in state.background]
    if running:
        found.append(_block("running tasks", ", ".join(running)))
    if heard is not None:
        found.append(heard)
    return found


def newest_words(messages: Sequence[Message]) -> str | None:
    """The newest message's words when it is a person's transcript (not a tool result)."""
    if not messages or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content", [])
    if any(isinstance(block, dict) and "toolResult" in block for block in content):
        return None
    texts = [block["text"] for block in content if isinstance(block, dict) and isinstance(block.get("text"), str)]
    return " ".join(texts) or None
