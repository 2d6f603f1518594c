"""One MCP server's session and tool list, on the facade's event loop.

The SDK's contexts (HTTP client, streamable HTTP transport, ``ClientSession``) are entered and left
in one task, the session's keeper, which holds them open until told to stop or until the transport
fails; requests are sent from other tasks, each raced against the keeper's end. A request that
never ran (the server answered 404 to the session id, or refused the connection) is sent once more
on a new session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from shared.adapters.mcp.config import McpServerConfig
from shared.adapters.mcp.results import mcp_tool, render
from shared.core.mcp_tools import McpResult, McpTool

if TYPE_CHECKING:
    import ssl

    import httpx2
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage
    from mcp_types import CallToolResult

T = TypeVar("T")
Progress = Callable[[float | None, str], None]

CLIENT_NAME = "voiceide-conductor"
STOP_WAIT_S = 1.5  # how long ending a session (its DELETE) may take before it is cut
KEEPER_END_WAIT_S = 0.5  # how long a closed connection may take to end its session, failure known
MAX_LIST_PAGES = 50
_HTTP_FAILED = "Server returned an error response"  # the SDK's stand-in for an HTTP error status


class McpUnavailable(Exception):
    """The server cannot be reached, or its handshake or tool list failed (the message says why)."""


class _Retry(Exception):
    """The request never ran (its session is gone, or the connection was refused): send it again."""


class _Wire:
    """What one session's HTTP exchanges showed: a 404 to its session id (the server no longer knows
    it), the last error status a POST got."""

    def __init__(self) -> None:
        self.session_gone = False
        self.error_status: int | None = None

    async def saw(self, response: httpx2.Response) -> None:
        status, request = response.status_code, response.request
        if status == 404 and "mcp-session-id" in request.headers and request.method != "DELETE":
            self.session_gone = True
        if status >= 400 and request.method == "POST":
            self.error_status = status


@dataclass
class _Open:
    session: ClientSession
    wire: _Wire
    keeper: asyncio.Task[BaseException | None]  # ends with the session: None, or the failure that ended it
    stop: asyncio.Event


class ServerLink:
    """One server: its open session (opened on first use, again when gone) and its last tool list."""

    def __init__(self, config: McpServerConfig, connect_timeout_s: float, token_source: Callable[[str], str]) -> None:
        self.config = config
        self.listing: tuple[tuple[McpTool, ...], float] | None = None  # the tools, and when they were listed
        self._changes = 0  # tools/list_changed said, or a new session begun (maybe a restarted server)
        self._listed_changes = 0  # ... as counted when the last listing was asked for
        self._connect_timeout_s = connect_timeout_s
        self._token_source = token_source
        self._open: _Open | None = None
        self._opening: asyncio.Lock | None = None  # the loop's locks, made on it
        self._listing: asyncio.Lock | None = None
        self._sessions = 0

    @property
    def stale(self) -> bool:
        """Whether the tools may have changed since they were listed."""
        return self._changes != self._listed_changes

    @property
    def _name(self) -> str:
        return f"MCP server {self.config.name} ({self.config.url})"

    def current(self, clock: Callable[[], float], max_age_s: float) -> tuple[McpTool, ...] | None:
        """The tools listed last, unless older than ``max_age_s`` or maybe changed since."""
        listing = self.listing
        if listing is None or self.stale or clock() - listing[1] >= max_age_s:
            return None
        return listing[0]

    async def list_tools(self, clock: Callable[[], float], max_age_s: float) -> tuple[McpTool, ...]:
        """The tools, listed again unless ``current`` (several callers at once share one listing)."""
        if self._listing is None:
            self._listing = asyncio.Lock()
        async with self._listing:
            if (tools := self.current(clock, max_age_s)) is not None:
                return tools
            return await self._list(clock)

    async def _list(self, clock: Callable[[], float]) -> tuple[McpTool, ...]:
        async def listing(session: ClientSession) -> tuple[McpTool, ...]:
            from mcp_types import PaginatedRequestParams

            changes = self._changes  # a change said from here on is for the next listing
            tools: list[McpTool] = []
            cursor: str | None = None
            for _page in range(MAX_LIST_PAGES):
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await asyncio.wait_for(session.list_tools(params=params), self._connect_timeout_s)
                tools.extend(mcp_tool(self.config.name, tool) for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            self.listing, self._listed_changes = (tuple(tools), clock()), changes
            return tuple(tools)

        try:
            return await self._request(listing)
        except McpUnavailable:
            raise
        except TimeoutError:
            raise McpUnavailable(f"{self._name}: tools/list unanswered within {self._connect_timeout_s:g} s") from None
        except Exception as error:
            raise McpUnavailable(f"{self._name}: tools/list failed: {one_line(error)}") from None

    async def call(self, tool: str, arguments: dict[str, Any], report: Progress) -> McpResult:
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            report(progress / total if total else None, message or "")

        async def calling(session: ClientSession) -> CallToolResult:
            # not session.call_tool: on a session that has not listed the tool, it lists them all first
            # (to check structured content against the tool's output schema, which the model reads as data)
            from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

            request = CallToolRequest(params=CallToolRequestParams(name=tool, arguments=arguments))
            return await session.send_request(request, CallToolResult, progress_callback=on_progress)

        try:
            return render(await self._request(calling))
        except MCPError as error:  # the server answered the call with an error
            return McpResult(f"MCP error {error.code}: {error.message}", is_error=True)
        except (ValidationError, RuntimeError) as error:  # an answer that does not parse, or asks for input
            return McpResult(f"the server's answer could not be used: {one_line(error)}", is_error=True)

    async def close(self) -> None:
        if self._open is not None:
            await self._drop(self._open)

    # ---- the session ----

    async def _request(self, send: Callable[[ClientSession], Awaitable[T]]) -> T:
        """``send`` on the open session; once more on a new session when it never ran."""
        for attempt in (1, 2):
            opened = await self._session()
            try:
                return await self._on(opened, send)
            except _Retry as why:
                await self._drop(opened)
                if attempt == 2:
                    raise McpUnavailable(f"{self._name}: {why}") from None
        raise AssertionError("unreachable")

    async def _on(self, opened: _Open, send: Callable[[ClientSession], Awaitable[T]]) -> T:
        """``send`` raced against the session's end: a failed transport ends the session."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        task = asyncio.ensure_future(send(opened.session))
        try:
            await asyncio.wait({task, opened.keeper}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the caller gave up: the SDK sends notifications/cancelled
            task.cancel()
            await asyncio.wait({task})
            raise
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        try:
            return task.result()
        except (MCPError, asyncio.CancelledError) as error:
            if opened.wire.session_gone:
                raise _Retry("its session is gone (HTTP 404 to the session id)") from None
            if isinstance(error, asyncio.CancelledError) or error.code == CONNECTION_CLOSED:
                await asyncio.wait({opened.keeper}, timeout=KEEPER_END_WAIT_S)  # a failed transport ends it
            failure = _failure(opened.keeper)
            if failure is not None and _never_sent(failure):
                raise _Retry(one_line(failure)) from None
            if isinstance(error, MCPError) and error.code != CONNECTION_CLOSED and error.message != _HTTP_FAILED:
                raise  # the server's own answer
            if failure is not None:
                why = one_line(failure)
            elif opened.wire.error_status is not None:
                why = f"HTTP {opened.wire.error_status}"
            else:
                why = "the connection closed during the request"
            raise McpUnavailable(f"{self._name}: {why}") from None

    async def _session(self) -> _Open:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            opened = self._open
            if opened is not None and not opened.keeper.done() and not opened.wire.session_gone:
                return opened
            if opened is not None:
                await self._drop(opened)
            token = await self._token()
            wire, stop = _Wire(), asyncio.Event()
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            ready.add_done_callback(_seen)
            keeper = asyncio.ensure_future(self._keep(token, wire, stop, ready))
            try:
                session = await asyncio.wait_for(asyncio.shield(ready), self._connect_timeout_s)
            except TimeoutError:
                keeper.cancel()
                raise McpUnavailable(
                    f"{self._name}: no answer to the MCP handshake within {self._connect_timeout_s:g} s"
                ) from None
            except McpUnavailable as error:
                raise McpUnavailable(f"{self._name}: {error}") from None
            except BaseException:  # the caller gave up, and so does the handshake
                keeper.cancel()
                raise
            self._open = _Open(session, wire, keeper, stop)
            self._sessions += 1
            if self._sessions > 1:
                self._changes += 1
            return self._open

    async def _token(self) -> str | None:
        config = self.config
        if config.auth != "bearer":
            return None
        if config.token is not None:
            return config.token
        if config.token_secret_arn is None:
            raise McpUnavailable(f"{self._name}: auth bearer without a token")
        try:
            token = await asyncio.to_thread(self._token_source, config.token_secret_arn)
        except Exception as error:
            raise McpUnavailable(f"{self._name}: its token could not be read: {one_line(error)}") from None
        self.config = replace(config, token=token)
        return token

    async def _keep(
        self, token: str | None, wire: _Wire, stop: asyncio.Event, ready: asyncio.Future[ClientSession]
    ) -> BaseException | None:
        """Opens the session and holds it until ``stop`` or a failure (which it returns)."""
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp_types import Implementation

        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        timeout = httpx2.Timeout(30.0, connect=self._connect_timeout_s, read=300.0)
        hooks = {"response": [wire.saw]}
        try:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout, verify=_tls(), event_hooks=hooks) as http,
                streamable_http_client(self.config.url, http_client=http) as (read, write),
                ClientSession(
                    read,
                    write,
                    message_handler=self._on_message,
                    client_info=Implementation(name=CLIENT_NAME, version="1"),
                ) as session,
            ):
                await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except Exception as error:
            if not ready.done():
                why = f"HTTP {wire.error_status} to the MCP handshake" if wire.error_status else one_line(error)
                ready.set_exception(McpUnavailable(why))
            return error
        finally:
            if not ready.done():
                ready.set_exception(McpUnavailable("the session ended during its handshake"))
        return None

    async def _on_message(self, message: IncomingMessage) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._changes += 1

    async def _drop(self, opened: _Open) -> None:
        """Ends a session (a DELETE, when the server is there), in a bounded time."""
        if self._open is opened:
            self._open = None
        opened.stop.set()
        done, _ = await asyncio.wait({opened.keeper}, timeout=STOP_WAIT_S)
        if not done:
            opened.keeper.cancel()
            await asyncio.wait({opened.keeper}, timeout=STOP_WAIT_S)


@cache
def _tls() -> ssl.SSLContext:
    """The TLS settings every session's HTTP client shares: loading the trusted certificates takes
    some 40 ms, paid once per process rather than once per session."""
    import httpx2

    return httpx2.create_ssl_context()


def _seen(future: asyncio.Future[Any]) -> None:
    """Marks a handshake's failure as seen: nobody may be waiting for it any more."""
    if not future.cancelled():
        future.exception()


def _failure(keeper: asyncio.Task[BaseException | None]) -> BaseException | None:
    if not keeper.done() or keeper.cancelled():
        return None
    return keeper.result()


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _never_sent(error: BaseException) -> bool:
    """Whether the transport failed before a request reached the server (the connection was refused)."""
    import httpx2

    return any(isinstance(leaf, httpx2.ConnectError) for leaf in _leaves(error))


def one_line(error: BaseException) -> str:
    """The error's innermost cause, on one line."""
    leaves = _leaves(error)
    leaf = next((leaf for leaf in leaves if str(leaf)), leaves[0])
    text = " ".join(str(leaf).split()) or "no detail"
    return f"{type(leaf).__name__}: {text}"[:300]
