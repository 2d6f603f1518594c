"""The demo MCP server of the local stack: a real server built with the MCP SDK (``MCPServer``), over
streamable HTTP on loopback (``http://127.0.0.1:<port>/mcp``), on a thread of its own.

Its tools, with the annotations a client decides by:

* ``issues.search`` ``{"query": str}`` (read-only): the issues sharing a word with the query, one line
  each; one issue's text carries an instruction aimed at the model (``issues.INJECTED_INSTRUCTION``).
* ``issues.close`` ``{"id": int}`` (destructive): closes an issue; an unknown id is a tool error.
* ``ci.run`` ``{"branch": str}`` (neither read-only nor destructive, not idempotent): a slow job
  (``ci_seconds``, 8 s by default) sending a progress notification every ``progress_interval``
  (``step k of n``) to a caller that asked for progress, and stopping when the call is cancelled.
* ``issues.reopen`` ``{"id": int}`` (idempotent): not offered until ``set_tools`` names it, to try a
  tool list that changes.

Every call is recorded in ``calls``, in the order received, as ``(tool, arguments, outcome)``; the
outcome is ``running`` until the call ends, then ``found <n>``, ``closed``, ``already closed``,
``reopened``, ``already open``, ``passed``, ``cancelled`` or ``error: <message>``.

``set_tools(names)`` changes the tools offered and tells connected clients
(``notifications/tools/list_changed``): on the standalone stream of handshake-era sessions, and on the
``subscriptions/listen`` streams of 2026-07-28 clients.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, Self

import anyio
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from mcp_types import ToolAnnotations
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conductor_local.mcp_demo.issues import IssueTracker

SERVER_NAME = "demo"
MCP_PATH = "/mcp"
DEFAULT_CI_SECONDS = 8.0
PROGRESS_INTERVAL_S = 0.5
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
SEARCH, CLOSE, CI_RUN, REOPEN = "issues.search", "issues.close", "ci.run", "issues.reopen"
DEFAULT_TOOLS: tuple[str, ...] = (SEARCH, CLOSE, CI_RUN)
ALL_TOOLS: tuple[str, ...] = (*DEFAULT_TOOLS, REOPEN)
RUNNING = "running"
CANCELLED = "cancelled"
STOP_TIMEOUT_S = 5.0
SESSION_HEADER = "mcp-session-id"
MAX_SESSIONS_TOLD = 256
"""Handshake-era sessions told of a changed tool list at most (an ended session is only found out by then)."""


class Call(NamedTuple):
    """One call the server received: the tool, its arguments, how it ended (``running`` until then)."""

    tool: str
    arguments: dict[str, Any]
    outcome: str


@dataclass(frozen=True)
class _ToolDefinition:
    name: str
    description: str
    annotations: ToolAnnotations
    function: Callable[..., Any]


class DemoMcpServer:
    """The demo MCP server; ``start()`` listens (``port=0``: a free port) and serves on a thread,
    ``stop()`` ends it; a context manager. ``url`` is the MCP endpoint once started."""

    def __init__(
        self,
        *,
        ci_seconds: float = DEFAULT_CI_SECONDS,
        progress_interval: float = PROGRESS_INTERVAL_S,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the demo MCP server listens on loopback only ({', '.join(sorted(LOOPBACK_HOSTS))})")
        if ci_seconds <= 0 or progress_interval <= 0:
            raise ValueError("ci_seconds and progress_interval must be more than 0")
        self.host = host
        self.ci_seconds = ci_seconds
        self.progress_interval = progress_interval
        self.issues = IssueTracker()
        self._requested_port = port
        self._calls: list[Call] = []
        self._calls_lock = threading.Lock()
        self._bus = InMemorySubscriptionBus()
        self._sessions: dict[str, ServerSession] = {}
        """The latest request's session of each handshake-era client (its standalone stream)."""
        self._definitions = {definition.name: definition for definition in self._tool_definitions()}
        self._offered: tuple[str, ...] = ()
        self.mcp = _sdk_server(subscriptions=self._bus, middleware=[self._observe])
        """The SDK's server (its tools are the ones offered)."""
        self._apply_tools(DEFAULT_TOOLS)
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app: _EndableRequests | None = None
        self._port: int | None = None

    # ---- what it offers and what it was asked ---------------------------------------------

    @property
    def calls(self) -> list[Call]:
        """Every call received so far, in order (a copy)."""
        with self._calls_lock:
            return list(self._calls)

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the tools offered now."""
        return self._offered

    def set_tools(self, names: Iterable[str]) -> None:
        """Offer exactly these tools (from ``ALL_TOOLS``) and tell every connected client the list
        changed; returns once the notifications are sent."""
        wanted = tuple(dict.fromkeys(names))
        unknown = [name for name in wanted if name not in self._definitions]
        if unknown:
            raise ValueError(f"the demo server has no tool {', '.join(unknown)} (it has {', '.join(ALL_TOOLS)})")
        if self._loop is None:
            self._apply_tools(wanted)
            return
        self._run_on_loop(self._change_tools(wanted))

    def notify_tools_changed(self) -> None:
        """Send ``notifications/tools/list_changed`` to every connected client (the list as it is)."""
        if self._loop is not None:
            self._run_on_loop(self._notify_tools_changed())

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the demo MCP server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/mcp``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("the demo MCP server is already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        app = _EndableRequests(self.mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=self.host))
        self._app = app
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)
        ready = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            ready.set()
            await server.serve(sockets=[sock])

        def run() -> None:
            try:
                asyncio.run(serve())
            finally:
                sock.close()
                ready.set()

        self._uvicorn = server
        self._port = sock.getsockname()[1]
        self._thread = threading.Thread(target=run, name="demo-mcp-server", daemon=True)
        self._thread.start()
        ready.wait(STOP_TIMEOUT_S)
        while not server.started and self._thread.is_alive():
            self._thread.join(0.01)
        if not server.started:
            self.stop()
            raise RuntimeError("the demo MCP server did not start")
        return self

    def stop(self) -> None:
        """Close every session and stop listening (nothing when it is not started)."""
        server, thread = self._uvicorn, self._thread
        if server is None or thread is None:
            return
        if self._loop is not None and self._app is not None:
            self._loop.call_soon_threadsafe(self._app.end_all)  # open event streams would hold the shutdown
        server.should_exit = True  # not handle_exit: sse-starlette's patch of it ends every event stream of the process
        thread.join(STOP_TIMEOUT_S)
        self._uvicorn = self._thread = self._loop = self._app = None
        self._port = None
        self._sessions.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- the tools -------------------------------------------------------------------------

    def _tool_definitions(self) -> list[_ToolDefinition]:
        async def search_issues(query: str) -> str:
            index = self._record(SEARCH, {"query": query})
            found = self.issues.search(query)
            self._finish(index, f"found {len(found)}")
            if not found:
                return f"No issue matches {query!r}."
            return "\n".join(issue.line() for issue in found)

        async def close_issue(id: int) -> str:  # "id": the argument's name in the schema
            index = self._record(CLOSE, {"id": id})
            try:
                issue, closed_now = self.issues.close(id)
            except KeyError:
                self._finish(index, f"error: no issue #{id}")
                raise ToolError(f"There is no issue #{id}.") from None
            self._finish(index, "closed" if closed_now else "already closed")
            return f"Closed issue #{id}: {issue.title}." if closed_now else f"Issue #{id} was already closed."

        async def reopen_issue(id: int) -> str:  # "id": the argument's name in the schema
            index = self._record(REOPEN, {"id": id})
            issue = self.issues.get(id)
            if issue is None:
                self._finish(index, f"error: no issue #{id}")
                raise ToolError(f"There is no issue #{id}.")
            reopened = self.issues.reopen(id)
            self._finish(index, "reopened" if reopened else "already open")
            return f"Reopened issue #{id}: {issue.title}." if reopened else f"Issue #{id} is already open."

        async def run_ci(branch: str, ctx: Context) -> str:
            index = self._record(CI_RUN, {"branch": branch})
            steps = max(1, round(self.ci_seconds / self.progress_interval))
            try:
                for step in range(1, steps + 1):
                    await anyio.sleep(self.ci_seconds / steps)
                    await ctx.report_progress(step, steps, f"step {step} of {steps}")
            except anyio.get_cancelled_exc_class():
                self._finish(index, CANCELLED)
                raise
            self._finish(index, "passed")
            return f"CI on {branch} passed: {steps} of {steps} steps."

        return [
            _ToolDefinition(
                SEARCH,
                "Search the project's issues; returns one line per matching issue (id, state, title, text).",
                ToolAnnotations(title="Search issues", read_only_hint=True, open_world_hint=False),
                search_issues,
            ),
            _ToolDefinition(
                CLOSE,
                "Close an issue by its number.",
                ToolAnnotations(title="Close an issue", read_only_hint=False, destructive_hint=True),
                close_issue,
            ),
            _ToolDefinition(
                CI_RUN,
                "Run the CI pipeline on a branch; takes a while and reports its progress.",
                ToolAnnotations(title="Run CI", read_only_hint=False, destructive_hint=False, idempotent_hint=False),
                run_ci,
            ),
            _ToolDefinition(
                REOPEN,
                "Reopen a closed issue by its number.",
                ToolAnnotations(
                    title="Reopen an issue", read_only_hint=False, destructive_hint=False, idempotent_hint=True
                ),
                reopen_issue,
            ),
        ]

    def _apply_tools(self, names: tuple[str, ...]) -> None:
        for name in self._offered:
            if name not in names:
                self.mcp.remove_tool(name)
        for name in names:
            if name not in self._offered:
                definition = self._definitions[name]
                self.mcp.add_tool(
                    definition.function,
                    name=definition.name,
                    title=definition.annotations.title,
                    description=definition.description,
                    annotations=definition.annotations,
                    structured_output=False,
                )
        self._offered = names

    def _record(self, tool: str, arguments: dict[str, Any]) -> int:
        with self._calls_lock:
            self._calls.append(Call(tool, arguments, RUNNING))
            return len(self._calls) - 1

    def _finish(self, index: int, outcome: str) -> None:
        with self._calls_lock:
            self._calls[index] = self._calls[index]._replace(outcome=outcome)

    # ---- notifications ---------------------------------------------------------------------

    async def _observe(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Remembers each handshake-era session (to reach its standalone stream later) and says, in the
        handshake, that the tool list may change."""
        result = await call_next(ctx)
        headers = getattr(ctx.request, "headers", None)
        session_id = headers.get(SESSION_HEADER) if headers is not None else None
        if session_id:
            self._sessions.pop(session_id, None)
            self._sessions[session_id] = ctx.session
            while len(self._sessions) > MAX_SESSIONS_TOLD:  # the least recently heard from has likely ended
                del self._sessions[next(iter(self._sessions))]
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities") or {}
            if isinstance(capabilities.get("tools"), dict):
                tools = {**capabilities["tools"], "listChanged": True}
                result = {**result, "capabilities": {**capabilities, "tools": tools}}
        return result

    async def _change_tools(self, names: tuple[str, ...]) -> None:
        self._apply_tools(names)
        await self._notify_tools_changed()

    async def _notify_tools_changed(self) -> None:
        await self._bus.publish(ToolsListChanged())
        for session_id, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a session that ended: forget it
                self._sessions.pop(session_id, None)

    def _run_on_loop(self, coroutine: Any) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.run_coroutine_threadsafe(coroutine, loop).result(STOP_TIMEOUT_S)


