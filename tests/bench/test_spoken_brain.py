"""The capacity speaker's model answers at a voice answer's length and keeps each answer's shape."""

from __future__ import annotations

from typing import Any

from benchmarks.spoken_brain import ANSWER_WORDS, PREAMBLE, READBACK_WORDS, SpokenBrain
from conductor_local.bedrock.script import Pause


def request(text: str, *, tools: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {"messages": [{"role": "user", "content": [{"text": text}]}], "system": [{"text": "x"}]}
    if tools:
        found["toolConfig"] = {"tools": [{"toolSpec": {"name": "tool_call"}}]}
    return found


def texts(steps: list[Any]) -> dict[int, str]:
    found: dict[int, str] = {}
    for step in steps:
        delta = step.get("contentBlockDelta") if isinstance(step, dict) else None
        if delta is not None and "text" in delta["delta"]:
            found[delta["contentBlockIndex"]] = found.get(delta["contentBlockIndex"], "") + delta["delta"]["text"]
    return found


def tool_blocks(steps: list[Any]) -> list[int]:
    return [
        step["contentBlockStart"]["contentBlockIndex"]
        for step in steps
        if isinstance(step, dict) and "toolUse" in step.get("contentBlockStart", {}).get("start", {})
    ]


def test_an_answer_to_a_question_is_at_least_a_spoken_answer_long() -> None:
    steps = SpokenBrain()("m", request("what does the build script do here"))
    (answer,) = texts(steps).values()
    assert answer.startswith("You said: what does the build script do here.")
    assert len(answer.split()) >= ANSWER_WORDS
    assert steps[-2] == {"messageStop": {"stopReason": "end_turn"}}


def test_a_reply_that_calls_a_tool_says_so_first_and_keeps_its_tool_use() -> None:
    steps = SpokenBrain()("m", request('call editor.openFile {"path": "a.swift"}'))
    assert texts(steps) == {0: PREAMBLE}
    assert tool_blocks(steps) == [1]  # moved one index on
    assert steps[-2] == {"messageStop": {"stopReason": "tool_use"}}


def test_a_read_back_is_a_sentence_or_two() -> None:
    result = {"toolUseId": "t1", "content": [{"text": '{"opened": "a.swift", "lines": 120}'}]}
    asked = {
        "messages": [
            {"role": "user", "content": [{"text": "open it"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "tool_call", "input": {}}}]},
            {"role": "user", "content": [{"toolResult": result}]},
        ],
    }
    (said,) = texts(SpokenBrain()("m", asked)).values()
    assert READBACK_WORDS <= len(said.split()) < ANSWER_WORDS


def test_scripts_with_their_own_pace_stay_as_they_are_and_every_request_is_noted() -> None:
    brain = SpokenBrain()
    steps = brain("m", request("count 5"))
    assert any(isinstance(step, Pause) for step in steps)
    assert texts(steps) == {0: "1 2 3 4 5"}
    brain("m", request("hello", tools=False))
    assert [(r.tools, r.input_tokens > 0) for r in brain.requests] == [(True, True), (False, True)]
