"""The MCP servers a stage names (CONDUCTOR_MCP_SERVERS), and a tool's result read as bounded text."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from shared.adapters.mcp.config import McpServerConfig, servers_from_env
from shared.adapters.mcp.results import MAX_RESULT_CHARS, bounded, render
from shared.core.mcp_tools import McpResult


def test_no_servers_when_the_variable_is_absent_or_blank() -> None:
    assert servers_from_env(None) == []
    assert servers_from_env("  ") == []
    assert servers_from_env("[]") == []


def test_servers_are_read_with_their_lists() -> None:
    raw = json.dumps(
        [
            {"name": "demo", "url": "http://127.0.0.1:8765/mcp"},
            {
                "name": "git-hub2",
                "url": "https://mcp.example.com/mcp",
                "auth": "bearer",
                "tokenSecretArn": "arn:aws:secretsmanager:eu-west-1:1:secret:mcp",
                "allow": ["issues.close"],
                "deny": ["repo.delete"],
                "background": ["ci.run"],
            },
        ]
    )
    demo, github = servers_from_env(raw)
    assert demo == McpServerConfig("demo", "http://127.0.0.1:8765/mcp")
    assert github == McpServerConfig(
        name="git-hub2",
        url="https://mcp.example.com/mcp",
        auth="bearer",
        allow=("issues.close",),
        deny=("repo.delete",),
        background=("ci.run",),
        token_secret_arn="arn:aws:secretsmanager:eu-west-1:1:secret:mcp",
    )


def test_a_token_is_never_shown() -> None:
    (server,) = servers_from_env('[{"name": "demo", "url": "http://h/mcp", "auth": "bearer", "token": "s3cret"}]')
    assert server.token == "s3cret"
    assert "s3cret" not in repr(server)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{", "not JSON"),
        ('{"name": "demo"}', "JSON list"),
        ('["demo"]', "entry 0: must be an object"),
        ('[{"name": "Demo", "url": "http://h/mcp"}]', "entry 0: name 'Demo'"),
        ('[{"name": "a-very-long-server-name", "url": "http://h/mcp"}]', "name"),
        ('[{"name": "demo", "url": "ftp://h/mcp"}]', "url"),
        ('[{"name": "demo"}]', "url"),
        ('[{"name": "demo", "url": "http://h/mcp", "auth": "basic"}]', "auth 'basic'"),
        ('[{"name": "demo", "url": "http://h/mcp", "auth": "bearer", "token": ""}]', "token must be a non-empty"),
        ('[{"name": "demo", "url": "http://h/mcp", "alow": ["x"]}]', r"unknown field\(s\) alow"),
        ('[{"name": "demo", "url": "http://h/mcp", "deny": "x"}]', "deny must be a list"),
        ('[{"name": "demo", "url": "http://h/mcp"}, {"name": "demo", "url": "http://g/mcp"}]', r"entry 1:.*twice"),
    ],
)
def test_a_bad_entry_says_which_and_why(raw: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        servers_from_env(raw)


def result(*content: Any, structured: Any = None, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured, is_error=is_error)


def test_text_is_joined_and_other_content_summarised() -> None:
    read = render(
        result(
            types.TextContent(text="first"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///notes.md", text="the notes", mime_type="text/markdown")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///a.bin", blob="AAE=", mime_type=None)
            ),
            types.ResourceLink(name="report", uri="https://example.com/report"),
            structured={"ignored": "when text came"},
        )
    )
    assert read == McpResult(
        "first\n[audio: audio/wav, 3 bytes]\nthe notes\n[resource: file:///a.bin, application/octet-stream, 2 bytes]"
        "\n[resource link: report, https://example.com/report]"
    )


def test_structured_content_is_the_text_when_none_came() -> None:
    assert render(result(structured={"a": [1, "é"]}, is_error=True)) == McpResult('{"a":[1,"é"]}', is_error=True)
    assert render(result()) == McpResult("")


def test_the_bound_holds_the_note() -> None:
    assert bounded("x" * MAX_RESULT_CHARS) == "x" * MAX_RESULT_CHARS
    for size in (MAX_RESULT_CHARS + 1, 10 * MAX_RESULT_CHARS):
        cut = bounded("x" * size)
        assert len(cut) <= MAX_RESULT_CHARS
        assert cut.endswith("more characters of the result were left out]")
