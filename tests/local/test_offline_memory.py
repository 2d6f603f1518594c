"""The offline brain's memory directives: the ``memory.*`` uses it asks for and how it says their results."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conductor_local.bedrock.offline_brain import OfflineBrain
from conductor_local.bedrock.server import Responder
from shared.core import person_memory

from .conftest import Converse

REMEMBERED_BLOCK = person_memory.block(
    person_memory.block_lines(
        [
            person_memory.Recollection("mem-block1", "you prefer tabs over spaces", "preference", "person"),
            person_memory.Recollection("mem-block2", "the shop project uses pnpm", "fact", "project", "shop"),
        ]
    )
)
assert REMEMBERED_BLOCK is not None


@pytest.fixture
def responder() -> Responder:
    return OfflineBrain()


@pytest.fixture(autouse=True)
def natural(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDUCTOR_LOCAL_READBACK", raising=False)


def _user(*content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


def _use(tool_use_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    wrapper = {"name": name, "arguments": arguments}
    return {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": tool_use_id, "name": "tool_call", "input": wrapper}}],
    }


def _result(tool_use_id: str, body: Any, *, status: str | None = None) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body)
    result: dict[str, Any] = {"toolUseId": tool_use_id, "content": [{"text": text}]}
    if status:
        result["status"] = status
    return _user({"toolResult": result})


def _exchange(tool_use_id: str, name: str, arguments: dict[str, Any], body: Any, said: str) -> list[dict[str, Any]]:
    """One memory call as stored: the person's words, the use, the result, the reply."""
    return [_user({"text": "…"}), _use(tool_use_id, name, arguments), _result(tool_use_id, body), _said(said)]


def _steps(messages: list[dict[str, Any]]) -> list[Any]:
    return OfflineBrain().reply({"messages": messages})