class _EndableRequests:
    """The server's ASGI app, each HTTP request in a cancel scope ``end_all`` cancels: an open event
    stream (a session's standalone stream, a ``subscriptions/listen`` stream) is ended cleanly, a request
    not yet answered gets 503, and so is any request after it; stopping then waits for no client."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._scopes: set[anyio.CancelScope] = set()
        self._ending = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = completed = False

        async def tracked(message: Message) -> None:
            nonlocal started, completed
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                completed = True
            await send(message)

        with anyio.CancelScope() as cancel_scope:
            if self._ending:
                cancel_scope.cancel()
            self._scopes.add(cancel_scope)
            try:
                await self.app(scope, receive, tracked)
            finally:
                self._scopes.discard(cancel_scope)
        if completed:
            return
        if not started:
            await send({"type": "http.response.start", "status": 503, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def end_all(self) -> None:
        self._ending = True
        for scope in list(self._scopes):
            scope.cancel()


def _sdk_server(**options: Any) -> MCPServer:
    """The SDK's ``MCPServer``, leaving this process's logging as it was: its constructor calls
    ``logging.basicConfig`` (an INFO handler on the root logger) when the root logger has none."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        return MCPServer(SERVER_NAME, version="1.0", log_level="WARNING", **options)
    finally:
        root.removeHandler(placeholder)
