"""The problems a build or test run's output names, as ``workspaceContext`` diagnostics.

Three shapes are read, line by line:

* ``path:line[:col]: error|warning|note: message`` (clang, swiftc, gcc, mypy, …; ``fatal error``
  is an error), and tsc's ``path(line,col): error TS2322: message``;
* a Python traceback: one diagnostic, at its last frame (``File "path", line N``) inside the
  folder, with the exception's line as its message;
* pytest's ``path:line: SomeError`` (the line where a test failed).

Only files inside the folder that exist are kept, made relative to it; the first
``MAX_DIAGNOSTICS``, each once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from shared.wire.workspace import MAX_DIAGNOSTIC_MESSAGE, MAX_DIAGNOSTICS, Diagnostic

from .workspace_files import inside

_COMPILER = re.compile(
    r"^(?P<path>[^\s:(][^:]*?):(?P<line>\d+)(?::\d+)?:\s*(?P<severity>fatal error|error|warning|note|info)"
    r"(?:\[[^\]]*\])?:\s*(?P<message>.+)$",
    re.IGNORECASE,
)
_TSC = re.compile(
    r"^(?P<path>[^\s(][^(]*?)\((?P<line>\d+),\d+\):\s*(?P<severity>error|warning)\s*(?P<message>.+)$",
    re.IGNORECASE,
)
_PYTEST = re.compile(r"^(?P<path>[^\s:][^:]*?\.py):(?P<line>\d+):\s*(?P<message>\w*(?:Error|Exception|Failed)\b.*)$")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_TRACEBACK = "Traceback (most recent call last):"
_SEVERITIES = {"fatal error": "error", "error": "error", "warning": "warning", "note": "info", "info": "info"}


def parse_diagnostics(output: str, root: Path) -> list[Diagnostic]:
    """The first ``MAX_DIAGNOSTICS`` problems ``output`` names in files of ``root``."""
    found: list[Diagnostic] = []
    seen: set[tuple[str, int, str]] = set()
    for candidates in _problems(output.splitlines()):
        # a traceback's frames, deepest first: the first one inside the folder is the problem's place
        place = next((problem for problem in candidates if _ours(root, problem[0])), None)
        if place is None:
            continue
        path, line, severity, message = place
        relative = inside(root, path) or path
        key = (relative, line, message)
        if key in seen:
            continue
        try:
            diagnostic = Diagnostic(
                path=relative, line=line, severity=severity, message=message.strip()[:MAX_DIAGNOSTIC_MESSAGE]
            )
        except ValidationError:
            continue
        seen.add(key)
        found.append(diagnostic)
        if len(found) >= MAX_DIAGNOSTICS:
            break
    return found


def _ours(root: Path, path: str) -> bool:
    relative = inside(root, path)
    return relative is not None and (root / relative).is_file()


Problem = tuple[str, int, str, str]
"""(path, line, severity, message)"""


def _problems(lines: list[str]) -> Iterator[list[Problem]]:
    """Each problem, in the order of the output, as the places it may be (a traceback's frames,
    deepest first; one place otherwise)."""
    frames: list[tuple[str, int]] | None = None  # the frames of the traceback being read
    for text in lines:
        if text.strip() == _TRACEBACK:
            frames = []
            continue
        if frames is not None:
            frame = _FRAME.match(text)
            if frame is not None:
                frames.append((frame["path"], int(frame["line"])))
                continue
            if text.startswith((" ", "\t")) or not text.strip():
                continue  # a frame's source line
            # the exception's line ends the traceback: its deepest frame comes first here
            yield [(path, line, "error", text.strip()) for path, line in reversed(frames)]
            frames = None
            continue
        match = _COMPILER.match(text) or _TSC.match(text.strip())
        if match is not None:
            severity = _SEVERITIES.get(match["severity"].lower(), "error")
            yield [(match["path"], int(match["line"]), severity, match["message"])]
            continue
        failed = _PYTEST.match(text)
        if failed is not None:
            yield [(failed["path"], int(failed["line"]), "error", failed["message"])]
