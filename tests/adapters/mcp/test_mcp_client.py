"""The MCP client's front (shared.adapters.mcp_client) against a real SDK server on loopback: tool
lists and their hints, results, progress, cancellation, timeouts, list changes, a server down or
restarted, threads at once, bearer tokens, and the SDK left unimported until a server is used."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.mcp.config import McpServerConfig
from shared.adapters.mcp.session import McpUnavailable
from shared.adapters.mcp_client import McpCancelled, McpClients
from shared.core.mcp_tools import McpResult, McpTool
from tests.adapters.mcp.loopback_server import LoopbackMcpServer

ROOT = Path(__file__).resolve().parents[3]


def wait_until(condition: Callable[[], bool], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackMcpServer]:
    running = LoopbackMcpServer().start()
    yield running
    running.stop()


@pytest.fixture
def clients(server: LoopbackMcpServer) -> Iterator[McpClients]:
    made = McpClients([McpServerConfig("demo", server.url)])
    yield made
    made.close()


def call(clients: McpClients, tool: str, arguments: dict[str, Any] | None = None, **options: Any) -> McpResult:
    options.setdefault("on_progress", lambda fraction, message: None)
    options.setdefault("cancelled", lambda: False)
    options.setdefault("timeout_s", 10.0)
    return clients.call(options.pop("server", "demo"), tool, arguments or {}, **options)


# ---- tool lists ----


def test_tools_are_listed_with_their_hints_read(clients: McpClients) -> None:
    tools = {tool.name: tool for tool in clients.tools("demo")}
    assert tools["echo"] == McpTool(
        server="demo",
        name="echo",
        description="the echo tool",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        read_only=True,
        destructive=False,
        idempotent=True,
        open_world=False,
        title="Echo",
    )
    close = tools["close"]
    assert (close.read_only, close.destructive, close.idempotent, close.open_world) == (False, True, True, True)
    # no annotations at all: MCP's defaults (may change things, destructively, in an open world)
    fail = tools["fail"]
    assert (fail.read_only, fail.destructive, fail.idempotent, fail.open_world, fail.title) == (
        False,
        True,
        False,
        True,
        None,
    )


def test_the_list_is_kept_until_it_is_old(server: LoopbackMcpServer) -> None:
    now = [1000.0]
    clients = McpClients([McpServerConfig("demo", server.url)], list_max_age_s=300, clock=lambda: now[0])
    try:
        before = server.list_requests
        clients.tools("demo")
        clients.tools("demo")
        now[0] += 299
        clients.tools("demo")
        assert server.list_requests == before + 1
        now[0] += 2
        clients.tools("demo")
        assert server.list_requests == before + 2
    finally:
        clients.close()


def test_a_list_change_said_by_the_server_is_listed_again() -> None:
    server = LoopbackMcpServer().start()
    clients = McpClients([McpServerConfig("demo", server.url)])
    try:
        assert "picture" in {tool.name for tool in clients.tools("demo")}
        server.set_tools(server.tools[:2])
        assert wait_until(lambda: [tool.name for tool in clients.tools("demo")] == ["echo", "close"])
        listed = server.list_requests
        clients.tools("demo")
        assert server.list_requests == listed  # listed once more, then kept again
    finally:
        clients.close()
        server.stop()


# ---- calls and their results ----


def test_a_call_answers_its_text_on_one_session_kept_open(clients: McpClients, server: LoopbackMcpServer) -> None:
    known = len(server.session_ids)
    assert call(clients, "echo", {"text": "hello"}) == McpResult("hello", is_error=False)
    assert call(clients, "echo", {"text": "again"}).text == "again"
    assert len(server.session_ids) == known + 1
    assert server.calls[-1] == ("echo", {"text": "again"}, "ok")


def test_a_tool_error_is_a_result_marked_so(clients: McpClients) -> None:
    assert call(clients, "fail") == McpResult("the tool failed: no such issue", is_error=True)
    assert call(clients, "nosuch").is_error


def test_other_content_is_summarised_and_structured_content_given_as_json(clients: McpClients) -> None:
    assert call(clients, "picture").text == "a chart\n[image: image/png, 1234 bytes]"
    assert call(clients, "numbers").text == '{"sum":3,"items":[1,2]}'


def test_a_long_result_is_cut_with_a_note(clients: McpClients) -> None:
    text = call(clients, "big", {"size": 300_000}).text
    assert len(text) <= 200_000
    assert text.startswith("x" * 1000)
    assert "cut here" in text[-100:]
    assert call(clients, "big", {"size": 200_000}).text == "x" * 200_000


def test_progress_reaches_the_caller_on_its_own_thread(clients: McpClients) -> None:
    seen: list[tuple[float | None, str, int]] = []
    result = call(
        clients,
        "slow",
        {"steps": 3, "step_s": 0.02},
        on_progress=lambda fraction, message: seen.append((fraction, message, threading.get_ident())),
    )
    assert result.text == "done"
    assert [(fraction, message) for fraction, message, _ in seen] == [
        (pytest.approx(1 / 3), "step 1 of 3"),
        (pytest.approx(2 / 3), "step 2 of 3"),
        (1.0, "step 3 of 3"),
    ]
    assert {thread for _, _, thread in seen} == {threading.get_ident()}


def test_a_cancelled_call_is_cancelled_on_its_server(clients: McpClients, server: LoopbackMcpServer) -> None:
    progressed = threading.Event()
    arguments = {"steps": 500, "step_s": 0.02, "tag": "cancel"}
    with pytest.raises(McpCancelled):
        call(clients, "slow", arguments, on_progress=lambda *_: progressed.set(), cancelled=progressed.is_set)
    assert wait_until(lambda: ("slow", arguments, "cancelled") in server.calls)
    assert call(clients, "echo", {"text": "still there"}).text == "still there"


def test_a_call_past_its_time_is_cancelled_on_its_server(clients: McpClients, server: LoopbackMcpServer) -> None:
    arguments = {"steps": 500, "step_s": 0.02, "tag": "timeout"}
    with pytest.raises(TimeoutError):
        call(clients, "slow", arguments, timeout_s=0.3)
    assert wait_until(lambda: ("slow", arguments, "cancelled") in server.calls)


def test_two_threads_call_at_once_on_the_one_session(clients: McpClients, server: LoopbackMcpServer) -> None:
    results: dict[str, McpResult] = {}
    started = threading.Event()

    def slow() -> None:
        results["slow"] = call(clients, "slow", {"steps": 10, "step_s": 0.05}, on_progress=lambda *_: started.set())

    known = len(server.session_ids)
    thread = threading.Thread(target=slow)
    thread.start()
    assert started.wait(5)
    results["echo"] = call(clients, "echo", {"text": "meanwhile"})
    assert "slow" not in results  # answered while the slow call was running
    thread.join(10)
    assert results == {"echo": McpResult("meanwhile"), "slow": McpResult("done")}
    assert len(server.session_ids) == known + 1


def test_threads_first_using_a_server_at_once_share_one_session_and_one_listing() -> None:
    server = LoopbackMcpServer().start()
    clients = McpClients([McpServerConfig("demo", server.url)])
    together = threading.Barrier(6)
    answers: list[object] = []

    def use(index: int) -> None:
        together.wait()
        answers.append(len(clients.tools("demo")))
        answers.append(call(clients, "echo", {"text": str(index)}).text)

    try:
        threads = [threading.Thread(target=use, args=(index,)) for index in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert sorted(map(str, answers)) == sorted([str(len(server.tools))] * 6 + [str(index) for index in range(6)])
        assert server.list_requests == 1
        assert len(server.session_ids) == 1
    finally:
        clients.close()
        server.stop()


# ---- servers gone, back, or guarded ----


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_down_is_unavailable() -> None:
    clients = McpClients([McpServerConfig("gone", f"http://127.0.0.1:{free_port()}/mcp")])
    try:
        with pytest.raises(McpUnavailable, match=r"gone.*Connect"):
            clients.tools("gone")
        with pytest.raises(McpUnavailable):
            call(clients, "echo", server="gone")
        with pytest.raises(McpUnavailable, match="no MCP server named 'other'"):
            clients.tools("other")
    finally:
        clients.close()


def test_a_server_that_never_answers_the_handshake_is_unavailable() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        clients = McpClients(
            [McpServerConfig("mute", f"http://127.0.0.1:{silent.getsockname()[1]}/mcp")], connect_timeout_s=0.3
        )
        try:
            with pytest.raises(McpUnavailable, match="handshake"):
                clients.tools("mute")
        finally:
            clients.close()


def test_a_restarted_server_gets_a_new_session_and_the_call() -> None:
    server = LoopbackMcpServer().start()
    clients = McpClients([McpServerConfig("demo", server.url)])
    try:
        clients.tools("demo")
        assert call(clients, "echo", {"text": "one"}).text == "one"
        server.stop()
        server.start()  # the same port; the first session is unknown to it
        assert call(clients, "echo", {"text": "two"}).text == "two"
        assert len(server.session_ids) == 2
        assert [entry[0] for entry in server.calls] == ["echo", "echo"]  # sent once on the new server
        assert server.list_requests == 1
        clients.tools("demo")
        assert server.list_requests == 2  # a new server, maybe with other tools: listed again
    finally:
        clients.close()
        server.stop()


def test_a_server_down_then_up_is_reached_again() -> None:
    server = LoopbackMcpServer().start()
    clients = McpClients([McpServerConfig("demo", server.url)])
    try:
        assert call(clients, "echo", {"text": "one"}).text == "one"
        server.stop()
        with pytest.raises(McpUnavailable):
            call(clients, "echo", {"text": "lost"})
        server.start()
        assert call(clients, "echo", {"text": "back"}).text == "back"
    finally:
        clients.close()
        server.stop()


def test_a_server_gone_mid_call_is_unavailable_and_the_call_not_sent_again() -> None:
    server = LoopbackMcpServer().start()
    clients = McpClients([McpServerConfig("demo", server.url)])
    progressed = threading.Event()
    stopper = threading.Thread(target=lambda: (progressed.wait(5), server.stop()))
    try:
        stopper.start()
        with pytest.raises(McpUnavailable, match="connection closed"):
            call(clients, "slow", {"steps": 500, "step_s": 0.02}, on_progress=lambda *_: progressed.set())
        assert [entry[0] for entry in server.calls] == ["slow"]
    finally:
        stopper.join(10)
        clients.close()
        server.stop()


def test_a_bearer_token_is_sent() -> None:
    server = LoopbackMcpServer(token="s3cret").start()
    good = McpClients([McpServerConfig("demo", server.url, auth="bearer", token="s3cret")])
    from_secret = McpClients(
        [McpServerConfig("demo", server.url, auth="bearer", token_secret_arn="arn:secret")],
        token_source=lambda arn: "s3cret" if arn == "arn:secret" else "",
    )
    bad = McpClients([McpServerConfig("demo", server.url, auth="bearer", token="wrong")])
    tokenless = McpClients([McpServerConfig("demo", server.url, auth="bearer")])  # listed, not signed in to yet
    try:
        assert call(good, "whoami").text == "Bearer s3cret"
        assert call(from_secret, "whoami").text == "Bearer s3cret"
        with pytest.raises(McpUnavailable, match="401"):
            bad.tools("demo")
        with pytest.raises(McpUnavailable, match="without a token"):
            tokenless.tools("demo")
    finally:
        for clients in (good, from_secret, bad, tokenless):
            clients.close()
        server.stop()


def test_closed_clients_call_no_more(server: LoopbackMcpServer) -> None:
    clients = McpClients([McpServerConfig("demo", server.url)])
    assert call(clients, "echo", {"text": "x"}).text == "x"
    clients.close()
    with pytest.raises(McpUnavailable, match="closed"):
        call(clients, "echo", {"text": "y"})


# ---- the SDK is loaded only when used ----


def test_importing_the_client_does_not_import_the_sdk() -> None:
    script = (
        "import sys\n"
        "from shared.adapters.mcp.config import servers_from_env\n"
        "from shared.adapters.mcp_client import McpClients\n"
        'McpClients(servers_from_env(\'[{"name": "demo", "url": "http://127.0.0.1:9/mcp"}]\'))\n'
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'httpx2'))\n"
        "print(loaded)\n"
    )
    answer = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == "[]"
