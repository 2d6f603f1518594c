"""The desktop companion: a device of the person's session that runs the model's tools over a real
folder, while the phone (or the browser console) hears and speaks.

``Companion`` joins a session as a ``tools`` device (and ``display`` on a terminal,
``device``) with a ``ConductorClient``: its ``sessionStart`` carries the ``device`` and
declares the tools it runs (``CompanionWorkspace.declarations``), and no capabilities (speech is the
voice device's). Then it runs each ``toolCall`` it gets (``calls``): reads, search and
listing, an edit the person said yes to, ``git``, and the build and test commands the workspace's
``.voiceide.toml`` names, in the background with ``toolProgress`` while they run; a ``toolCancel``
stops the call. A call sent again (a reconnect, a restart of the companion) is answered from the run
it already had, never run twice. A companion started again answers at once the builds and test runs
an earlier run started and never finished (the conductor waits for their result and does not send
them again): they were not run again. It shows the conversation as it goes (``display``). Once
joined, it tells the session what its folder looks like, its context and its names
(``context_sender``), unless ``send_context`` is off.

It runs until the session is ended or erased, the conductor refuses it (``too_many_devices``: the
session has four devices already), another connection takes the session over (``taken_over``: it
does not reconnect), every reconnect fails, or ``stop`` is called (Ctrl-C, SIGTERM); closing stops
every command still running.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from shared.wire.protocol import (
    Device,
    DevicesChanged,
    ErrorCode,
    ErrorPayload,
    Event,
    SessionReady,
    ToolCancel,
    ToolResult,
    make_event,
)
from shared.wire.workspace import WorkspaceContext, WorkspaceNames
from voiceide_client.connection.link import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    MAX_FRAME_BYTES,
    ClientClosed,
    HandshakeHeaders,
    Link,
    Progress,
)
from voiceide_client.conversation.client import ConductorClient

from .calls import CompanionRouter, interrupted_result
from .command import DEFAULT_PROGRESS_EVERY_S, KILL_GRACE_S
from .context_sender import ContextSender, ContextTiming
from .display import CompanionDisplay
from .journal import CallJournal
from .workspace import CompanionWorkspace

JOURNALED = ("editor.replaceText", "build.run", "tests.run")
"""The calls that change the workspace or run long: recorded, so that none ever runs twice."""
WATCH_S = 3600.0

ENDED_BY_SERVER = "closed_by_server"
REFUSED = str(ErrorCode.TOO_MANY_DEVICES)
TAKEN_OVER = str(ErrorCode.TAKEN_OVER)
UNREACHABLE = "unreachable"
STOPPED = "stopped"


class CompanionClient(ConductorClient):
    """The client with one more way to answer: a result no call of this run asked for (a call an
    earlier run of the companion started), sent as any answer is (in parts when it is big)."""

    async def send_result(self, result: ToolResult) -> bool:
        """Send ``result``; False when the client closed before it could."""
        return await self._send_answer(make_event(result))

    async def send_workspace(self, payload: WorkspaceContext | WorkspaceNames) -> bool:
        """Send the workspace's context or a part of its names; False when the client closed."""
        try:
            await self._send(make_event(payload))
        except ClientClosed:
            return False
        return True


