"""What the companion sees of its folder now, as a ``workspaceContext``.

* ``workspace``: the folder's name, never its path.
* ``openFile``: the file ``--follow`` names, else the most recently modified of the workspace's
  files (``workspace_files``); its language by its extension; no cursor line (a terminal has none).
* ``branch`` and ``changedFiles``: ``git branch --show-current`` and ``git status --porcelain`` of
  the folder, relative to it, at most ``MAX_CHANGED_FILES``.
* ``diagnostics``: the first problems the last build or test run's output names (``diagnostics``).
* ``runningTasks``: the builds and test runs going on.

Every path is relative to the folder. Each field is gathered on its own, every ``git`` within its
time limit: a field that cannot be had (no git, a limit passed, a file gone) is left out, and the
context is still sent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from shared.wire.workspace import (
    MAX_BRANCH,
    MAX_CHANGED_FILES,
    MAX_PATH,
    MAX_RUNNING_TASKS,
    MAX_TASK_NAME,
    MAX_WORKSPACE_NAME,
    Diagnostic,
    OpenFile,
    RelativePath,
    WorkspaceContext,
)

from .diagnostics import parse_diagnostics
from .workspace_files import GIT_TIMEOUT_S, inside, language_of, listed_files, run_git

logger = logging.getLogger(__name__)
T = TypeVar("T")
_RELATIVE: TypeAdapter[str] = TypeAdapter(RelativePath)


@dataclass(frozen=True)
class Runs:
    """The workspace's builds and test runs: the names of those going on, and the output (its
    problem lines and its end) of the last one that finished."""

    running: tuple[str, ...] = ()
    last_output: str | None = None


def workspace_name(root: Path) -> str:
    """The folder's name as the context names the workspace (no separator, no ``~``)."""
    name = root.resolve().name.replace("/", "_").replace("\\", "_").lstrip("~").strip()
    return name[:MAX_WORKSPACE_NAME] or "workspace"


def gather_context(
    root: Path,
    *,
    follow: str | None = None,
    runs: Runs | None = None,
    files: Sequence[str] | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> WorkspaceContext:
    """The context of ``root`` now. ``files`` (the workspace's files) is listed when not given."""
    root = root.resolve()
    runs = runs or Runs()
    fields: dict[str, Any] = {"workspace": workspace_name(root)}
    opened = _field(lambda: open_file(root, follow, files, timeout))
    if opened is not None:
        fields["open_file"] = opened
    branch = _field(lambda: current_branch(root, timeout))
    if branch:
        fields["branch"] = branch[:MAX_BRANCH]
    changed = _field(lambda: changed_files(root, timeout))
    if changed:
        fields["changed_files"] = tuple(changed)
    problems = _field(lambda: diagnostics_of(root, runs.last_output))
    if problems:
        fields["diagnostics"] = tuple(problems)
    tasks = tuple(name[:MAX_TASK_NAME] for name in runs.running if name)[:MAX_RUNNING_TASKS]
    if tasks:
        fields["running_tasks"] = tasks
    try:
        return WorkspaceContext(**fields)
    except ValidationError:  # a value the wire refuses: the folder's name alone rather than nothing
        logger.debug("the workspace's context was refused; sending its name alone", exc_info=True)
        return WorkspaceContext(workspace=fields["workspace"])


def _field(gather: Callable[[], T]) -> T | None:
    """What ``gather`` finds, or None when it fails (the field is left out, the rest is sent)."""
    try:
        return gather()
    except Exception:
        logger.debug("a field of the workspace's context was left out", exc_info=True)
        return None


def open_file(root: Path, follow: str | None, files: Sequence[str] | None, timeout: float) -> OpenFile | None:
    """The followed file (when it is a file of the folder), else the most recently modified one."""
    path = inside(root, follow) if follow else None
    if path is None or not (root / path).is_file():
        path = most_recent(root, listed_files(root, timeout=timeout) if files is None else files)
    if path is None or len(path) > MAX_PATH:
        return None
    try:
        return OpenFile(path=path, language=language_of(path))
    except ValidationError:
        return None


def most_recent(root: Path, files: Sequence[str]) -> str | None:
    newest: tuple[int, str] | None = None
    for name in files:
        try:
            modified = os.stat(root / name).st_mtime_ns
        except OSError:
            continue
        if newest is None or modified > newest[0]:
            newest = (modified, name)
    return newest[1] if newest is not None else None


def current_branch(root: Path, timeout: float) -> str | None:
    """The branch checked out (before the first commit too); None when detached or not in git."""
    out = run_git(root, "branch", "--show-current", timeout=timeout)
    if out is None:
        return None
    return out.strip() or None


def changed_files(root: Path, timeout: float) -> list[str] | None:
    """The folder's changed files (renamed: the new path), relative to it; None outside git."""
    prefix = run_git(root, "rev-parse", "--show-prefix", timeout=timeout)
    status = run_git(root, "status", "--porcelain", "-z", "--untracked-files=all", "--", ".", timeout=timeout)
    if prefix is None or status is None:
        return None
    prefix = prefix.strip()
    changed: list[str] = []
    entries = status.split("\0")
    while entries and len(changed) < MAX_CHANGED_FILES:
        entry = entries.pop(0)
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if ("R" in code or "C" in code) and entries:
            entries.pop(0)  # the original path follows the new one
        if path.startswith(prefix) and is_relative_path(path[len(prefix) :]):
            changed.append(path[len(prefix) :])
    return changed


def is_relative_path(path: str) -> bool:
    """Whether the wire takes ``path`` as a path of the workspace (a file named ``~x`` is not)."""
    try:
        _RELATIVE.validate_python(path)
    except ValidationError:
        return False
    return True


def diagnostics_of(root: Path, output: str | None) -> list[Diagnostic]:
    return parse_diagnostics(output, root) if output else []
