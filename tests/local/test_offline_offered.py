"""The offline brain's ``tools`` directive: the names of the tools the request's ``tool_call`` wrapper
offered, in the order given."""

from __future__ import annotations

from typing import Any

import pytest

from conductor_local.bedrock.offline_brain import OfflineBrain
from conductor_local.bedrock.offline_offered import NO_TOOLS, is_tools, offered_tools, offered_tools_answer
from conductor_local.bedrock.server import LocalBedrockServer
from shared.adapters.brain import BedrockBrain
from shared.core.messages import text_block
from shared.core.tool_catalog import default_catalog
from shared.core.wrapper import ClientTool, wrapper_tool_spec
from shared.wire.model_rules import Inference

from .conftest import MODEL_ID, make_client

MCP_TOOL = ClientTool(name="mcp.demo.issues_search", description="Search the project's issues.")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [text_block(text)]}


@pytest.mark.parametrize(("said", "directive"), [("tools", True), ("Tools.", True), (" TOOLS! ", True)])
def test_the_tools_directive(said: str, directive: bool) -> None:
    assert is_tools(said) is directive


@pytest.mark.parametrize("said", ["what tools do you have", "tools please", "", "call tools.list"])
def test_other_speech_is_not_the_tools_directive(said: str) -> None:
    assert not is_tools(said)


def test_the_names_come_from_the_wrappers_enum_in_order() -> None:
    catalog = [*default_catalog(), MCP_TOOL]
    request = {"toolConfig": {"tools": [wrapper_tool_spec(catalog), {"cachePoint": {"type": "default"}}]}}

    assert offered_tools(request) == [tool.name for tool in catalog]
    names = ", ".join(tool.name for tool in catalog)
    assert offered_tools_answer(request) == f"I was offered {len(catalog)} tools: {names}."


def test_without_an_enum_the_descriptions_list_is_read() -> None:
    spec = wrapper_tool_spec([*default_catalog()[:2], MCP_TOOL])
    del spec["toolSpec"]["inputSchema"]["json"]["properties"]["name"]["enum"]

    assert offered_tools({"toolConfig": {"tools": [spec]}}) == [
        "editor.openFile",
        "editor.readFile",
        "mcp.demo.issues_search",
    ]


def test_one_tool_and_none() -> None:
    assert offered_tools_answer({"toolConfig": {"tools": [wrapper_tool_spec([MCP_TOOL])]}}) == (
        "I was offered 1 tool: mcp.demo.issues_search."
    )
    assert offered_tools_answer({"messages": [user("tools")]}) == NO_TOOLS == "I was offered no tools."
    other = {"toolSpec": {"name": "something_else", "inputSchema": {"json": {"type": "object"}}}}
    assert offered_tools_answer({"toolConfig": {"tools": [other]}}) == NO_TOOLS


def test_the_brain_says_the_tools_it_was_offered_through_the_real_client() -> None:
    catalog = [*default_catalog(), MCP_TOOL]
    with LocalBedrockServer(OfflineBrain()) as server:
        brain = BedrockBrain(
            make_client(server.url),
            model_id=MODEL_ID,
            system_prompt="You are the VoiceIDE assistant.",
            tool_spec=wrapper_tool_spec(default_catalog()),
            inference=Inference(max_tokens=256),
        )
        said = "".join(getattr(item, "text", "") for item in brain.stream([user("Tools.")], tools=catalog))

    assert said.startswith(f"I was offered {len(catalog)} tools: editor.openFile, editor.readFile, ")
    assert said.endswith(", ui.showCard, mcp.demo.issues_search.")
