"""The person's project, through the real handlers: a device's workspace context reaches the model
after the cached prefix and never the stored history, the latest replaces the one before, an
update during a turn waits for the next request, another session never sees it; a device's names
give the voice devices their vocabulary and the model the names the words may have meant."""

from __future__ import annotations

from typing import Any

from conductor_local.bedrock.server import message, tool_call
from shared.wire.protocol import ErrorCode
from tests.handlers.conftest import Connection, Harness

PHONE = {"id": "phone", "name": "Phone", "roles": ["voice", "display"]}
COMPANION = {"id": "desk", "name": "Desk", "roles": ["tools"]}
CONTEXT = {
    "workspace": "shop",
    "openFile": {"path": "src/users.ts", "language": "typescript", "cursorLine": 40},
    "branch": "main",
    "changedFiles": ["src/users.ts"],
    "diagnostics": [{"path": "src/users.ts", "line": 41, "severity": "error", "message": "x is not defined"}],
}
NAMES = [
    {"path": "src/users.ts", "names": ["getUserById", "UserRepository", "parseJSON"]},
    {"path": "src/orders.ts", "names": ["placeOrder", "OrderQueue"]},
]


def start(conductor: Harness, conn: Connection, device: dict[str, Any]) -> None:
    conductor.send(conn, "sessionStart", {"sessionId": conn.session_id, "device": device})


def phone_and_companion(conductor: Harness) -> tuple[Connection, Connection]:
    phone = conductor.connect()
    start(conductor, phone, PHONE)
    desk = conductor.connect(phone.session_id)
    start(conductor, desk, COMPANION)
    return phone, desk


def added_blocks(request: dict[str, Any]) -> list[str]:
    newest = request["messages"][-1]["content"]
    return [block["text"] for block in newest if str(block.get("text", "")).startswith("<context ")]


def stored_texts(conductor: Harness, session_id: str) -> list[str]:
    return [
        str(block.get("text", ""))
        for entry in conductor.history(session_id)
        for block in entry.get("content", [])
        if isinstance(block, dict)
    ]


def test_the_companions_context_reaches_the_model_after_the_words_and_never_the_history(
    conductor: Harness,
) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.send(desk, "workspaceContext", CONTEXT)
    conductor.script.push(message("It fails on line 41."))
    conductor.say(phone, "why does this fail")
    conductor.finish_turn(phone)

    (request,) = [r.body for r in conductor.script.requests]
    (workspace,) = [block for block in added_blocks(request) if 'kind="workspace"' in block]
    assert "workspace: shop" in workspace
    assert "open file: src/users.ts (typescript), line 40" in workspace
    assert "error: src/users.ts:41: x is not defined" in workspace
    newest = request["messages"][-1]["content"]
    assert newest[0] == {"text": "why does this fail"}  # the words as said, first; the blocks after
    assert not any(text.startswith("<context ") for text in stored_texts(conductor, phone.session_id))
    assert "cachePoint" not in str(newest)  # nothing after the blocks is cached
    assert errors(conductor, desk) == []


def errors(conductor: Harness, conn: Connection) -> list[str]:
    return [e.payload.code for e in conductor.all_events(conn) if e.kind_name == "error"]


