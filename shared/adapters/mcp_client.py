"""The conductor as an MCP client: a synchronous front over the official ``mcp`` SDK (async), for the
Lambdas' threads. Its parts are in ``shared.adapters.mcp``.

* **The SDK is imported only when a server is used** (``tools`` or ``call``), never with this module:
  a stage that names no server never loads it (about a second of imports on a cold container).
* **One event loop per ``McpClients``**, on a daemon thread, and **one MCP session per server**, kept
  open (streamable HTTP, ``Mcp-Session-Id``) across calls and across the invocations a warm container
  serves. The session is the handshake era's (``initialize``, protocol 2025-11-25): such servers (an
  AgentCore Gateway too) keep a session, announce ``notifications/tools/list_changed`` on its GET
  stream and take ``notifications/cancelled``. A session the server no longer knows (a restart, an
  expiry: HTTP 404 to the session id) is opened again once, transparently, and the request, which
  never ran, sent again.
* **What a fresh container pays** on its first use of a server: the SDK's import, then three round
  trips one after the other: ``initialize``, ``notifications/initialized`` (the SDK waits for its 202)
  and ``tools/list``; the GET stream for the server's notifications opens beside them. A warm
  container pays the ``tools/call`` round trip alone (``benchmarks/mcp_cost.py`` measures both).
* **A call blocks its thread.** Progress reaches ``on_progress`` on the caller's own thread (the loop
  never runs the caller's code); ``cancelled()`` is asked every 0.25 s. A cancelled or timed-out call
  is abandoned, and the SDK sends ``notifications/cancelled`` for it before the call returns.
* **A result is text** (``shared.adapters.mcp.results.render``). An error the server answers with
  (``isError``, or a JSON-RPC error to the call) is a result marked ``is_error``; a server that cannot
  be reached raises ``McpUnavailable``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from shared.adapters.mcp.config import McpServerConfig, secret_token
from shared.adapters.mcp.session import McpUnavailable, ServerLink
from shared.core.mcp_tools import McpResult, McpTool

__all__ = ["McpCancelled", "McpClients"]

T = TypeVar("T")

POLL_S = 0.25  # how often a blocked call asks cancelled()
ABANDON_WAIT_S = 2.0  # how long an abandoned call may take to tell its server
CLOSE_WAIT_S = 4.0  # how long close() waits for the sessions to end


class McpCancelled(Exception):
    """The call was cancelled by its caller, and its server told so (``notifications/cancelled``)."""


_Event = tuple[float | None, str] | None  # a progress report, or None: the call has ended


class McpClients:
    """The stage's MCP servers. Thread-safe; ``close()`` ends the sessions and the loop's thread."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        connect_timeout_s: float = 3.0,
        list_max_age_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        token_source: Callable[[str], str] = secret_token,
    ) -> None:
        self.servers = tuple(servers)
        self._connect_timeout_s = connect_timeout_s
        self._list_max_age_s = list_max_age_s
        self._clock = clock
        self._links = {server.name: ServerLink(server, connect_timeout_s, token_source) for server in self.servers}
        self._lock = threading.Lock()
        self._loop: _LoopThread | None = None
        self._closed = False

    def tools(self, server: str) -> list[McpTool]:
        """The server's tools: listed again when older than ``list_max_age_s``, or when the server said
        they changed (or a new session began). Raises McpUnavailable."""
        link = self._link(server)
        if (tools := link.current(self._clock, self._list_max_age_s)) is not None:
            return list(tools)
        # a backstop: the handshake and each page are bounded on the loop, and asked twice at most
        budget = self._connect_timeout_s * 4 + ABANDON_WAIT_S
        future = self._loop_thread().submit(link.list_tools(self._clock, self._list_max_age_s))
        try:
            return list(future.result(timeout=budget))
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpUnavailable(f"MCP server {server}: no tool list within {budget:g} s") from None

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        on_progress: Callable[[float | None, str], None],
        cancelled: Callable[[], bool],
        timeout_s: float,
    ) -> McpResult:
        """Calls the tool and blocks until its result. Progress: ``on_progress(progress / total or
        None, message)``. Raises McpCancelled once ``cancelled()``, TimeoutError past ``timeout_s``
        (the server told either way), McpUnavailable when the server cannot be reached."""
        link = self._link(server)
        events: queue.SimpleQueue[_Event] = queue.SimpleQueue()

        def report(fraction: float | None, message: str) -> None:
            events.put((fraction, message))

        async def run() -> McpResult:
            try:
                return await link.call(tool, arguments, report)
            finally:
                events.put(None)

        future = self._loop_thread().submit(run())
        deadline = time.monotonic() + timeout_s
        while True:
            if cancelled():
                _abandon(future, events)
                raise McpCancelled(f"{server}.{tool} cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _abandon(future, events)
                raise TimeoutError(f"{server}.{tool} took longer than {timeout_s:g} s")
            try:
                event = events.get(timeout=min(POLL_S, remaining))
            except queue.Empty:
                continue
            if event is None:
                return future.result(timeout=ABANDON_WAIT_S)
            try:
                on_progress(*event)
            except BaseException:
                _abandon(future, events)
                raise

    def close(self) -> None:
        with self._lock:
            self._closed = True
            loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(Exception):  # best effort: a server may be gone
            loop.submit(_close_all(list(self._links.values()))).result(timeout=CLOSE_WAIT_S)
        loop.stop()

    def _link(self, server: str) -> ServerLink:
        link = self._links.get(server)
        if link is None:
            raise McpUnavailable(f"no MCP server named {server!r} in this stage")
        return link

    def _loop_thread(self) -> _LoopThread:
        with self._lock:
            if self._closed:
                raise McpUnavailable("the MCP clients are closed")
            if self._loop is None:
                self._loop = _LoopThread()
            return self._loop


def _abandon(future: concurrent.futures.Future[McpResult], events: queue.SimpleQueue[_Event]) -> None:
    """Cancels the call's task (the SDK then sends notifications/cancelled) and waits for its end."""
    future.cancel()
    deadline = time.monotonic() + ABANDON_WAIT_S
    with contextlib.suppress(queue.Empty):
        while (remaining := deadline - time.monotonic()) > 0:
            if events.get(timeout=remaining) is None:
                return


async def _close_all(links: list[ServerLink]) -> None:
    await asyncio.gather(*(link.close() for link in links), return_exceptions=True)


class _LoopThread:
    """An asyncio event loop, running on a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="mcp-clients", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=CLOSE_WAIT_S)
        if not self._thread.is_alive():
            self.loop.close()
