"""The demo MCP server, driven by the MCP SDK's own client over streamable HTTP: its tools and their
annotations, each tool, progress, cancellation, a tool list that changes; on a handshake-era session
(``legacy``) and on a 2026-07-28 one (``auto``)."""

from __future__ import annotations

import contextlib
import http.client
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged

from conductor_local.mcp_demo.issues import INJECTED_INSTRUCTION
from conductor_local.mcp_demo.server import (
    ALL_TOOLS,
    CANCELLED,
    CI_RUN,
    CLOSE,
    DEFAULT_TOOLS,
    REOPEN,
    RUNNING,
    SEARCH,
    Call,
    DemoMcpServer,
)

MODES = ["legacy", "auto"]
WAIT_S = 10.0


@pytest.fixture
def server() -> Iterator[DemoMcpServer]:
    with DemoMcpServer(ci_seconds=1.0, progress_interval=0.25) as demo:
        yield demo


def run(server: DemoMcpServer, mode: str, body: Callable[[Client], Awaitable[Any]], **options: Any) -> Any:
    """``body(client)`` with an SDK client connected to ``server`` in ``mode``."""

    async def main() -> Any:
        with anyio.fail_after(WAIT_S):
            async with Client(server.url, mode=mode, **options) as client:
                return await body(client)

    return anyio.run(main)


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
def test_it_lists_its_tools_with_their_annotations(server: DemoMcpServer, mode: str) -> None:
    async def body(client: Client) -> tuple[str, list[types.Tool]]:
        return client.protocol_version, (await client.list_tools()).tools

    version, tools = run(server, mode, body)

    assert (version == "2026-07-28") is (mode == "auto")
    assert [tool.name for tool in tools] == list(DEFAULT_TOOLS) == ["issues.search", "issues.close", "ci.run"]
    hints = {tool.name: tool.annotations for tool in tools}
    assert hints[SEARCH] is not None and hints[SEARCH].read_only_hint is True
    assert hints[CLOSE] is not None and (hints[CLOSE].read_only_hint, hints[CLOSE].destructive_hint) == (False, True)
    ci = hints[CI_RUN]
    assert ci is not None and (ci.read_only_hint, ci.destructive_hint, ci.idempotent_hint) == (False, False, False)
    schemas = {tool.name: tool.input_schema for tool in tools}
    assert schemas[SEARCH]["properties"]["query"]["type"] == "string"
    assert schemas[CLOSE]["properties"]["id"]["type"] == "integer"
    assert schemas[CI_RUN]["properties"]["branch"]["type"] == "string"
    assert all(tool.description for tool in tools)


@pytest.mark.parametrize("mode", MODES)
def test_search_finds_issues_one_carrying_an_injected_instruction(server: DemoMcpServer, mode: str) -> None:
    async def body(client: Client) -> list[types.CallToolResult]:
        return [
            await client.call_tool(SEARCH, {"query": "login"}),
            await client.call_tool(SEARCH, {"query": "build crash"}),
            await client.call_tool(SEARCH, {"query": "nothing like it"}),
        ]

    login, two, none = run(server, mode, body)

    assert not login.is_error and text(login).startswith("#3 [open] Login token expires too early")
    assert INJECTED_INSTRUCTION in text(login)
    assert [line.split()[0] for line in text(two).splitlines()] == ["#1", "#2"]
    assert text(none) == "No issue matches 'nothing like it'."
    assert server.calls == [
        Call(SEARCH, {"query": "login"}, "found 1"),
        Call(SEARCH, {"query": "build crash"}, "found 2"),
        Call(SEARCH, {"query": "nothing like it"}, "found 0"),
    ]


def test_close_closes_once_and_an_unknown_issue_is_a_tool_error(server: DemoMcpServer) -> None:
    async def body(client: Client) -> list[types.CallToolResult]:
        return [
            await client.call_tool(CLOSE, {"id": 2}),
            await client.call_tool(CLOSE, {"id": 2}),
            await client.call_tool(CLOSE, {"id": 99}),
            await client.call_tool(SEARCH, {"query": "swift"}),
        ]

    closed, again, unknown, search = run(server, "legacy", body)

    assert not closed.is_error and text(closed) == "Closed issue #2: Build fails on the Swift 6 toolchain."
    assert not again.is_error and text(again) == "Issue #2 was already closed."
    assert unknown.is_error and "There is no issue #99." in text(unknown)
    assert text(search).startswith("#2 [closed]")
    assert [call.outcome for call in server.calls] == ["closed", "already closed", "error: no issue #99", "found 1"]


