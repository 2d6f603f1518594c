"""The local stack's MCP servers: the demo server started and stopped with it, every server named to
the handlers in ``CONDUCTOR_MCP_SERVERS`` for the stack's lifetime, the variable restored after."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import anyio
import pytest
from mcp import Client

from conductor_local.bedrock.server import message
from conductor_local.mcp_demo.servers import MCP_SERVERS_ENV
from conductor_local.stack import LocalStack
from tests.local_apigw.conftest import StandInRoutes


def _brain(model_id: str, request: dict[str, Any]) -> Any:
    return message("ok")


def _stack(**options: Any) -> LocalStack:
    return LocalStack(port=0, quiet=True, handlers=StandInRoutes().handlers(), brain_responder=_brain, **options)


def test_the_stack_names_its_mcp_servers_to_the_handlers_and_restores_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MCP_SERVERS_ENV, "what was set before")
    servers = ["demo", "https://mcp.example.com/mcp", "tracker=http://127.0.0.1:9/mcp"]

    with _stack(mcp_servers=servers, memory=False, mcp_demo_ci_seconds=2.0) as stack:
        demo = stack.mcp_demo
        assert demo is not None and demo.ci_seconds == 2.0
        setting = json.loads(os.environ[MCP_SERVERS_ENV])
        assert setting == [
            {"name": "demo", "url": demo.url, "auth": "none"},
            {"name": "mcp1", "url": "https://mcp.example.com/mcp", "auth": "none"},
            {"name": "tracker", "url": "http://127.0.0.1:9/mcp", "auth": "none"},
        ]
        assert stack.mcp_server_setting() == setting
        assert demo.url.startswith("http://127.0.0.1:") and demo.url.endswith("/mcp")

        async def listed() -> list[str]:
            async with Client(demo.url, mode="legacy") as client:
                return [tool.name for tool in (await client.list_tools()).tools]

        assert anyio.run(listed) == ["issues.search", "issues.close", "ci.run"]
        port = demo.port

    assert stack.mcp_demo is None
    assert os.environ[MCP_SERVERS_ENV] == "what was set before"
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_without_mcp_servers_the_variable_is_unset_while_the_stack_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MCP_SERVERS_ENV, '[{"name": "elsewhere", "url": "https://mcp.example.com/mcp"}]')

    with _stack(memory=False) as stack:
        assert stack.mcp_demo is None and stack.mcp_server_setting() == []
        assert MCP_SERVERS_ENV not in os.environ

    assert json.loads(os.environ[MCP_SERVERS_ENV])[0]["name"] == "elsewhere"


def test_urls_alone_start_no_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MCP_SERVERS_ENV, raising=False)

    with _stack(mcp_servers=["http://127.0.0.1:9/mcp"], memory=False) as stack:
        assert stack.mcp_demo is None
        assert json.loads(os.environ[MCP_SERVERS_ENV]) == [
            {"name": "mcp1", "url": "http://127.0.0.1:9/mcp", "auth": "none"}
        ]

    assert MCP_SERVERS_ENV not in os.environ


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        (["gopher://x.example"], "is not an MCP server"),
        (["demo", "demo"], "two MCP servers are named 'demo'"),
        (["Bad=http://x.example"], "'Bad' is not an MCP server name"),
    ],
)
def test_a_bad_server_is_refused_before_anything_starts(servers: list[str], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        LocalStack(port=0, quiet=True, mcp_servers=servers)
