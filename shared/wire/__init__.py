"""The wire formats: the event protocol, the tools, the model rules, bounded JSON and safe logging.

Imports nothing of the project outside this package.
"""
