"""The flows that run a request: a frame through $default (service), a turn (turn runner,
message stream, delivery), the sessions API (session service), speculation and memory.

They tie the pure core to the adapters.
"""
