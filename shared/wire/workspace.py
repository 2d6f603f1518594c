"""What a device sees of the person's project, and the names in it (extensions, ignorable).

``workspaceContext`` (device → conductor): the workspace's name, the open file, the selection,
the branch, changed files, the first diagnostics and running tasks; the latest of each device is
kept. ``workspaceNames`` (device → conductor): the workspace's identifiers grouped by file, in
parts that each fit one 32 KB frame; a set is used once all its parts have arrived.
``vocabulary`` (conductor → voice devices): phrases for the recognizer's custom vocabulary.
``namesHeard`` (conductor → devices): the names a final transcript's words may have meant.

Every path is relative to the workspace: an absolute path (``/…``, ``~…``, ``C:\\…``) or one
leaving it (``..``) is refused, so no home folder ever reaches the conductor or the model.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr

from shared.wire.payload import WirePayload

MAX_PATH = 512
MAX_WORKSPACE_NAME = 100
MAX_SELECTION_TEXT = 4_000
MAX_CHANGED_FILES = 50
MAX_DIAGNOSTICS = 20
MAX_DIAGNOSTIC_MESSAGE = 300
MAX_RUNNING_TASKS = 10
MAX_TASK_NAME = 200
MAX_BRANCH = 200
MAX_NAME = 128
#: a set of names is at most this many parts (frames) and this many names in all
MAX_NAME_PARTS = 8
MAX_NAMES = 5_000
MAX_VOCABULARY = 100
MAX_PHRASE = 100
MAX_MATCHES = 10

_ABSOLUTE = re.compile(r"^(?:[/\\~]|[A-Za-z]:)")


def _relative(path: str) -> str:
    if _ABSOLUTE.match(path):
        raise ValueError("a path is relative to the workspace (no absolute or home path)")
    if ".." in re.split(r"[/\\]", path):
        raise ValueError("a path stays inside the workspace (no '..')")
    return path


RelativePath = Annotated[StrictStr, Field(min_length=1, max_length=MAX_PATH), AfterValidator(_relative)]
Line = Annotated[StrictInt, Field(ge=1, le=10_000_000)]


def _workspace_name(name: str) -> str:
    if "/" in name or "\\" in name or name.startswith("~"):
        raise ValueError("the workspace is named (its folder's name), never given as a path")
    return name


class OpenFile(WirePayload):
    path: RelativePath
    language: StrictStr | None = Field(default=None, max_length=64)
    cursor_line: Line | None = Field(default=None, alias="cursorLine")


class Selection(WirePayload):
    path: RelativePath
    start_line: Line = Field(alias="startLine")
    end_line: Line = Field(alias="endLine")
    text: StrictStr = Field(default="", max_length=MAX_SELECTION_TEXT)


class Diagnostic(WirePayload):
    path: RelativePath
    line: Line
    severity: Literal["error", "warning", "info", "hint"]
    message: StrictStr = Field(max_length=MAX_DIAGNOSTIC_MESSAGE)


class WorkspaceContext(WirePayload):
    """Extension (device → conductor, ignorable): what the device sees of the workspace now."""

    workspace: Annotated[StrictStr, Field(min_length=1, max_length=MAX_WORKSPACE_NAME), AfterValidator(_workspace_name)]
    open_file: OpenFile | None = Field(default=None, alias="openFile")
    selection: Selection | None = None
    branch: StrictStr | None = Field(default=None, max_length=MAX_BRANCH)
    changed_files: tuple[RelativePath, ...] = Field(default=(), alias="changedFiles", max_length=MAX_CHANGED_FILES)
    diagnostics: tuple[Diagnostic, ...] = Field(default=(), max_length=MAX_DIAGNOSTICS)
    running_tasks: tuple[Annotated[StrictStr, Field(min_length=1, max_length=MAX_TASK_NAME)], ...] = Field(
        default=(), alias="runningTasks", max_length=MAX_RUNNING_TASKS
    )
    # Set by the conductor when it forwards a device's context to the displays: that device's name.
    device: StrictStr | None = Field(default=None, max_length=64)


Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME)]


class NamesOfFile(WirePayload):
    path: RelativePath
    names: tuple[Name, ...] = Field(min_length=1, max_length=MAX_NAMES)


class WorkspaceNames(WirePayload):
    """Extension (device → conductor, ignorable): one part of the workspace's names, most relevant
    first. Parts of one set share ``set``; a new set replaces the device's last complete one."""

    set_id: StrictStr = Field(alias="set", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")
    part: Annotated[StrictInt, Field(ge=0, lt=MAX_NAME_PARTS)]
    parts: Annotated[StrictInt, Field(ge=1, le=MAX_NAME_PARTS)]
    files: tuple[NamesOfFile, ...] = Field(default=(), max_length=MAX_NAMES)


class Vocabulary(WirePayload):
    """Extension (conductor → voice devices, unnumbered, ignorable): phrases the recognizer should
    expect (iOS: ``SFSpeechRecognitionRequest.contextualStrings``), most relevant first."""

    phrases: tuple[Annotated[StrictStr, Field(min_length=1, max_length=MAX_PHRASE)], ...] = Field(
        max_length=MAX_VOCABULARY
    )


class NameHeard(WirePayload):
    heard: StrictStr = Field(max_length=MAX_PHRASE * 2)
    name: Name
    path: RelativePath | None = None


class NamesHeard(WirePayload):
    """Extension (conductor → devices, ignorable): names the words of the final transcript
    ``eventId`` may have meant. What the person said is never rewritten; displays show these."""

    event_id: StrictStr | None = Field(default=None, alias="eventId", max_length=128)
    matches: tuple[NameHeard, ...] = Field(max_length=MAX_MATCHES)