def _uses(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The wrapper uses the reply asks for: ``(inner name, arguments)``, input JSON reassembled."""
    steps = [step for step in _steps(messages) if isinstance(step, dict)]
    started = [s["contentBlockStart"] for s in steps if "contentBlockStart" in s]
    assert all(start["start"]["toolUse"]["name"] == "tool_call" for start in started)
    assert [s["messageStop"]["stopReason"] for s in steps if "messageStop" in s] == [
        "tool_use" if started else "end_turn"
    ]
    inputs: dict[int, str] = {start["contentBlockIndex"]: "" for start in started}
    for step in steps:
        delta = step.get("contentBlockDelta")
        if delta and "toolUse" in delta["delta"]:
            inputs[delta["contentBlockIndex"]] += delta["delta"]["toolUse"]["input"]
    wrapped = [json.loads(text) for text in inputs.values()]
    return [(use["name"], use["arguments"]) for use in wrapped]


def _text(messages: list[dict[str, Any]]) -> str:
    steps = [step for step in _steps(messages) if isinstance(step, dict)]
    return "".join(
        s["contentBlockDelta"]["delta"]["text"]
        for s in steps
        if "contentBlockDelta" in s and "text" in s["contentBlockDelta"]["delta"]
    )


def _asked(transcript: str, *earlier: dict[str, Any], added: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    blocks = [{"text": transcript}, *({"text": block} for block in added)]
    return _uses([*earlier, _user(*blocks)])


def _read_back(name: str, arguments: dict[str, Any], body: Any, *, status: str | None = None) -> str:
    return _text([_user({"text": "…"}), _use("tu_1", name, arguments), _result("tu_1", body, status=status)])


# ---- the uses asked for -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transcript", "arguments"),
    [
        ("remember I prefer tabs over spaces", {"text": "I prefer tabs over spaces", "scope": "person"}),
        ("Remember that I prefer tabs over spaces.", {"text": "I prefer tabs over spaces", "scope": "person"}),
        ("remember that for this project we use pnpm", {"text": "we use pnpm", "scope": "project"}),
        ("Remember in this project, tests live in spec/!", {"text": "tests live in spec/", "scope": "project"}),
        ("remember that that was hard", {"text": "that was hard", "scope": "person"}),
        ("remember for this project", {"text": "for this project", "scope": "person"}),  # nothing after it
    ],
)
def test_remember_asks_memory_write(transcript: str, arguments: dict[str, Any]) -> None:
    assert _asked(transcript) == [("memory.write", arguments)]


def test_remember_that_alone_is_ordinary_speech() -> None:
    assert _asked("remember that") == []
    assert _text([_user({"text": "remember that"})]) == "You said: remember that"


@pytest.mark.parametrize(
    ("transcript", "arguments"),
    [
        ("forget my tabs preference", {"text": "my tabs preference"}),
        ("Forget that I prefer tabs.", {"text": "I prefer tabs"}),
    ],
)
def test_forget_asks_memory_forget_by_text(transcript: str, arguments: dict[str, Any]) -> None:
    assert _asked(transcript) == [("memory.forget", arguments)]


@pytest.mark.parametrize(
    ("transcript", "query"),
    [
        ("what do you remember", "what I prefer and how I work"),
        ("What do you remember?", "what I prefer and how I work"),
        ("what do you remember about me?", "what I prefer and how I work"),
        ("What do you remember about this project?", "this project"),
        ("what do you remember about my editor settings", "my editor settings"),
    ],
)
def test_what_do_you_remember_asks_memory_search(transcript: str, query: str) -> None:
    assert _asked(transcript) == [("memory.search", {"query": query})]


def test_the_use_streams_over_the_real_client(converse: Converse) -> None:
    reply = converse("Remember I prefer tabs over spaces.")

    assert reply.stop_reason == "tool_use"
    (use,) = reply.tool_uses
    assert use["name"] == "tool_call"
    assert use["input"] == {
        "name": "memory.write",
        "arguments": {"text": "I prefer tabs over spaces", "scope": "person"},
    }


# ---- forget that: the memory named last ---------------------------------------------------

WRITE = _exchange(
    "tu_w",
    "memory.write",
    {"text": "I prefer tabs", "scope": "person"},
    {"remembered": True, "id": "mem-written", "merged": False},
    "I'll remember that you prefer tabs.",
)
SEARCH = _exchange(
    "tu_s",
    "memory.search",
    {"query": "what I prefer and how I work"},
    {
        "memories": [
            {"id": "mem-found1", "text": "you like dark mode", "scope": "person", "kind": "preference"},
            {"id": "mem-found2", "text": "you use vim keys", "scope": "person", "kind": "preference"},
        ]
    },
    "I remember: you like dark mode; you use vim keys.",
)


@pytest.mark.parametrize("transcript", ["forget that", "Forget it.", "forget that!"])
def test_forget_that_takes_the_id_of_the_latest_write(transcript: str) -> None:
    assert _asked(transcript, *SEARCH, *WRITE, added=(REMEMBERED_BLOCK,)) == [("memory.forget", {"id": "mem-written"})]


def test_forget_that_takes_the_first_memory_of_the_latest_search() -> None:
    assert _asked("forget that", *WRITE, *SEARCH, added=(REMEMBERED_BLOCK,)) == [
        ("memory.forget", {"id": "mem-found1"})
    ]


def test_forget_that_takes_the_remembered_block_when_no_result_names_one() -> None:
    workspace = '<context kind="workspace">\nworkspace: shop\n</context>'
    asked = _asked(
        "forget that", _user({"text": "hello"}), _said("You said: hello"), added=(workspace, REMEMBERED_BLOCK)
    )
    assert asked == [("memory.forget", {"text": "you prefer tabs over spaces"})]


def test_forget_that_passes_over_a_memory_already_forgotten() -> None:
    forgot = _exchange("tu_f", "memory.forget", {"id": "mem-written"}, {"forgotten": ["mem-written"]}, "Forgotten.")
    assert _asked("forget that", *SEARCH, *WRITE, *forgot) == [("memory.forget", {"id": "mem-found1"})]


def test_a_failed_write_names_no_memory() -> None:
    refused = [
        _user({"text": "…"}),
        _use("tu_x", "memory.write", {"text": "my password is hunter2", "scope": "person"}),
        _result("tu_x", "I won't remember that: it looks like a password or a key.", status="error"),
        _said("I won't remember that: it looks like a password or a key."),
    ]
    assert _asked("forget that", *WRITE, *refused) == [("memory.forget", {"id": "mem-written"})]


def test_forget_that_with_nothing_named_forgets_by_text() -> None:
    assert _asked("forget that") == [("memory.forget", {"text": "that"})]


# ---- what the results are said as ---------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"text": "I prefer tabs over spaces", "scope": "person"}, "I'll remember that you prefer tabs over spaces."),
        (
            {"text": "my name is Sam and I'm left-handed", "scope": "person"},
            "I'll remember that your name is Sam and you're left-handed.",
        ),
        (
            {"text": "I am on call on Fridays, call me Sam.", "scope": "person"},
            "I'll remember that you are on call on Fridays, call you Sam.",
        ),
        ({"text": "we use pnpm", "scope": "project"}, "For this project, I'll remember that we use pnpm."),
    ],
)
def test_a_write_is_read_back_in_the_second_person(arguments: dict[str, Any], said: str) -> None:
    assert _read_back("memory.write", arguments, {"remembered": True, "id": "mem-1", "merged": False}) == said


def test_a_merged_write_is_read_back_as_updated() -> None:
    body = {"remembered": True, "id": "mem-1", "merged": True}
    assert _read_back("memory.write", {"text": "I prefer tabs"}, body) == "I already knew that; I've updated it."


@pytest.mark.parametrize(
    "error",
    [
        "I won't remember that: it looks like a password or a key, and secrets are never kept.",
        "I can remember five things a minute; try again in 40 seconds.",
    ],
)
def test_a_refused_write_is_read_back_as_its_text(error: str) -> None:
    assert _read_back("memory.write", {"text": "x"}, error, status="error") == error


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ({"forgotten": ["mem-1"]}, None, "Forgotten."),
        ({"forgotten": ["mem-1", "mem-2"]}, None, "Forgotten."),
        ({"forgotten": []}, None, "I couldn't find that in what I remember."),
        ("nothing remembered matches", "error", "I couldn't find that in what I remember."),
        ("long-term memory is off for this session", "error", "Long-term memory is off for this session."),
    ],
)
def test_a_forget_is_read_back(body: Any, status: str | None, said: str) -> None:
    assert _read_back("memory.forget", {"text": "tabs"}, body, status=status) == said


def test_a_search_is_read_back_as_at_most_five_memories_in_order() -> None:
    memories = [
        {"id": f"mem-{i}", "text": f"you like thing {i}.", "scope": "person", "kind": "preference"} for i in range(1, 8)
    ]
    memories[1]["text"] = "I prefer tabs over spaces"
    said = _read_back("memory.search", {"query": "what I prefer and how I work"}, {"memories": memories})
    assert said == (
        "I remember: you like thing 1; you prefer tabs over spaces; you like thing 3; you like thing 4; "
        "you like thing 5."
    )


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("what I prefer and how I work", "I don't remember anything about you yet."),
        ("this project", "I don't remember anything about this project yet."),
    ],
)
def test_an_empty_search_is_read_back_as_nothing_yet(query: str, said: str) -> None:
    assert _read_back("memory.search", {"query": query}, {"memories": [], "note": "nothing remembered yet"}) == said


def test_a_failed_search_is_read_back_as_its_text() -> None:
    said = _read_back("memory.search", {"query": "x"}, "long-term memory is off", status="error")
    assert said == "Long-term memory is off."


def test_the_literal_read_back_keeps_the_raw_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDUCTOR_LOCAL_READBACK", "literal")
    body = {"remembered": True, "id": "mem-1", "merged": False}
    said = _read_back("memory.write", {"text": "I prefer tabs"}, body)
    assert said == f"memory.write returned {json.dumps(body)}"


# ---- context shows the remembered block ---------------------------------------------------


def test_context_shows_the_remembered_block_beside_the_workspace_blocks() -> None:
    workspace = '<context kind="workspace">\nworkspace: shop\n</context>'
    messages = [_user({"text": "Context."}, {"text": workspace}, {"text": REMEMBERED_BLOCK})]
    assert _text(messages) == f"{workspace}\n{REMEMBERED_BLOCK}"


def test_the_remembered_block_is_never_taken_for_the_transcript() -> None:
    assert _asked("hello", added=(REMEMBERED_BLOCK,)) == []
    assert _text([_user({"text": "hello"}, {"text": REMEMBERED_BLOCK})]) == "You said: hello"
