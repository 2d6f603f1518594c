"""The workspace's files as the context and the name index see them, and ``git`` run for them.

* **Which files.** In a git repository, ``git ls-files -co --exclude-standard``: the tracked files
  and the untracked ones not ignored. Elsewhere, a walk that skips dot-folders and the common
  build, dependency and cache folders. Both keep regular files inside the folder (a link leading
  out is skipped), at most ``MAX_FILES``, each as a path relative to the folder with ``/``.
* **Git**, run synchronously (from a thread): its own time limit, the repository's fsmonitor hook
  off, no prompt, no optional lock (the companion reading never blocks the person's own ``git``).
  Any failure (no git, not a repository, the limit passed) answers None.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from .workspace import GIT_SAFETY

MAX_FILES = 5_000
GIT_TIMEOUT_S = 5.0
MAX_WALKED = 50_000
"""Folder entries a walk looks at, at most (a folder without git full of generated files)."""
WALK_SECONDS = 3.0
SKIPPED_FOLDERS = frozenset(
    {
        "node_modules", "build", "dist", "target", "out", "DerivedData", "Pods", "Carthage", "__pycache__",
        "venv", "env", "cdk.out", "coverage", "vendor", "bin", "obj",
    }
)  # fmt: skip
"""Folders no walk enters (with every dot-folder): what builds, package managers and caches write."""
VENDORED = frozenset({"node_modules", ".venv", "venv", "__pycache__", ".git"})
"""Folders skipped even when git lists their files (untracked and not ignored)."""
LANGUAGES = {
    ".py": "python", ".pyi": "python", ".swift": "swift", ".ts": "typescript", ".tsx": "typescriptreact",
    ".js": "javascript", ".jsx": "javascriptreact", ".mjs": "javascript", ".cjs": "javascript", ".go": "go",
    ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".c": "c", ".h": "c", ".cc": "cpp",
    ".cpp": "cpp", ".hpp": "cpp", ".m": "objective-c", ".mm": "objective-cpp", ".rb": "ruby", ".php": "php",
    ".cs": "csharp", ".scala": "scala", ".sh": "shellscript", ".bash": "shellscript", ".zsh": "shellscript",
    ".md": "markdown", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".html": "html",
    ".css": "css", ".scss": "scss", ".sql": "sql", ".xml": "xml", ".dart": "dart", ".lua": "lua",
}  # fmt: skip


def language_of(path: str) -> str | None:
    """The language of a file by its extension (VS Code's language ids), None when unknown."""
    name = PurePosixPath(path).name
    if name in ("Makefile", "makefile", "GNUmakefile"):
        return "makefile"
    if name == "Dockerfile":
        return "dockerfile"
    return LANGUAGES.get(PurePosixPath(name).suffix.lower())


def run_git(root: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str | None:
    """``git -C root args…``'s output, or None when it fails or takes longer than ``timeout``."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", *GIT_SAFETY, "-C", str(root), *args],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace")


def git_folder(root: Path, timeout: float = GIT_TIMEOUT_S) -> Path | None:
    """The repository's git folder (where ``HEAD`` and ``index`` are), None outside a repository."""
    out = run_git(root, "rev-parse", "--absolute-git-dir", timeout=timeout)
    return Path(out.strip()) if out and out.strip() else None


def listed_files(root: Path, *, limit: int = MAX_FILES, timeout: float = GIT_TIMEOUT_S) -> list[str]:
    """The workspace's files (see the module's docstring), at most ``limit``."""
    root = root.resolve()
    listed = run_git(root, "ls-files", "-z", "-co", "--exclude-standard", timeout=timeout)
    names = _git_listed(listed) if listed is not None else _walked(root)
    return _kept(root, names, limit)


def _git_listed(listed: str) -> Iterable[str]:
    seen: set[str] = set()
    for name in listed.split("\0"):
        if name and name not in seen and not VENDORED.intersection(name.split("/")[:-1]):
            seen.add(name)
            yield name


def _walked(root: Path) -> Iterable[str]:
    deadline = time.monotonic() + WALK_SECONDS
    walked = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in SKIPPED_FOLDERS and not d.endswith(".egg-info")
        )
        walked += len(dirs) + len(files)
        if walked > MAX_WALKED or time.monotonic() > deadline:
            return
        relative = Path(folder).relative_to(root).as_posix()
        for name in sorted(files):
            yield name if relative == "." else f"{relative}/{name}"


def _kept(root: Path, names: Iterable[str], limit: int) -> list[str]:
    kept: list[str] = []
    for name in names:
        if len(kept) >= limit:
            break
        if ".." in name.split("/"):
            continue
        path = root / name
        try:
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                continue
            if path.is_file():
                kept.append(name)
        except OSError:
            continue
    return kept


def inside(root: Path, path: str) -> str | None:
    """``path`` (relative to the folder, or absolute) as a path relative to the folder with ``/``;
    None when it leaves the folder (``..``, another place, a link leading out)."""
    root = root.resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        if path.startswith("~") or ".." in PurePosixPath(path.replace("\\", "/")).parts:
            return None
        candidate = root / path
    normal = Path(os.path.normpath(candidate))
    try:
        resolved = normal.resolve()
    except (OSError, RuntimeError):
        return None
    if not resolved.is_relative_to(root):
        return None
    kept = normal if normal.is_relative_to(root) else resolved  # a link from elsewhere into the folder
    return None if kept == root else kept.relative_to(root).as_posix()
