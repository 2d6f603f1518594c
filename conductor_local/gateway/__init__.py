"""The local API Gateway: the WebSocket API ($connect/$default/$disconnect), its management API
(@connections) and the HTTP API in front of the sessions Lambda.
"""
