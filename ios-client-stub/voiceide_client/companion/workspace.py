"""The desktop companion's tools over a real folder: read, search, list, edit, git, build, test.

``CompanionWorkspace`` extends the stub's ``Workspace`` (whose behaviour for the plain client is
unchanged) with what a desktop runs for real:

* **Paths stay in the folder.** A path is relative to the workspace: an absolute path, a ``..``
  part, and a path that leads out through a symbolic link are refused; search and listing skip
  links that lead out.
* **Reads are bounded.** No tool reads more of a file than it can use: ``editor.readFile`` the
  bytes of its first 100,000 characters, ``editor.openFile`` counts the lines of the first 4 MB,
  search reads files up to 512 KB, and an edit refuses a file over 4 MB before reading it.
* **``editor.replaceText`` is applied** to the file (``edit``). It is declared with
  ``effects: "changes"``, so the conductor sends the call only after the person said yes. It never
  writes into ``.git``, ``.voiceide`` or ``.voiceide.toml``: what runs is the person's to change.
* **``git.status`` and ``git.diff``** run ``git`` with a time limit, with the repository's
  fsmonitor hook, external diff drivers and text conversions off (``git`` runs nothing the
  repository's configuration names). They show the workspace's folder only, its paths relative to
  it, when it is a folder inside a bigger repository.
* **``build.run`` and ``tests.run``** run the ``build`` and ``test`` commands of the workspace's
  ``.voiceide.toml`` (``project_file``) and nothing else, in the background, with the file's time
  limit and progress sent while they run (``command``). No file or no key: the tool
  answers an error that says what to put in the file.
"""

from __future__ import annotations

import asyncio
import math
import os
import posixpath
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from shared.wire.protocol_tools import DeclaredTool
from voiceide_client.tools.declarations import declared_tools
from voiceide_client.tools.file_reads import count_lines, read_head
from voiceide_client.tools.router import ToolError, ToolHandler
from voiceide_client.tools.workspace import MAX_FILE_BYTES, MAX_MATCHES, Workspace

from .calls import current_call_id
from .command import DEFAULT_PROGRESS_EVERY_S, KILL_GRACE_S, CommandNotFound, run_command, stop_group
from .edit import MAX_EDIT_BYTES, LineRange, read_text_file, replace_lines, write_atomically
from .project_file import (
    DEFAULT_TIMEOUT_S,
    PROJECT_FILE,
    ProjectFile,
    ProjectFileError,
    load_project_file,
    missing_command,
)

SendProgress = Callable[[str, float | None, str], Awaitable[None]]
"""Sends a ``toolProgress`` (callId, fraction, message)."""

MAX_COMPANION_READ_CHARS = 100_000
"""A file's text in ``editor.readFile``: more than one frame holds, so a big file goes in parts."""
MAX_OPEN_BYTES = MAX_EDIT_BYTES
"""``editor.openFile`` counts the lines of this much of a file (more is a file no one reads whole)."""
MAX_DIFF_CHARS = 200_000
MAX_CHANGED = 200
GIT_TIMEOUT_S = 30.0
PROTECTED = (".git", ".voiceide", PROJECT_FILE)
"""Top-level names the companion never writes into: the repository, its own state, what it runs."""
GIT_SAFETY = ("-c", "core.fsmonitor=false", "-c", "core.quotepath=off", "-c", "color.ui=false")
CATALOG_TOOLS = ("editor.openFile", "editor.readFile", "editor.replaceText", "project.search", "project.listFiles")
BACKGROUND_TOOLS = {"build.run": "build", "tests.run": "test"}
DEADLINE_MARGIN_S = 30
"""Beyond a run's time limit, to stop it and send its result before the conductor's deadline."""
GIT_DIFF = DeclaredTool(
    name="git.diff",
    description="Show what changed in the working tree since the last commit (git diff), for the whole "
    "project or for one file or folder",
    arguments={"type": "object", "properties": {"path": {"type": "string"}}},
)


def _protected(name: str) -> bool:
    """Whether a workspace path is the repository's, the companion's own, or the project file
    (compared without case: on a case-insensitive disk ``.GIT/config`` is ``.git/config``)."""
    parts = [part.casefold() for part in PurePosixPath(name).parts]
    return ".git" in parts or (bool(parts) and parts[0] in {PROTECTED[1], PROTECTED[2].casefold()})


