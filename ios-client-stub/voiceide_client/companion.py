"""The desktop companion: a device of the person's session that runs the model's tools over a real
folder, while the phone (or the browser console) hears and speaks.

``Companion`` joins a session as a ``tools`` device (and ``display`` on a terminal,
``companion_device``) with a ``ConductorClient``: its ``sessionStart`` carries the ``device`` and
declares the tools it runs (``CompanionWorkspace.declarations``), and no capabilities (speech is the
voice device's). Then it runs each ``toolCall`` it gets (``companion_calls``): reads, search and
listing, an edit the person said yes to, ``git``, and the build and test commands the workspace's
``.voiceide.toml`` names, in the background with ``toolProgress`` while they run; a ``toolCancel``
stops the call. A call sent again (a reconnect, a restart of the companion) is answered from the run
it already had, never run twice. It shows the conversation as it goes (``companion_display``).

It runs until the session is ended or erased, the conductor refuses it (``too_many_devices``: the
session has four devices already), every reconnect fails, or ``stop`` is called (Ctrl-C, SIGTERM);
closing stops every command still running.
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
)

from .client import DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, MAX_FRAME_BYTES, ConductorClient, HandshakeHeaders, Progress
from .companion_calls import CompanionRouter
from .companion_command import DEFAULT_PROGRESS_EVERY_S, KILL_GRACE_S
from .companion_display import CompanionDisplay
from .companion_journal import CallJournal
from .companion_workspace import CompanionWorkspace
from .connection import Link

JOURNALED = ("editor.replaceText", "build.run", "tests.run")
"""The calls that change the workspace or run long: recorded, so that none ever runs twice."""
WATCH_S = 3600.0

ENDED_BY_SERVER = "closed_by_server"
REFUSED = str(ErrorCode.TOO_MANY_DEVICES)
UNREACHABLE = "unreachable"
STOPPED = "stopped"


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
    ) -> None:
        self.display = display
        self.workspace = CompanionWorkspace(
            root, send_progress=self._send_progress, progress_every=progress_every, kill_grace=kill_grace
        )
        journal = CallJournal(journal_folder) if journal_folder is not None else None
        self.router = CompanionRouter(self.workspace.handlers(), journal=journal, journaled=JOURNALED)
        self.refused: str | None = None  # the conductor's message when it took no more devices
        self._stop = asyncio.Event()
        self.client = ConductorClient(
            url,
            session_id,
            self.router,
            declared_tools=self.workspace.declarations(),
            device=device,
            capabilities=(),
            renderer=display,
            on_event=self._on_event,
            handshake_headers=handshake_headers,
            backoff=backoff,
            max_attempts=max_attempts,
            on_progress=on_progress,
            max_frame_bytes=max_frame_bytes,
        )

    @property
    def device(self) -> Device:
        assert self.client.device is not None
        return self.client.device

    async def __aenter__(self) -> Self:
        await self.client.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self, *, retries: int = 0) -> None:
        await self.client.connect(retries=retries)

    def stop(self) -> None:
        """End ``run`` (safe from a signal handler)."""
        self._stop.set()

    def ended(self) -> str | None:
        """Why the companion is done, or None while it goes on."""
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
        await self.client.close()

    # ---- what the companion does with events -----------------------------------------------------

    async def _send_progress(self, call_id: str, fraction: float | None, message: str) -> None:
        await self.client.send_progress(call_id, fraction, message)

    def _on_event(self, event: Event) -> None:
        payload = event.payload
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
