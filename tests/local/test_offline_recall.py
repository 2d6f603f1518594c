"""The offline brain's memory answers: ``recall`` says what a request carried, a summary request
gets a deterministic summary."""

from __future__ import annotations

from typing import Any

import pytest

from conductor_local.bedrock.offline_recall import (
    MAX_SUMMARY_ITEMS,
    answering_summaries,
    is_recall,
    recall_answer,
    summary_answer,
)
from conductor_local.bedrock.server import LocalBedrockServer, ScriptedResponder, Step, message
from shared.adapters.brain import BedrockBrain
from shared.core.memory import summary_request, with_summary
from shared.core.messages import reasoning_block, text_block, tool_result_block, tool_use_block
from shared.core.tool_catalog import default_catalog
from shared.core.wrapper import wrapper_tool_spec
from shared.wire.model_rules import Inference

from .conftest import MODEL_ID, make_client

SYSTEM = "You are the VoiceIDE assistant."
LONG = "please open the session store and explain how the history window is chosen, step by step"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [text_block(text)]}


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [text_block(text)]}


def read_round(tool_use_id: str, path: str, content: str) -> list[dict[str, Any]]:
    use = tool_use_block(tool_use_id, "tool_call", {"name": "editor.readFile", "arguments": {"path": path}})
    return [
        {"role": "assistant", "content": [reasoning_block("hidden", "sig"), text_block("Reading."), use]},
        {"role": "user", "content": [tool_result_block(tool_use_id, content, error=False)]},
    ]


@pytest.mark.parametrize(("said", "recall"), [("recall", True), ("Recall.", True), (" RECALL! ", True)])
def test_the_recall_directive(said: str, recall: bool) -> None:
    assert is_recall(said) is recall


@pytest.mark.parametrize("said", ["recall the last file", "please recall", "", "call editor.readFile"])
def test_other_speech_is_not_recall(said: str) -> None:
    assert not is_recall(said)


def test_recall_lists_the_summary_then_each_message_briefly() -> None:
    messages = [user(LONG), *read_round("t1", "Store.swift", "struct Store {}"), reply("It keeps 80 messages.")]
    messages.append(user("recall"))
    body = {"system": [{"text": with_summary(SYSTEM, "The user renamed the parser.")}], "messages": messages}

    assert recall_answer(body).splitlines() == [
        "summary: The user renamed the parser.",
        f"user: {LONG[:80]}",
        "assistant: Reading. [called editor.readFile]",
        "user: [editor.readFile result: struct Store {}]",
        "assistant: It keeps 80 messages.",
        "user: recall",
    ]


def test_recall_without_a_summary_starts_with_the_first_message() -> None:
    body = {
        "system": [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}],
        "messages": [user("hello"), reply("hi"), user("recall")],
    }
    assert recall_answer(body) == "user: hello\nassistant: hi\nuser: recall"


def test_summary_answer_ignores_ordinary_requests() -> None:
    assert summary_answer({"system": [{"text": SYSTEM}], "messages": [user("summarize this")]}) is None
    assert summary_answer({"messages": [user("hi")]}) is None


def test_summary_answer_keeps_what_the_user_said() -> None:
    dropped = [user(LONG), *read_round("t1", "Store.swift", "x" * 500), reply("done"), user("now rename it")]
    system, messages = summary_request(None, dropped)
    summary = summary_answer({"system": [{"text": system}], "messages": messages})
    assert summary == f"Summary: {LONG[:60]}; now rename it"


def test_summary_answer_rolls_the_previous_summary_forward() -> None:
    first = summary_answer(_summary_body(None, [user("open the parser"), reply("opened")]))
    second = summary_answer(_summary_body(first, [user("rename parse"), reply("renamed")]))
    assert second == "Summary: open the parser; rename parse"
    many = second
    for n in range(30):
        many = summary_answer(_summary_body(many, [user(f"step {n}"), reply("ok")]))
    assert many is not None
    items = many.removeprefix("Summary: ").split("; ")
    assert len(items) == MAX_SUMMARY_ITEMS and items[-1] == "step 29"


def test_a_summary_of_nothing_said() -> None:
    assert summary_answer(_summary_body(None, [])) == "Summary: nothing yet."


def _summary_body(previous: str | None, dropped: list[dict[str, Any]]) -> dict[str, Any]:
    system, messages = summary_request(previous, dropped)
    return {"system": [{"text": system}], "messages": messages}


def memory_responder(model_id: str, request: dict[str, Any]) -> list[Step]:
    """Answers as the offline brain does with its memory directives."""
    summary = summary_answer(request)
    if summary is not None:
        return message(summary)
    return message(recall_answer(request))


def test_a_summary_and_a_recall_through_the_real_client() -> None:
    with LocalBedrockServer(memory_responder) as server:
        client = make_client(server.url)
        brain = BedrockBrain(
            client,
            model_id=MODEL_ID,
            system_prompt=SYSTEM,
            tool_spec=wrapper_tool_spec(default_catalog()),
            inference=Inference(max_tokens=256),
        )
        summary = brain.summarize(*summary_request(None, [user("open the parser"), reply("opened")]))
        assert summary == "Summary: open the parser"

        said = "".join(item.text for item in brain.stream([user("recall")], summary=summary) if hasattr(item, "text"))
    assert said == "summary: Summary: open the parser\nuser: recall"
    assert server.operations == ["Converse", "ConverseStream"]


def test_summary_calls_never_take_a_queued_script() -> None:
    scripted = ScriptedResponder(message("the conversation's answer"))
    with LocalBedrockServer(answering_summaries(scripted)) as server:
        client = make_client(server.url)
        answer = client.converse(**_summary_body(None, [user("open the parser"), reply("opened")]), modelId=MODEL_ID)
        assert answer["output"]["message"]["content"] == [{"text": "Summary: open the parser"}]
        stream = client.converse_stream(modelId=MODEL_ID, messages=[user("hi")])
        texts = [e["contentBlockDelta"]["delta"]["text"] for e in stream["stream"] if "contentBlockDelta" in e]
    assert "".join(texts) == "the conversation's answer"
    assert len(scripted.requests) == 1 and scripted.pending == 0
