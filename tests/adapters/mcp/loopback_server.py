"""A small MCP server on loopback for the MCP client's tests and benchmark: the SDK's own server
(streamable HTTP, stateful sessions) run by uvicorn on a thread of its own.

Tools: ``echo`` (read-only), ``close`` (destructive), ``fail`` (an isError result), ``slow`` (progress
every ``step_s``; records its cancellation), ``picture`` (an image beside text), ``numbers``
(structuredContent only), ``big`` (a long text) and ``whoami`` (the Authorization header it got).
``calls`` records (tool, arguments, outcome) in order; outcome is "ok", "error" or "cancelled".
``set_tools`` changes the list and sends ``notifications/tools/list_changed`` to every session.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(1226)).decode()  # 1234 bytes decoded


def _tool(name: str, properties: dict[str, Any], annotations: types.ToolAnnotations | None = None) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"the {name} tool",
        input_schema={"type": "object", "properties": properties},
        annotations=annotations,
    )


BASE_TOOLS = [
    _tool(
        "echo",
        {"text": {"type": "string"}},
        types.ToolAnnotations(title="Echo", read_only_hint=True, open_world_hint=False),
    ),
    _tool(
        "close",
        {"id": {"type": "integer"}},
        types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    ),
    _tool("fail", {}),
    _tool("slow", {"steps": {"type": "integer"}, "step_s": {"type": "number"}}),
    _tool("picture", {}),
    _tool("numbers", {}),
    _tool("big", {"size": {"type": "integer"}}),
    _tool("whoami", {}),
]


class LoopbackMcpServer:
    """start() serves on 127.0.0.1 (a free port, or the one of a previous start: a restart);
    stop() ends every session."""

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.port = 0
        self.tools = list(BASE_TOOLS)
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.list_requests = 0
        self.session_ids: list[str] = []  # each session's id, in the order of its first tools/call
        self._sessions: dict[int, ServerSession] = {}  # by connection
        self._uvicorn: uvicorn.Server | None = None
        self._portal: Callable[[Callable[[], Awaitable[None]]], None] | None = None  # runs on its loop
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    # --- the MCP handlers ---

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self.list_requests += 1
        self._sessions.setdefault(id(ctx.session._connection), ctx.session)
        return types.ListToolsResult(tools=list(self.tools))

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        session_id = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
        if session_id and session_id not in self.session_ids:
            self.session_ids.append(session_id)
        try:
            result = await self._run(ctx, name, arguments)
        except anyio.get_cancelled_exc_class():
            self.calls.append((name, arguments, "cancelled"))
            raise
        self.calls.append((name, arguments, "error" if result.is_error else "ok"))
        return result

    async def _run(self, ctx: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(text=value)], is_error=is_error)

        if name in ("echo", "close"):
            return text(str(arguments.get("text", arguments.get("id", ""))))
        if name == "fail":
            return text("the tool failed: no such issue", is_error=True)
        if name == "slow":
            steps, step_s = int(arguments.get("steps", 4)), float(arguments.get("step_s", 0.05))
            for step in range(1, steps + 1):
                await anyio.sleep(step_s)
                await ctx.session.report_progress(step, steps, f"step {step} of {steps}")
            return text("done")
        if name == "picture":
            image = types.ImageContent(data=PNG, mime_type="image/png")
            return types.CallToolResult(content=[types.TextContent(text="a chart"), image])
        if name == "numbers":
            return types.CallToolResult(content=[], structured_content={"sum": 3, "items": [1, 2]})
        if name == "big":
            return text("x" * int(arguments.get("size", 300_000)))
        if name == "whoami":
            request = ctx.request
            return text(request.headers.get("authorization", "") if request is not None else "")
        return text(f"unknown tool {name}", is_error=True)

    # --- what a test changes on the server ---

    def set_tools(self, tools: list[types.Tool]) -> None:
        """Replaces the tool list and tells every session (notifications/tools/list_changed)."""
        self.tools = list(tools)
        assert self._portal is not None, "the server is not running"
        self._portal(self._announce_tools_changed)

    async def _announce_tools_changed(self) -> None:
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a session that is gone
                del self._sessions[key]

    # --- running it ---

    def _app(self) -> Any:
        server: Server[Any] = Server("loopback", on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        app = server.streamable_http_app(session_idle_timeout=None)
        if self.token is None:
            return app
        expected = f"Bearer {self.token}".encode()

        async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            await app(scope, receive, send)

        return guarded

    def start(self) -> LoopbackMcpServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._sessions = {}
        config = uvicorn.Config(self._app(), log_level="critical", lifespan="on", timeout_graceful_shutdown=0.2)
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="mcp-loopback", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the loopback MCP server did not start")
            time.sleep(0.01)
        return self

    def _serve(self, sock: socket.socket) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()

            def portal(fn: Callable[[], Awaitable[None]]) -> None:
                asyncio.run_coroutine_threadsafe(fn(), loop).result(timeout=5)

            self._portal = portal
            assert self._uvicorn is not None
            await self._uvicorn.serve(sockets=[sock])

        asyncio.run(main())
        sock.close()

    def stop(self) -> None:
        if self._uvicorn is not None and self._thread is not None:
            self._uvicorn.should_exit = True
            self._thread.join(timeout=10)
        self._uvicorn = None
        self._thread = None
        self._portal = None
