"""The MCP servers' tools one container offers the model, kept between turns.

Each server's list is the client's (cached per server, refreshed after its age or on the server's
``tools/list_changed``: ``shared.adapters.mcp_client``). A server that cannot be reached is left out
for ``RETRY_AFTER_S`` before it is tried again, so an outage costs one connect timeout, not one per
turn. ``offered()`` is what a model request is built from: the tools named for the model
(``shared.core.mcp_tools``) and the servers left out; ``McpTurns`` is what a turn does with them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from shared.adapters.turn_launcher import TurnTask
from shared.core import mcp_tools
from shared.core.mcp_tools import McpTool, Offered, ServerRules
from shared.core.state import SessionState
from shared.flows.commit import Committer
from shared.flows.delivery import Delivery

RETRY_AFTER_S = 30.0
UNREACHABLE_METRIC = "McpServersUnreachable"


class ToolLists(Protocol):
    def tools(self, server: str) -> list[McpTool]: ...


class Counter(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...


class McpRegistry:
    def __init__(
        self,
        clients: ToolLists,
        rules: Sequence[ServerRules],
        logger: Any,
        metrics: Counter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clients = clients
        self.rules = tuple(rules)
        self._log = logger
        self._metrics = metrics
        self._clock = clock
        self._down_until: dict[str, float] = {}
        self._lock = threading.Lock()
        self._last: dict[str, Offered] = {}

    @property
    def servers(self) -> list[str]:
        return [rule.name for rule in self.rules]

    def offered(self) -> tuple[dict[str, Offered], list[str]]:
        """The tools offered now, by the name the model calls them, and the servers left out."""
        tools: list[McpTool] = []
        unreachable: list[str] = []
        now = self._clock()
        for rule in self.rules:
            with self._lock:
                down = self._down_until.get(rule.name, 0.0) > now
            if down:
                unreachable.append(rule.name)
                continue
            try:
                tools.extend(self._clients.tools(rule.name))
            except Exception as error:  # unreachable, refused, or a list that does not parse
                self._log.warning("MCP server left out", extra={"server": rule.name, "why": str(error)[:200]})
                self._metrics.count(UNREACHABLE_METRIC)
                with self._lock:
                    self._down_until[rule.name] = now + RETRY_AFTER_S
                unreachable.append(rule.name)
        found = {tool.model_name: tool for tool in mcp_tools.offered(tools, self.rules)}
        with self._lock:
            self._last = found
        return found, unreachable

    def find(self, model_name: str) -> Offered | None:
        """The tool a call names (the last lists, else listed again)."""
        with self._lock:
            known = self._last.get(model_name)
        if known is not None:
            return known
        return self.offered()[0].get(model_name)

    def failed(self, server: str) -> None:
        """A call found the server gone: leave it out of the next requests for a while."""
        with self._lock:
            self._down_until[server] = self._clock() + RETRY_AFTER_S


class Launcher(Protocol):
    def launch(self, task: TurnTask) -> None: ...


class McpTurns:
    """What a turn does with the MCP servers: their tools offered (a server newly out of reach said once)
    and the calls a commit dispatched launched, each task in an invocation of its own."""

    def __init__(self, registry: McpRegistry, committer: Committer, delivery: Delivery, launcher: Launcher) -> None:
        self.registry = registry
        self._committer = committer
        self._delivery = delivery
        self._launcher = launcher

    def offered(self) -> tuple[dict[str, Offered], list[str]]:
        return self.registry.offered()

    def offered_telling(self, task: TurnTask, state: SessionState) -> tuple[dict[str, Offered], SessionState]:
        """The tools offered; a change of which servers are out of reach committed first (and said)."""
        offered, unreachable = self.registry.offered()
        if unreachable == state.mcp_unreachable:
            return offered, state
        turn_id = state.turn.turn_id if state.turn is not None else None
        committed = self._committer.apply(
            task.session_id, lambda fresh: mcp_tools.reachability(fresh, unreachable, turn_id), hint=state
        )
        if committed is None:
            return offered, state
        self._delivery.deliver(task.endpoint, committed)
        return offered, committed.state

    def launch(self, call_ids: list[str], state: SessionState, endpoint: str) -> None:
        if call_ids:
            self._launcher.launch(TurnTask.for_mcp(state, call_ids, endpoint))
