"""The conversation with a conductor: ``ConductorClient``, the turns it takes, the tool calls it runs
and the capabilities it announces."""