class CompanionWorkspace(Workspace):
    """The tools a desktop companion runs over ``root`` (``handlers``, ``declarations``)."""

    def __init__(
        self,
        root: Path,
        *,
        send_progress: SendProgress | None = None,
        progress_every: float = DEFAULT_PROGRESS_EVERY_S,
        kill_grace: float = KILL_GRACE_S,
        git_timeout: float = GIT_TIMEOUT_S,
    ) -> None:
        super().__init__(root)
        self.send_progress = send_progress
        self.progress_every = progress_every
        self.kill_grace = kill_grace
        self.git_timeout = git_timeout
        self.running_tasks: list[str] = []  # the builds and test runs going on, as "build: swift build"
        self.last_output: str | None = None  # the last finished run's problem lines and output's end

    # ---- paths -------------------------------------------------------------------------------

    def resolve(self, relative: object) -> Path:
        if not isinstance(relative, str) or not relative.strip():
            raise ToolError("a path is required")
        if "\0" in relative:
            raise ToolError("a path cannot hold a NUL character")
        if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute() or relative.startswith("~"):
            raise ToolError(f"{relative} is outside the workspace: give a path relative to its folder")
        if ".." in PurePosixPath(relative.replace("\\", "/")).parts:
            raise ToolError(f"{relative} is outside the workspace: '..' is refused")
        path = (self.root / relative).resolve()
        if not self._inside(path):
            raise ToolError(f"{relative} is outside the workspace: it leads out through a symbolic link")
        return path

    def _name(self, path: Path) -> str:
        return str(path.relative_to(self.root)) or "."

    # ---- reading and editing -----------------------------------------------------------------

    async def read_file(self, args: dict[str, Any]) -> dict[str, Any]:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        data, more = read_head(path, MAX_COMPANION_READ_CHARS)
        if b"\0" in data[:8192]:
            raise ToolError(f"{args.get('path')} is not a text file")
        text = data.decode("utf-8", errors="replace")
        return {
            "path": self._name(path),
            "text": text[:MAX_COMPANION_READ_CHARS],
            "truncated": len(text) > MAX_COMPANION_READ_CHARS or more,
        }

    async def open_file(self, args: dict[str, Any]) -> dict[str, Any]:
        """``{"opened", "line", "lines"}``: the lines of the first ``MAX_OPEN_BYTES`` of a bigger file,
        which also answers ``"truncated": true`` and its size in ``bytes``."""
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        lines, more = count_lines(path, MAX_OPEN_BYTES)
        opened: dict[str, Any] = {"opened": self._name(path), "line": args.get("line", 1), "lines": lines}
        if more:
            opened |= {"truncated": True, "bytes": path.stat().st_size}
        return opened

    async def search(self, args: dict[str, Any]) -> dict[str, Any]:
        query = args.get("query")
        if not isinstance(query, str) or not query:
            raise ToolError("a query is required")
        matches, truncated = await asyncio.to_thread(self._search, query)
        return {"query": query, "matches": matches, "truncated": truncated}

    def _search(self, query: str) -> tuple[list[str], bool]:
        """The matching lines (at most ``MAX_MATCHES``): each file read up to ``MAX_FILE_BYTES``, a
        file grown past it since it was listed skipped (never read whole)."""
        wanted = query.lower()
        matches: list[str] = []
        for path in self._text_files():
            try:
                with path.open("rb") as source:
                    data = source.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:
                    continue
                lines = data.decode("utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(lines, start=1):
                if wanted in line.lower():
                    matches.append(f"{path.relative_to(self.root)}:{number}: {line.strip()[:120]}")
                    if len(matches) >= MAX_MATCHES:
                        return matches, True
        return matches, False

    async def replace_text(self, args: dict[str, Any]) -> dict[str, Any]:
        path = self.resolve(args.get("path"))
        name = self._name(path)
        if _protected(name):
            raise ToolError(
                f"the companion does not change {name}: the repository (.git), {PROTECTED[1]} and {PROTECTED[2]} "
                "are yours to edit"
            )
        if not path.is_file():
            raise ToolError(f"no such file: {args.get('path')}")
        text = args.get("text")
        if not isinstance(text, str):
            raise ToolError("text must be a string (the new lines)")
        lines = LineRange.of(args)
        # read, replace and write in one go (a few milliseconds for 4 MB): a cancellation cannot
        # fall between them and leave an edit made but reported as not made
        updated, done = replace_lines(read_text_file(path, name), lines, text, name)
        write_atomically(path, updated)
        return done

    # ---- git ---------------------------------------------------------------------------------

    async def _git(self, *args: str) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            "git", *GIT_SAFETY, "-C", str(self.root), *args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat"},
            start_new_session=True,
        )  # fmt: skip
        try:
            async with asyncio.timeout(self.git_timeout):
                out, err = await process.communicate()
        except TimeoutError:
            await stop_group(process, self.kill_grace)
            raise ToolError(f"git {args[0]} took longer than {self.git_timeout:g} s and was stopped") from None
        except BaseException:
            await stop_group(process, self.kill_grace)
            raise
        assert process.returncode is not None
        return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    async def git_status(self, args: dict[str, Any]) -> dict[str, Any]:
        """The branch and the changed files of the workspace's folder (not of the rest of a bigger
        repository it sits in), paths relative to the folder."""
        code, out, err = await self._git("status", "--porcelain", "--branch", "-z", "--", ".")
        if code != 0:
            raise ToolError(err.strip() or "not a git repository")
        _, prefix, _ = await self._git("rev-parse", "--show-prefix")
        prefix = prefix.strip()
        fields = out.split("\0")
        branch = fields.pop(0).removeprefix("## ") if fields and fields[0].startswith("## ") else ""
        changed: list[str] = []
        while fields:
            entry = fields.pop(0)
            if len(entry) < 4:
                continue
            status, path = entry[:2], _relative(entry[3:], prefix)
            if "R" in status or "C" in status:  # renamed or copied: the original path follows
                path = f"{_relative(fields.pop(0), prefix) if fields else '?'} -> {path}"
            changed.append(f"{status} {path}")
        return {"branch": branch, "changed": changed[:MAX_CHANGED], "truncated": len(changed) > MAX_CHANGED}

    async def git_diff(self, args: dict[str, Any]) -> dict[str, Any]:
        where = args.get("path")
        spec = self._name(self.resolve(where)) if where not in (None, "") else "."
        # --relative: the folder's changes only, with paths relative to it (a folder inside a bigger repository)
        options = ("--no-color", "--no-ext-diff", "--no-textconv", "--relative")
        inside, _, err = await self._git("rev-parse", "--is-inside-work-tree")
        if inside != 0:  # outside a repository, git diff would compare files instead
            raise ToolError(err.strip() or "not a git repository")
        head, _, _ = await self._git("rev-parse", "--verify", "--quiet", "HEAD")
        # against the last commit; with none yet, what is staged, then what is not
        runs = [("HEAD",)] if head == 0 else [("--cached",), ()]
        diff = ""
        for against in runs:
            code, out, err = await self._git("diff", *options, *against, "--", spec)
            if code != 0:
                raise ToolError(err.strip() or "not a git repository")
            diff += out
        return {"path": spec, "diff": diff[:MAX_DIFF_CHARS], "truncated": len(diff) > MAX_DIFF_CHARS}

    # ---- build and tests ---------------------------------------------------------------------

    def project(self) -> ProjectFile | None:
        try:
            return load_project_file(self.root)
        except ProjectFileError as exc:
            raise ToolError(str(exc)) from None

    async def build(self, args: dict[str, Any]) -> dict[str, Any]:
        return await self._run_named("build")

    async def tests(self, args: dict[str, Any]) -> dict[str, Any]:
        return await self._run_named("test")

    async def _run_named(self, key: str) -> dict[str, Any]:
        project = self.project()
        argv = project.command(key) if project is not None else None
        if project is None or argv is None:
            raise ToolError(missing_command(self.root, key))
        call_id = current_call_id()

        async def progress(fraction: float | None, message: str) -> None:
            if self.send_progress is not None and call_id is not None:
                await self.send_progress(call_id, fraction, message)

        task = f"{key}: {shlex.join(argv)}"
        self.running_tasks.append(task)
        try:
            outcome = await run_command(
                argv,
                self.root,
                timeout=project.timeout_seconds,
                progress=progress,
                progress_every=self.progress_every,
                kill_grace=self.kill_grace,
            )
        except CommandNotFound as exc:
            raise ToolError(f"{exc} (the {key} command of {PROJECT_FILE})") from None
        finally:
            self.running_tasks.remove(task)
        self.last_output = "\n".join([*outcome.problems, outcome.tail])
        if not outcome.succeeded:
            raise ToolError(outcome.failure())
        return outcome.result()

    # ---- what the companion runs and declares ------------------------------------------------

    def handlers(self) -> dict[str, ToolHandler]:
        return {
            "editor.openFile": self.open_file,
            "editor.readFile": self.read_file,
            "editor.replaceText": self.replace_text,
            "project.search": self.search,
            "project.listFiles": self.list_files,
            "git.status": self.git_status,
            "git.diff": self.git_diff,
            "build.run": self.build,
            "tests.run": self.tests,
        }

    def declarations(self) -> list[DeclaredTool]:
        """The tools as ``sessionStart`` declares them: the catalog's descriptions for the editor and
        project tools (``editor.replaceText`` with ``effects: "changes"``), ``git.diff``, and the
        build and tests as background tools naming the command they run, with a deadline past the
        file's time limit. A project file that cannot be read declares them without a command."""
        try:
            project = load_project_file(self.root)
        except ProjectFileError:
            project = None
        timeout = project.timeout_seconds if project is not None else DEFAULT_TIMEOUT_S
        declared = declared_tools([*CATALOG_TOOLS, "git.status"])
        declared.append(GIT_DIFF)
        for name, key in BACKGROUND_TOOLS.items():
            argv = project.command(key) if project is not None else None
            what = "Build the project" if key == "build" else "Run the project's tests"
            runs = f" (runs `{shlex.join(argv)}`)" if argv else f" (no {key} command in {PROJECT_FILE} yet)"
            declared.append(
                DeclaredTool(
                    name=name,
                    description=f"{what}{runs}; returns the status, the problems found and the output's end",
                    arguments={"type": "object", "properties": {}},
                    deadlineSeconds=min(3600, math.ceil(timeout) + DEADLINE_MARGIN_S),
                    background=True,
                )
            )
        return sorted(declared, key=lambda tool: tool.name)


def _relative(path: str, prefix: str) -> str:
    """A path git gave from the repository's top, as seen from the folder at ``prefix`` in it."""
    if not prefix:
        return path
    if path.startswith(prefix):
        return path[len(prefix) :] or "."
    return posixpath.relpath(path, prefix.rstrip("/"))