class Companion:
    """One companion on one session (``async with`` connects and closes)."""

    def __init__(
        self,
        url: str,
        session_id: str,
        root: Path,
        *,
        device: Device,
        display: CompanionDisplay | None = None,
        journal_folder: Path | None = None,
        handshake_headers: HandshakeHeaders | None = None,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        on_progress: Progress | None = None,
        progress_every: float = DEFAULT_PROGRESS_EVERY_S,
        kill_grace: float = KILL_GRACE_S,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        send_context: bool = True,
        follow: str | None = None,
        context_timing: ContextTiming | None = None,
    ) -> None:
        self.display = display
        self.workspace = CompanionWorkspace(
            root, send_progress=self._send_progress, progress_every=progress_every, kill_grace=kill_grace
        )
        declared = self.workspace.declarations()
        waits = {tool.name: float(tool.deadline_seconds) for tool in declared if tool.deadline_seconds}
        self.journal = CallJournal(journal_folder, session_id) if journal_folder is not None else None
        self.background = frozenset(tool.name for tool in declared if tool.background) & frozenset(JOURNALED)
        self.router = CompanionRouter(self.workspace.handlers(), journal=self.journal, journaled=JOURNALED, waits=waits)
        self.refused: str | None = None  # the conductor's message when it took no more devices
        self.taken_over: str | None = None  # the conductor's message when another connection took over
        self.answered_at_start: list[ToolResult] = []  # calls an earlier run left unfinished, answered
        self._stop = asyncio.Event()
        self._on_progress = on_progress
        self.client = CompanionClient(
            url,
            session_id,
            self.router,
            declared_tools=declared,
            device=device,
            capabilities=(),
            renderer=display,
            on_event=self._on_event,
            handshake_headers=handshake_headers,
            backoff=backoff,
            max_attempts=max_attempts,
            on_progress=self._progress,
            max_frame_bytes=max_frame_bytes,
        )
        # the folder's context and names, sent once joined (``context_sender``); none with send_context off
        self.context = (
            ContextSender(self.workspace, self.client.send_workspace, follow=follow, timing=context_timing)
            if send_context
            else None
        )

    @property
    def device(self) -> Device:
        assert self.client.device is not None
        return self.client.device

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self, *, retries: int = 0) -> None:
        """Join the session; then answer the calls an earlier run left unfinished."""
        await self.client.connect(retries=retries)
        await self.answer_unfinished()
        if self.context is not None and self.ended() is None:
            self.context.start()

    async def answer_unfinished(self) -> None:
        """The builds and test runs an earlier run of the companion started on this session and never
        finished (it stopped while they ran) are answered now, with an error saying they were not run
        again: the conductor does not send a background call again, it would wait for its deadline."""
        if self.journal is None:
            return
        for entry in self.journal.unfinished(self.background):
            result = interrupted_result(entry.call)
            if not await self.client.send_result(result):
                return
            self.journal.answered(entry, result)
            self.answered_at_start.append(result)

    def stop(self) -> None:
        """End ``run`` (safe from a signal handler)."""
        self._stop.set()

    def ended(self) -> str | None:
        """Why the companion is done, or None while it goes on."""
        if self.taken_over is not None:
            return TAKEN_OVER
        if self.refused is not None:
            return REFUSED
        if self.client.closed_by_server is not None:
            return ENDED_BY_SERVER
        if self.client.offline:
            return UNREACHABLE
        if self.client.link is Link.CLOSED or self._stop.is_set():
            return STOPPED
        return None

    async def run(self) -> str:
        """Answer the session's tool calls until it ends; why it ended (``ended``)."""
        stop = asyncio.create_task(self._stop.wait())
        watch = asyncio.create_task(self._watch())
        try:
            await asyncio.wait({stop, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (stop, watch):
                task.cancel()
            await asyncio.gather(stop, watch, return_exceptions=True)
        return self.ended() or STOPPED

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await self.client.wait_until(lambda: self.ended() is not None, WATCH_S)
                return

    async def close(self) -> None:
        """Close the connection; every call still running is stopped (its command killed)."""
        if self.context is not None:
            await self.context.stop()
        await self.client.close()

    # ---- what the companion does with events -----------------------------------------------------

    async def _send_progress(self, call_id: str, fraction: float | None, message: str) -> None:
        await self.client.send_progress(call_id, fraction, message)

    def _progress(self, message: str) -> None:
        """How the connection is doing; nothing more once taken over or refused (the companion says
        why it stops, in one line)."""
        if self._on_progress is not None and self.taken_over is None and self.refused is None:
            self._on_progress(message)

    def _on_event(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, SessionReady) and self.context is not None:
            self.context.resend()  # a new connection: the conductor may not have them
        if isinstance(payload, ToolCancel):
            self.router.cancel(payload.call_id)
            if self.display is not None:
                self.display.cancelled(payload.name or payload.call_id, payload.reason)
        elif isinstance(payload, SessionReady) and payload.devices and self.display is not None:
            self.display.devices(payload.devices)
        elif isinstance(payload, DevicesChanged) and self.display is not None:
            self.display.devices(payload.devices, joined=payload.joined, left=payload.left)
        elif isinstance(payload, ErrorPayload) and payload.code == REFUSED:
            self.refused = payload.message
            self._stop.set()
        elif isinstance(payload, ErrorPayload) and payload.code == TAKEN_OVER:
            # the conductor closes this connection next: reconnecting would take the session back
            self.taken_over = payload.message
            self.client.closed_by_server = TAKEN_OVER
            self._stop.set()
