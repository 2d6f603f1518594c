"""Keeps the session told what the companion's folder looks like: its context and its names.

* **Context** (``workspace_context``): sent once the companion has joined, then whenever it changed.
  The folder is looked at every ``poll_s``: a change of git's ``HEAD`` or index, of the followed
  file or of the builds and test runs gathers the context at once; otherwise it is gathered again
  no more often than its cost allows (``max_busy``: a ``git status`` taking 200 ms runs every 4 s
  at most). It is sent only when it differs from the last one sent, at most once every
  ``min_gap_s``.
* **Names** (``name_index``): indexed once the companion has joined, then again every
  ``names_every_s``, only the files changed since being read again; a new set is sent (all its
  parts) when the names differ from the last set sent.
* A new ``sessionReady`` (a reconnect) sends both again: the conductor may not have them.

Gathering and indexing run in threads, never in the event loop; whatever fails is logged and tried
again at the next turn, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from shared.wire.workspace import WorkspaceContext, WorkspaceNames

from .name_index import IndexedName, NameIndex, names_parts, set_id_of
from .workspace import CompanionWorkspace
from .workspace_context import Runs, gather_context
from .workspace_files import git_folder, inside

logger = logging.getLogger(__name__)

FIRST_CONTEXT_WAIT_S = 30.0
"""The names wait this long at most for the first context to be sent (it ranks them)."""
SendPayload = Callable[[WorkspaceContext | WorkspaceNames], Awaitable[bool]]
"""Sends one event; False when the connection is closed for good."""


@dataclass(frozen=True)
class ContextTiming:
    poll_s: float = 2.0
    min_gap_s: float = 1.0
    names_every_s: float = 30.0
    max_busy: float = 0.05
    """The share of time gathering the context may take, at most."""


class ContextSender:
    """Sends ``workspace``'s context and names through ``send`` (``start``, ``resend``, ``stop``)."""

    def __init__(
        self,
        workspace: CompanionWorkspace,
        send: SendPayload,
        *,
        follow: str | None = None,
        timing: ContextTiming | None = None,
    ) -> None:
        self.workspace = workspace
        self.root = workspace.root
        self.send = send
        self.follow = follow
        self.timing = timing or ContextTiming()
        self.index = NameIndex(self.root)
        self.last_context: WorkspaceContext | None = None  # the last one sent
        self.last_names: list[IndexedName] | None = None  # the last set sent, whole
        self._gathered: WorkspaceContext | None = None  # the latest one gathered
        self._watched: tuple[object, ...] | None = None
        self._next_gather = 0.0
        self._sent_at = -self.timing.min_gap_s
        self._git_folder: Path | None = None
        self._generation = 0  # resend() counts: what was being sent across one is sent again
        self._wake_context = asyncio.Event()
        self._wake_names = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._context_loop(), name="workspace context"),
                asyncio.create_task(self._names_loop(), name="workspace names"),
            ]

    def resend(self) -> None:
        """The context and the names are sent again soon (a new ``sessionReady``)."""
        self._generation += 1
        self.last_context = None
        self.last_names = None
        self._wake_context.set()
        self._wake_names.set()

    async def stop(self) -> None:
        self.index.stop.set()  # an index in progress ends at its next file
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    # ---- the context ---------------------------------------------------------------------------

    async def _context_loop(self) -> None:
        self._git_folder = await asyncio.to_thread(git_folder, self.root)
        while True:
            try:
                await self._context_turn()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("the workspace's context was not sent; trying again", exc_info=True)
            await _nap(self._wake_context, self.timing.poll_s)

    async def _context_turn(self) -> None:
        runs = Runs(tuple(self.workspace.running_tasks), self.workspace.last_output)
        watched = (*self._marks(), runs)
        if self._gathered is None or watched != self._watched or time.monotonic() >= self._next_gather:
            started = time.monotonic()
            self._gathered = await asyncio.to_thread(gather_context, self.root, follow=self.follow, runs=runs)
            took = time.monotonic() - started
            self._next_gather = time.monotonic() + max(self.timing.poll_s, took / self.timing.max_busy)
            self._watched = watched
        context = self._gathered
        if context == self.last_context:
            return
        await asyncio.sleep(max(0.0, self._sent_at + self.timing.min_gap_s - time.monotonic()))
        generation = self._generation
        if await self.send(context) and generation == self._generation:
            self.last_context = context
            self._sent_at = time.monotonic()
            if self.last_names is None:
                self._wake_names.set()  # the names follow the context, ranked by it

    def _marks(self) -> tuple[int | None, ...]:
        """When git's ``HEAD`` and index and the followed file last changed (None: not there)."""
        paths: list[Path] = []
        if self._git_folder is not None:
            paths += [self._git_folder / "HEAD", self._git_folder / "index"]
        followed = inside(self.root, self.follow) if self.follow else None
        if followed is not None:
            paths.append(self.root / followed)
        marks: list[int | None] = []
        for path in paths:
            try:
                marks.append(os.stat(path).st_mtime_ns)
            except OSError:
                marks.append(None)
        return tuple(marks)

    # ---- the names -----------------------------------------------------------------------------

    async def _names_loop(self) -> None:
        # the first context first: its open and changed files rank the names
        deadline = time.monotonic() + FIRST_CONTEXT_WAIT_S
        while self.last_context is None and time.monotonic() < deadline:
            await _nap(self._wake_names, self.timing.poll_s)
        while True:
            try:
                await self._names_turn()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("the workspace's names were not sent; trying again", exc_info=True)
            await _nap(self._wake_names, self.timing.names_every_s)

    async def _names_turn(self) -> None:
        context = self._gathered
        opened = context.open_file.path if context is not None and context.open_file is not None else None
        changed = context.changed_files if context is not None else ()
        names = await asyncio.to_thread(self.index.index, open_file=opened, changed=changed)
        if names == self.last_names:
            return
        generation = self._generation
        for part in names_parts(names, set_id_of(names)):
            if not await self.send(part):
                return
        if generation == self._generation:  # else parts went on a connection that is gone: all again
            self.last_names = names


async def _nap(wake: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``wake`` is set (it is cleared)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await wake.wait()
    wake.clear()