@pytest.mark.parametrize("mode", MODES)
def test_ci_run_reports_its_progress_until_it_passes(server: DemoMcpServer, mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, said: str | None) -> None:
        progress.append((done, total, said))

    async def body(client: Client) -> types.CallToolResult:
        return await client.call_tool(CI_RUN, {"branch": "main"}, progress_callback=on_progress)

    result = run(server, mode, body)

    assert not result.is_error and text(result) == "CI on main passed: 4 of 4 steps."
    assert progress == [(k, 4, f"step {k} of 4") for k in range(1, 5)]
    assert server.calls == [Call(CI_RUN, {"branch": "main"}, "passed")]


@pytest.mark.parametrize("mode", MODES)
def test_cancelling_ci_run_stops_the_job(mode: str) -> None:
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, said: str | None) -> None:
        progress.append(done)

    with DemoMcpServer(ci_seconds=60.0, progress_interval=0.05) as server:

        async def body(client: Client) -> None:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, CI_RUN, {"branch": "long"}, None, on_progress)
                while len(progress) < 2:  # running, and the server said so
                    await anyio.sleep(0.01)
                tasks.cancel_scope.cancel()
            while server.calls[-1].outcome == RUNNING:
                await anyio.sleep(0.01)

        run(server, mode, body)

        assert server.calls == [Call(CI_RUN, {"branch": "long"}, CANCELLED)]
        assert len(progress) < 60 / 0.05


def test_a_changed_tool_list_is_announced_on_a_handshake_session(server: DemoMcpServer) -> None:
    announced = 0
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        nonlocal announced
        if isinstance(message, types.ToolListChangedNotification):
            announced += 1
            changed.set()

    async def body(client: Client) -> tuple[bool, list[str]]:
        nonlocal changed
        listed = client.server_capabilities.tools is not None and client.server_capabilities.tools.list_changed
        await client.list_tools()
        await anyio.to_thread.run_sync(server.set_tools, [SEARCH, REOPEN])
        await changed.wait()
        tools = [tool.name for tool in (await client.list_tools()).tools]
        changed = anyio.Event()
        await anyio.to_thread.run_sync(server.notify_tools_changed)  # the same list, announced again
        await changed.wait()
        return bool(listed), tools

    list_changed, tools = run(server, "legacy", body, message_handler=on_message)

    assert list_changed  # the handshake says the list may change
    assert tools == [SEARCH, REOPEN] == list(server.tools)
    assert announced == 2


def test_a_changed_tool_list_is_announced_to_listeners(server: DemoMcpServer) -> None:
    async def body(client: Client) -> tuple[Any, list[str]]:
        async with client.listen(tools_list_changed=True) as subscription:
            await anyio.to_thread.run_sync(server.set_tools, [CI_RUN])
            event = await anext(aiter(subscription))
        return event, [tool.name for tool in (await client.list_tools()).tools]

    event, tools = run(server, "auto", body)

    assert isinstance(event, ToolsListChanged)
    assert tools == [CI_RUN]


def test_reopen_once_offered(server: DemoMcpServer) -> None:
    server.set_tools(ALL_TOOLS)

    async def body(client: Client) -> list[str]:
        return [
            text(await client.call_tool(REOPEN, {"id": 5})),
            text(await client.call_tool(REOPEN, {"id": 5})),
        ]

    assert run(server, "legacy", body) == [
        "Reopened issue #5: Search misses files in hidden folders.",
        "Issue #5 is already open.",
    ]


def test_set_tools_knows_only_its_own() -> None:
    demo = DemoMcpServer()
    with pytest.raises(ValueError, match=r"no tool issues\.delete"):
        demo.set_tools([SEARCH, "issues.delete"])
    demo.set_tools([CLOSE])  # not started: changed, nobody to tell
    assert demo.tools == (CLOSE,)


def test_it_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        DemoMcpServer(host="0.0.0.0")


@pytest.mark.parametrize("foreign", [{"Host": "rebound.example:80"}, {"Origin": "https://page.example"}])
def test_a_web_page_is_refused(server: DemoMcpServer, foreign: dict[str, str]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
    try:
        body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **foreign}
        connection.request("POST", "/mcp", body, headers)
        response = connection.getresponse()
        assert response.status in (403, 421)
    finally:
        connection.close()
    assert server.calls == []


def test_stop_ends_open_sessions_and_the_port(server: DemoMcpServer) -> None:
    port = server.port
    stopped = False

    async def body(client: Client) -> None:
        nonlocal stopped
        await client.list_tools()  # the session's standalone event stream is open now
        await anyio.to_thread.run_sync(server.stop)
        stopped = True

    with contextlib.suppress(Exception):  # the client may only learn on leaving that the server is gone
        run(server, "legacy", body)

    assert stopped
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
