"""A local Amazon Bedrock AgentCore Memory data plane (``LocalAgentCoreMemoryServer``): events,
sessions and long-term records in the real wire protocol, with deterministic stand-ins for the
strategies' extraction (``extraction``) and the semantic search (``retrieval``)."""

from conductor_local.agentcore_memory.server import LocalAgentCoreMemoryServer
from conductor_local.agentcore_memory.store import DEFAULT_STRATEGIES, LOCAL_MEMORY_ID, MemoryStore, Strategy

__all__ = ["DEFAULT_STRATEGIES", "LOCAL_MEMORY_ID", "LocalAgentCoreMemoryServer", "MemoryStore", "Strategy"]
