"""The parts of the MCP client (``shared.adapters.mcp_client`` is its front): the servers' settings,
one server's session on the event loop, and results and tool lists as the conductor reads them.

Nothing here imports the ``mcp`` SDK at module level: it is imported inside the functions that talk
to a server, so a stage that names none never loads it.
"""