def test_the_latest_context_replaces_the_one_before(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.send(desk, "workspaceContext", CONTEXT)
    conductor.send(desk, "workspaceContext", {**CONTEXT, "openFile": {"path": "src/orders.ts"}})
    conductor.script.push(message("OK."))
    conductor.say(phone, "what is open")
    conductor.finish_turn(phone)
    (request,) = [r.body for r in conductor.script.requests]
    text = "\n".join(added_blocks(request))
    assert "open file: src/orders.ts" in text and "src/users.ts (typescript)" not in text


def test_an_update_during_a_turn_waits_for_the_next_request(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.send(desk, "workspaceContext", CONTEXT)
    conductor.script.push(message("Reading it.", tool_call("editor.readFile", {"path": "src/users.ts"})))
    conductor.script.push(message("It has one line."))
    conductor.say(phone, "read users")
    conductor.wait_for(desk, lambda events: any(e.kind_name == "toolCall" for e in events))
    conductor.send(desk, "workspaceContext", {**CONTEXT, "branch": "fix-users"})
    call_id = conductor.call_id(desk, "editor.readFile")
    conductor.answer(desk, call_id, "export const x = 1")
    conductor.finish_turn(phone)

    first, second = [r.body for r in conductor.script.requests]
    assert "branch: main" in "\n".join(added_blocks(first))
    assert "branch: fix-users" in "\n".join(added_blocks(second))
    assert "files discussed" in "\n".join(added_blocks(second))  # the file the call named
    spoken = [e for e in conductor.events(phone) if e.kind_name == "assistantSpeechFinal"]
    assert [e.payload.text for e in spoken][-1] == "It has one line."  # the update interrupted nothing


def test_another_session_never_sees_the_context(conductor: Harness) -> None:
    _phone, desk = phone_and_companion(conductor)
    conductor.send(desk, "workspaceContext", CONTEXT)
    stranger = conductor.connect()
    conductor.start_session(stranger)
    conductor.script.push(message("Hello."))
    conductor.say(stranger, "what is open")
    conductor.finish_turn(stranger)
    (request,) = [r.body for r in conductor.script.requests]
    assert added_blocks(request) == []


def test_a_context_with_a_home_path_is_refused_and_keeps_nothing(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.send(desk, "workspaceContext", {**CONTEXT, "openFile": {"path": "/Users/ann/shop/src/users.ts"}})
    conductor.send(desk, "workspaceContext", {**CONTEXT, "workspace": "/Users/ann/shop"})
    assert errors(conductor, desk) == [ErrorCode.INVALID_EVENT, ErrorCode.INVALID_EVENT]
    conductor.script.push(message("OK."))
    conductor.say(phone, "what is open")
    conductor.finish_turn(phone)
    (request,) = [r.body for r in conductor.script.requests]
    assert "/Users/ann" not in str(request)


def send_names(conductor: Harness, conn: Connection, set_id: str = "s1") -> None:
    conductor.send(conn, "workspaceNames", {"set": set_id, "part": 0, "parts": 2, "files": NAMES[:1]})
    conductor.send(conn, "workspaceNames", {"set": set_id, "part": 1, "parts": 2, "files": NAMES[1:]})


def test_names_give_the_voice_device_its_vocabulary_and_the_model_the_names_heard(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    send_names(conductor, desk)
    vocabulary = [e.payload for e in conductor.all_events(phone) if e.kind_name == "vocabulary"]
    assert vocabulary and "get user by id" in vocabulary[-1].phrases
    assert [e for e in conductor.all_events(desk) if e.kind_name == "vocabulary"] == []  # tools only: no voice

    conductor.script.push(message("It looks the user up."))
    conductor.say(phone, "what does get user buy id do")
    conductor.finish_turn(phone)
    (request,) = [r.body for r in conductor.script.requests]
    heard = [block for block in added_blocks(request) if 'kind="names heard"' in block]
    assert heard and "`getUserById` in src/users.ts" in heard[0]
    assert request["messages"][-1]["content"][0] == {"text": "what does get user buy id do"}  # never rewritten
    shown = [e.payload for e in conductor.all_events(phone) if e.kind_name == "namesHeard"]
    first = shown[-1].matches[0]
    assert (first.name, first.path) == ("getUserById", "src/users.ts") and "buy" in first.heard


def test_a_set_is_used_only_once_all_its_parts_are_in(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    conductor.send(desk, "workspaceNames", {"set": "s2", "part": 1, "parts": 2, "files": NAMES[1:]})
    conductor.script.push(message("Hm."))
    conductor.say(phone, "what does place order do")
    conductor.finish_turn(phone)
    (request,) = [r.body for r in conductor.script.requests]
    assert not [block for block in added_blocks(request) if 'kind="names heard"' in block]


def test_a_voice_device_joining_later_gets_the_kept_vocabulary_after_its_session_ready(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    send_names(conductor, desk)
    tablet = conductor.connect(phone.session_id)
    start(conductor, tablet, {"id": "tablet", "name": "Tablet", "roles": ["voice"]})
    kinds = [e.kind_name for e in conductor.all_events(tablet)]
    assert "vocabulary" in kinds and kinds.index("vocabulary") > kinds.index("sessionReady")
    (vocabulary,) = [e.payload for e in conductor.all_events(tablet) if e.kind_name == "vocabulary"]
    assert "place order" in vocabulary.phrases or "get user by id" in vocabulary.phrases


def test_the_displays_are_shown_each_new_context_with_the_device_it_came_from(conductor: Harness) -> None:
    phone, desk = phone_and_companion(conductor)
    speaker = conductor.connect(phone.session_id)
    start(conductor, speaker, {"id": "speaker", "name": "Speaker", "roles": ["voice"]})
    conductor.send(desk, "workspaceContext", CONTEXT)
    conductor.send(desk, "workspaceContext", CONTEXT)  # the same again: nothing new to show
    shown = [e.payload for e in conductor.all_events(phone) if e.kind_name == "workspaceContext"]
    assert [(context.device, context.workspace) for context in shown] == [("Desk", "shop")]
    assert all(e.seq is None for e in conductor.all_events(phone) if e.kind_name == "workspaceContext")
    assert [e for e in conductor.all_events(speaker) if e.kind_name == "workspaceContext"] == []
