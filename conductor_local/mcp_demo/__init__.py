"""The demo MCP server of the local stack (``voiceide-conductor local --mcp demo``: ``server``, its issues
in ``issues``) and how the stack names its MCP servers to the handlers (``servers``, which never loads
the MCP SDK)."""
