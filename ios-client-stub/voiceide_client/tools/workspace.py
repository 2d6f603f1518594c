"""The catalog's IDE tools, simulated over a folder on disk (the app's open project).

They let the client stub answer the model's tool calls with real results during development:
files are opened and searched for real; edits are refused (the stub never changes files); builds
and test runs are refused, or simulated when ``build_seconds`` is given: they succeed after that
long, as a real build would while the conversation goes on. Paths are confined to the workspace.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .file_reads import count_lines, read_head
from .router import ToolError, ToolHandler

MAX_READ_CHARS = 8000
MAX_MATCHES = 20
MAX_LISTED = 200
MAX_FILE_BYTES = 512 * 1024
MAX_OPEN_BYTES = 4 * 1024 * 1024  # the lines of at most this much of a file are counted
SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", "cdk.out", ".hypothesis", ".pytest_cache"}


class Workspace:
    def __init__(
        self,
        root: Path,
        on_card: Callable[[dict[str, Any]], None] | None = None,
        *,
        build_seconds: float | None = None,
    ) -> None:
        self.root = root.resolve()
        self._on_card = on_card
        self.build_seconds = build_seconds

    def resolve(self, relative: object) -> Path:
        if not isinstance(relative, str) or not relative.strip():
            raise ToolError("a path is required")
        path = (self.root / relative).resolve()
        if not self._inside(path):
            raise ToolError(f"{relative} is outside the workspace")
        return path

    def _inside(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def _text_files(self) -> list[Path]:
        """The files a search reads: not in the skipped folders, not behind a link leading out of
        the workspace, not too big, and readable."""
        found: list[Path] = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
            for name in sorted(files):
                path = Path(folder) / name
                try:
                    if path.is_symlink() and not self._inside(path.resolve()):
                        continue
                    if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
                        found.append(path)
                except OSError:
                    continue
        return found

    async def open_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        lines, more = count_lines(path, MAX_OPEN_BYTES)
        opened: dict[str, Any] = {"opened": str(path.relative_to(self.root)), "line": args.get("line", 1)}
        opened["lines"] = lines
        if more:  # the lines of its first MAX_OPEN_BYTES: a file of gigabytes is never read whole
            opened |= {"truncated": True, "bytes": path.stat().st_size}
        return opened

    async def read_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        data, more = read_head(path, MAX_READ_CHARS)
        text = data.decode("utf-8", errors="replace")
        return {
            "path": str(path.relative_to(self.root)),
            "text": text[:MAX_READ_CHARS],
            "truncated": len(text) > MAX_READ_CHARS or more,
        }

    async def search(self, args: dict[str, Any]) -> dict[str, Any]:
        query = args.get("query")
        if not isinstance(query, str) or not query:
            raise ToolError("a query is required")
        matches: list[str] = []
        for path in await asyncio.to_thread(self._text_files):
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(lines, start=1):
                if query.lower() in line.lower():
                    matches.append(f"{path.relative_to(self.root)}:{number}: {line.strip()[:120]}")
                    if len(matches) >= MAX_MATCHES:
                        return {"query": query, "matches": matches, "truncated": True}
        return {"query": query, "matches": matches, "truncated": False}

    async def list_files(self, args: dict[str, Any]) -> dict[str, Any]:
        folder = self.resolve(args.get("path") or ".")
        if not folder.is_dir():
            raise ToolError(f"no such folder: {args.get('path')}")
        entries = sorted(
            f"{entry.name}/" if entry.is_dir() else entry.name
            for entry in folder.iterdir()
            if entry.name not in SKIPPED_DIRS
        )
        return {"path": str(folder.relative_to(self.root)) or ".", "entries": entries[:MAX_LISTED]}

    async def git_status(self, args: dict[str, Any]) -> dict[str, Any]:
        """The branch and this folder's changes only (paths relative to it), even when the folder
        sits inside a larger repository."""
        prefix = (await self._git_output("rev-parse", "--show-prefix")).strip()
        lines = (
            await self._git_output("status", "--porcelain", "--branch", "--untracked-files=all", "--", ".")
        ).splitlines()
        branch = lines[0].removeprefix("## ") if lines and lines[0].startswith("## ") else ""
        changed = [f"{line[:3]}{line[3:].removeprefix(prefix)}" for line in lines if not line.startswith("## ")]
        return {"branch": branch, "changed": changed[:MAX_LISTED]}

    async def _git_output(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            "git", "-C", str(self.root), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await process.communicate()
        if process.returncode != 0:
            raise ToolError(err.decode(errors="replace").strip() or "not a git repository")
        return out.decode(errors="replace")

    async def show_card(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._on_card is not None:
            self._on_card(args)
        return {"shown": True}

    async def refuse(self, args: dict[str, Any]) -> dict[str, Any]:
        raise ToolError("the client stub does not build, test or edit; the iOS app does")

    async def simulated_build(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.build_seconds is None:
            return await self.refuse(args)
        await asyncio.sleep(self.build_seconds)
        return {"status": "succeeded", "warnings": 0, "seconds": self.build_seconds, "simulated": True}

    async def simulated_tests(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.build_seconds is None:
            return await self.refuse(args)
        await asyncio.sleep(self.build_seconds)
        return {"passed": 42, "failed": 0, "seconds": self.build_seconds, "simulated": True}

    def handlers(self) -> dict[str, ToolHandler]:
        return {
            "editor.openFile": self.open_file,
            "editor.readFile": self.read_file,
            "editor.replaceText": self.refuse,
            "project.search": self.search,
            "project.listFiles": self.list_files,
            "build.run": self.simulated_build,
            "tests.run": self.simulated_tests,
            "git.status": self.git_status,
            "ui.showCard": self.show_card,
        }
