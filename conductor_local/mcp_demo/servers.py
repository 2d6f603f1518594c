"""The MCP servers the local stack gives the conductor: how ``--mcp`` values read, and the
``CONDUCTOR_MCP_SERVERS`` value the handlers get.

A value is ``demo`` (the demo server, started with the stack), an ``http(s)://`` URL (named ``mcp1``,
``mcp2``… in order, skipping names already taken) or ``name=URL`` (a server name: a lower-case letter,
then up to 19 lower-case letters, digits or ``-``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

MCP_SERVERS_ENV = "CONDUCTOR_MCP_SERVERS"
DEMO = "demo"
AUTO_NAME_PREFIX = "mcp"
SERVER_NAME = re.compile(r"[a-z][a-z0-9-]{0,19}")
URL_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class ServerSpec:
    """One ``--mcp`` value read: the server's name and URL (None: the demo server, its URL known once started)."""

    name: str
    url: str | None

    @property
    def is_demo(self) -> bool:
        return self.url is None


def _checked_url(url: str, spec: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in URL_SCHEMES or not parts.hostname or any(c.isspace() for c in url):
        raise ValueError(f"{spec!r} is not an MCP server: use demo, an http(s) URL or name=URL")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"{spec!r} is not an MCP server: its URL's port is not one from 1 to 65535")
    return url


def read_spec(spec: str) -> tuple[str | None, str | None]:
    """``(name, url)`` for one value: no name (None) for a bare URL, no URL (None) for the demo server.
    Raises ValueError with a sentence a person can act on."""
    value = spec.strip()
    if value == DEMO:
        return DEMO, None
    name, sep, url = value.partition("=")
    if sep and "://" not in name:
        if not SERVER_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not an MCP server name: a lower-case letter, then up to 19 lower-case letters, "
                "digits or -"
            )
        return name, _checked_url(url.strip(), spec)
    return None, _checked_url(value, spec)


def read_specs(specs: Sequence[str]) -> tuple[ServerSpec, ...]:
    """Every value read and named; a name given twice (the demo's too) is a ValueError."""
    read = [read_spec(spec) for spec in specs]
    taken: set[str] = set()
    for name, _ in read:
        if name is None:
            continue
        if name in taken:
            raise ValueError(f"two MCP servers are named {name!r}: give one another name (name=URL)")
        taken.add(name)
    servers = []
    number = 0
    for name, url in read:
        if name is None:
            number += 1
            while f"{AUTO_NAME_PREFIX}{number}" in taken:
                number += 1
            name = f"{AUTO_NAME_PREFIX}{number}"
            taken.add(name)
        servers.append(ServerSpec(name, url))
    return tuple(servers)


def servers_setting(servers: Sequence[ServerSpec], demo_url: str | None) -> list[dict[str, str]]:
    """The servers as ``CONDUCTOR_MCP_SERVERS`` lists them (no authentication locally)."""
    setting = []
    for server in servers:
        url = server.url if server.url is not None else demo_url
        if url is None:
            raise ValueError("the demo MCP server is not started: its URL is not known yet")
        setting.append({"name": server.name, "url": url, "auth": "none"})
    return setting


def servers_env(servers: Sequence[ServerSpec], demo_url: str | None) -> Mapping[str, str | None]:
    """``CONDUCTOR_MCP_SERVERS`` for these servers; unset (None) when there are none."""
    if not servers:
        return {MCP_SERVERS_ENV: None}
    return {MCP_SERVERS_ENV: json.dumps(servers_setting(servers, demo_url), separators=(",", ":"))}
