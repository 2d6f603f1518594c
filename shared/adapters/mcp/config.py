"""The MCP servers a stage names: ``CONDUCTOR_MCP_SERVERS``, a JSON list::

[{"name": "demo", "url": "http://127.0.0.1:8765/mcp", "auth": "none" | "bearer",
  "token": "literal, local only", "tokenSecretArn": "arn:aws:secretsmanager:…",
  "allow": ["tool"], "deny": ["tool"], "background": ["tool"]}]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

SERVER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_KEYS = frozenset({"name", "url", "auth", "token", "tokenSecretArn", "allow", "deny", "background"})
_URL = re.compile(r"^https?://[^/\s]+")


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    url: str
    auth: Literal["none", "bearer"] = "none"
    token: str | None = field(default=None, repr=False)
    allow: tuple[str, ...] = ()  # run without asking, whatever their hints
    deny: tuple[str, ...] = ()  # never offered
    background: tuple[str, ...] = ()  # always run in the background
    # auth "bearer" without a token: the token's secret. Neither: the server is listed but cannot be
    # signed in to (McpUnavailable on use), as an AgentCore Gateway is until the conductor holds a token
    token_secret_arn: str | None = None


def servers_from_env(raw: str | None) -> list[McpServerConfig]:
    """The servers ``raw`` names; absent or blank: none. A bad entry: ValueError saying which and why."""
    if raw is None or not raw.strip():
        return []
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"CONDUCTOR_MCP_SERVERS is not JSON: {error}") from None
    if not isinstance(entries, list):
        raise ValueError("CONDUCTOR_MCP_SERVERS must be a JSON list of servers")
    servers: list[McpServerConfig] = []
    for index, entry in enumerate(entries):
        server = _server(index, entry)
        if any(known.name == server.name for known in servers):
            raise ValueError(f"CONDUCTOR_MCP_SERVERS entry {index}: server {server.name!r} is named twice")
        servers.append(server)
    return servers


def _server(index: int, entry: object) -> McpServerConfig:
    def bad(why: str) -> ValueError:
        return ValueError(f"CONDUCTOR_MCP_SERVERS entry {index}: {why}")

    if not isinstance(entry, dict):
        raise bad("must be an object")
    if unknown := sorted(set(entry) - _KEYS):
        raise bad(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})")
    name, url, auth = entry.get("name"), entry.get("url"), entry.get("auth", "none")
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise bad(f"name {name!r} must match {SERVER_NAME.pattern}")
    if not isinstance(url, str) or not _URL.match(url):
        raise bad(f"url {url!r} must be an http(s) URL")
    if auth not in ("none", "bearer"):
        raise bad(f'auth {auth!r} must be "none" or "bearer"')
    token, secret = entry.get("token"), entry.get("tokenSecretArn")
    for key, value in (("token", token), ("tokenSecretArn", secret)):
        if value is not None and (not isinstance(value, str) or not value):
            raise bad(f"{key} must be a non-empty string")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("allow", "deny", "background"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise bad(f"{key} must be a list of tool names")
        lists[key] = tuple(value)
    return McpServerConfig(
        name=name,
        url=url,
        auth="bearer" if auth == "bearer" else "none",
        token=token,
        allow=lists["allow"],
        deny=lists["deny"],
        background=lists["background"],
        token_secret_arn=secret,
    )


def secret_token(arn: str) -> str:
    """A bearer token kept in Secrets Manager: the secret's string (botocore, as the Lambdas' clients)."""
    import botocore.session

    client = botocore.session.get_session().create_client("secretsmanager")
    return str(client.get_secret_value(SecretId=arn)["SecretString"]).strip()
