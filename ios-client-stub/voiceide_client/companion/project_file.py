"""``.voiceide.toml``: the commands a project lets the desktop companion run, and nothing else.

The file sits at the top of the workspace and names at most two commands and their time limit::

    build = "swift build"          # what build.run runs
    test = "swift test"            # what tests.run runs
    timeout_seconds = 600          # optional: the time limit of each run (600 s by default)

A command is a string (split as a shell would split it, with ``shlex``, but never run by a shell:
no pipes, no ``&&``, no variables) or an array of strings (the program and its arguments). The file
is read again before every run, so an edit takes effect on the next one. A key the file does not
know is refused (a typo must not silently disable a command), and so is a file that is not inside
the workspace (a symbolic link out of it).
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT_FILE = ".voiceide.toml"
COMMAND_KEYS = ("build", "test")
TIMEOUT_KEY = "timeout_seconds"
DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 3540.0
"""A run's limit, at most: with the margin to stop it and send the result, within the protocol's
longest tool deadline (3,600 s)."""
MAX_FILE_BYTES = 64 * 1024
EXAMPLES = {"build": "swift build", "test": "swift test"}


class ProjectFileError(ValueError):
    """The file exists but cannot be used; the message says where and how to mend it."""


@dataclass(frozen=True)
class ProjectFile:
    """What a workspace's ``.voiceide.toml`` says: each command as the program and its arguments."""

    path: Path
    commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    timeout_seconds: float = DEFAULT_TIMEOUT_S

    def command(self, key: str) -> tuple[str, ...] | None:
        return self.commands.get(key)


def missing_command(root: Path, key: str) -> str:
    """What to put in the file when it does not name ``key``'s command (the error a tool answers)."""
    where = root / PROJECT_FILE
    return (
        f"no {key} command: the companion runs only what {where} names; put "
        f'{key} = "{EXAMPLES.get(key, "…")}" (the command that {_purpose(key)} this project) in it'
    )


def _purpose(key: str) -> str:
    return {"build": "builds", "test": "runs the tests of"}.get(key, "runs")


def load_project_file(root: Path) -> ProjectFile | None:
    """The workspace's project file (None when there is none); ProjectFileError when it is unusable."""
    root = root.resolve()
    path = root / PROJECT_FILE
    if not path.exists() and not path.is_symlink():
        return None
    real = path.resolve()
    if real.parent != root and root not in real.parents:
        raise ProjectFileError(f"{path} leads outside the workspace; the companion reads it only inside")
    if not real.is_file():
        raise ProjectFileError(f"{path} is not a file")
    data = real.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise ProjectFileError(f"{path} is {len(data):,} bytes; a project file has at most {MAX_FILE_BYTES:,}")
    try:
        values = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProjectFileError(f"{path} is not valid TOML: {exc}") from None
    return _checked(path, values)


def _checked(path: Path, values: dict[str, Any]) -> ProjectFile:
    known = (*COMMAND_KEYS, TIMEOUT_KEY)
    for key in values:
        if key not in known:
            raise ProjectFileError(f"{path}: unknown key {key!r} (the keys are {', '.join(known)})")
    commands: dict[str, tuple[str, ...]] = {}
    for key in COMMAND_KEYS:
        if key in values:
            commands[key] = _command(path, key, values[key])
    timeout = values.get(TIMEOUT_KEY, DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 1 <= timeout <= MAX_TIMEOUT_S:
        raise ProjectFileError(f"{path}: {TIMEOUT_KEY} must be a number of seconds from 1 to {MAX_TIMEOUT_S:g}")
    return ProjectFile(path=path, commands=commands, timeout_seconds=float(timeout))


def _command(path: Path, key: str, value: Any) -> tuple[str, ...]:
    example = EXAMPLES.get(key, "…")
    if isinstance(value, str):
        try:
            argv = tuple(shlex.split(value))
        except ValueError as exc:
            raise ProjectFileError(f"{path}: {key} cannot be split into words ({exc})") from None
    elif isinstance(value, list) and all(isinstance(word, str) for word in value):
        argv = tuple(value)
    else:
        raise ProjectFileError(f'{path}: {key} must be a command, such as {key} = "{example}"')
    if not argv or not argv[0].strip():
        raise ProjectFileError(f'{path}: {key} is empty; give the command, such as {key} = "{example}"')
    if any("\0" in word for word in argv):
        raise ProjectFileError(f"{path}: {key} holds a NUL character")
    return argv
