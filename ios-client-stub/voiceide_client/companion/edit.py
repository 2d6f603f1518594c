"""``editor.replaceText`` as the companion applies it: lines ``startLine`` to ``endLine`` (1-based,
both included) of a text file replaced by ``text``, the file's line endings kept.

* ``endLine`` may be ``startLine - 1``: nothing is replaced and ``text`` is inserted before
  ``startLine`` (``startLine`` one past the last line appends).
* An empty ``text`` deletes the lines.
* ``text`` becomes whole lines, ended as the file's lines are (``\\r\\n`` where the file uses it);
  a file without a final line ending has none after the edit either.
* The file is written whole to a temporary file beside it and moved over it (never half-written),
  with its permissions kept; a symbolic link inside the workspace stays a link.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voiceide_client.tools.router import ToolError

MAX_EDIT_BYTES = 4 * 1024 * 1024
_LINES = re.compile(r"[^\n]*\n|[^\n]+$")


@dataclass(frozen=True)
class LineRange:
    start: int
    end: int

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> LineRange:
        start, end = arguments.get("startLine"), arguments.get("endLine")
        for name, value in (("startLine", start), ("endLine", end)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ToolError(f"{name} must be a whole line number (lines count from 1)")
        assert isinstance(start, int) and isinstance(end, int)
        if start < 1:
            raise ToolError(f"startLine {start}: lines count from 1")
        if end < start - 1:
            raise ToolError(f"endLine {end} is before startLine {start}")
        return cls(start, end)


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its own ending (the last one may have none)."""
    return _LINES.findall(text)


def replace_lines(text: str, lines: LineRange, new_text: str, name: str) -> tuple[str, dict[str, Any]]:
    """``text`` with ``lines`` replaced by ``new_text``, and what was done (for the result)."""
    old = split_lines(text)
    count = len(old)
    if lines.start > count + 1:
        raise ToolError(f"startLine {lines.start} is past the end of {name} ({_lines(count)})")
    if lines.end > count:
        raise ToolError(f"endLine {lines.end} is past the end of {name} ({_lines(count)})")
    ending = "\r\n" if old and old[0].endswith("\r\n") else "\n"
    new = new_text.replace("\r\n", "\n").replace("\n", ending) if ending == "\r\n" else new_text
    if new and not new.endswith("\n"):
        new += ending
    before, after = old[: lines.start - 1], old[lines.end :]
    if new and before and not before[-1].endswith("\n"):  # appending after a last line without ending
        before[-1] += ending
    result = "".join([*before, new, *after])
    if not after and old and not old[-1].endswith("\n") and result.endswith("\n"):
        # the edit reaches the end of a file without a final line ending: it still has none
        result = result.removesuffix(ending) if result.endswith(ending) else result[:-1]
    inserted = len(split_lines(new))
    done = {
        "path": name,
        "startLine": lines.start,
        "endLine": lines.end,
        "removedLines": lines.end - lines.start + 1,
        "insertedLines": inserted,
        "lines": len(split_lines(result)),
    }
    return result, done


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


def read_text_file(path: Path, name: str) -> str:
    """A UTF-8 text file's text; ToolError for one too big, binary or not UTF-8 (never guessed at:
    an edit must not change bytes it did not mean to)."""
    size = path.stat().st_size
    if size > MAX_EDIT_BYTES:
        raise ToolError(_too_big(name, size))
    with path.open("rb") as source:
        data = source.read(MAX_EDIT_BYTES + 1)  # never more: the file may have grown since
    if len(data) > MAX_EDIT_BYTES:
        raise ToolError(_too_big(name, path.stat().st_size))
    if b"\0" in data:
        raise ToolError(f"{name} is not a text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{name} is not UTF-8 text; the companion edits only UTF-8 files") from None


def _too_big(name: str, size: int) -> str:
    return (
        f"{name} is {size:,} bytes: the companion edits files up to {MAX_EDIT_BYTES:,} bytes "
        "(it reads them whole); edit this one yourself"
    )


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file in the same folder, permissions kept."""
    mode = stat.S_IMODE(path.stat().st_mode)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".voiceide", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
