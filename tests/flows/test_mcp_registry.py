"""The MCP servers' tools a container offers: a server out of reach costs one try per 30 s, not one per turn."""

from __future__ import annotations

import logging

from shared.core.mcp_tools import McpTool, ServerRules
from shared.flows.mcp_registry import RETRY_AFTER_S, McpRegistry


class Lists:
    def __init__(self) -> None:
        self.down: set[str] = set()
        self.asked: list[str] = []

    def tools(self, server: str) -> list[McpTool]:
        self.asked.append(server)
        if server in self.down:
            raise ConnectionError(f"{server} refused the connection")
        return [McpTool(server, "issues.search", "Find issues", read_only=True)]


class Counts:
    def __init__(self) -> None:
        self.counted: dict[str, float] = {}

    def count(self, name: str, value: float = 1) -> None:
        self.counted[name] = self.counted.get(name, 0) + value


def test_a_server_out_of_reach_is_left_out_and_tried_again_after_a_while() -> None:
    lists, now = Lists(), [1000.0]
    registry = McpRegistry(
        lists, [ServerRules("demo"), ServerRules("ci")], logging.getLogger("t"), Counts(), clock=lambda: now[0]
    )
    lists.down = {"ci"}
    offered, unreachable = registry.offered()
    assert list(offered) == ["mcp.demo.issues_search"] and unreachable == ["ci"]
    registry.offered()
    assert lists.asked.count("ci") == 1  # not tried again on the next turn
    lists.down = set()
    now[0] += RETRY_AFTER_S + 1
    offered, unreachable = registry.offered()
    assert set(offered) == {"mcp.demo.issues_search", "mcp.ci.issues_search"} and unreachable == []


def test_a_call_that_found_its_server_gone_leaves_it_out_too() -> None:
    lists = Lists()
    registry = McpRegistry(lists, [ServerRules("demo")], logging.getLogger("t"), Counts())
    assert registry.find("mcp.demo.issues_search") is not None
    registry.failed("demo")
    assert registry.offered() == ({}, ["demo"])
