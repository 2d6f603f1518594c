"""A tool result too big for one frame, in parts: assembled, seen by the model as one result."""

from __future__ import annotations

import json

import pytest

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.adapters.gateway import callback_endpoint
from shared.core.result_parts import PARTS_WINDOW_S
from shared.flows import conductor_service as service_module
from tests.handlers.conftest import STAGE, Connection, Harness

FRAME_BYTES = 32 * 1024


def read_file_turn(conductor: Harness) -> tuple[Connection, str]:
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.script.push(message(tool_call("editor.readFile", {"path": "big.swift"})), message("It is long."))
    conductor.say(conn, "read big.swift")
    (call,) = [
        e.payload for e in conductor.events(conn) if e.kind_name == "toolCall" and e.payload.name == "editor.readFile"
    ]
    return conn, call.call_id


def send_in_parts(conductor: Harness, conn: Connection, call_id: str, text: str, size: int, **override: int) -> int:
    pieces = [text[at : at + size] for at in range(0, len(text), size)]
    for index, piece in enumerate(pieces):
        payload = {"callId": call_id, "result": piece, "error": None, "part": index, "parts": len(pieces), **override}
        conductor.send(conn, "toolResult", payload)
    return len(pieces)


def part_items(session_id: str) -> list[str]:
    client = runtime.store()._client
    items = client.scan(TableName=runtime.settings().table_name)["Items"]
    return [i["sk"]["S"] for i in items if i["pk"]["S"] == f"SESSION#{session_id}" and i["sk"]["S"].startswith("PART#")]


def test_a_100_kb_result_in_parts_of_under_32_kb_reaches_the_model_as_one_cut_result(conductor: Harness) -> None:
    conn, call_id = read_file_turn(conductor)
    text = json.dumps({"text": "".join(f"line {n:05d} of a long file\n" for n in range(4000))})
    assert len(text) > 100_000
    count = send_in_parts(conductor, conn, call_id, text, 30_000)
    assert count == 4
    sent = conductor.script.requests[-1].body["messages"][-1]["content"]
    (result,) = [block["toolResult"] for block in sent if "toolResult" in block]
    seen = result["content"][0]["text"]
    limit = runtime.settings().max_tool_result_chars
    assert seen.startswith(text[:limit]) and f"the result has {len(text):,} characters" in seen
    assert result["status"] == "success"
    assert part_items(conn.session_id) == []  # the pieces went with the commit that answered the call


def test_parts_out_of_order_are_assembled_in_order(conductor: Harness) -> None:
    conn, call_id = read_file_turn(conductor)
    pieces = ['{"text": "', "a" * 20, "b" * 20, '"}']
    for index in (2, 0, 3, 1):
        conductor.send(conn, "toolResult", {"callId": call_id, "result": pieces[index], "part": index, "parts": 4})
    sent = conductor.script.requests[-1].body["messages"][-1]["content"]
    (result,) = [block["toolResult"] for block in sent if "toolResult" in block]
    assert result["content"][0]["text"] == "".join(pieces)


def test_a_part_twice_fails_the_call_to_the_model_with_a_clear_error(conductor: Harness) -> None:
    conn, call_id = read_file_turn(conductor)
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 0, "parts": 3})
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 0, "parts": 3})
    errors = [e.payload for e in conductor.events(conn) if e.kind_name == "error"]
    assert errors[-1].code == "invalid_event" and "part 0 arrived twice" in errors[-1].message
    sent = conductor.script.requests[-1].body["messages"][-1]["content"]
    (result,) = [block["toolResult"] for block in sent if "toolResult" in block]
    assert result["status"] == "error" and "arrived twice" in result["content"][0]["text"]
    assert part_items(conn.session_id) == []
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 1, "parts": 3})
    assert conductor.summary(conn)[-1] == ("error", "no_pending_tool_call")  # the call is answered once


def test_a_count_that_changes_or_a_part_out_of_range_is_refused(conductor: Harness) -> None:
    conn, call_id = read_file_turn(conductor)
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 5, "parts": 3})
    assert conductor.summary(conn)[-1] == ("error", "invalid_event")  # refused as an event: nothing changes
    state = runtime.store().load(conn.session_id)
    assert state is not None and state.model_call(call_id) is not None and state.model_call(call_id).result is None
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 0, "parts": 3})
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 1, "parts": 4})
    errors = [e.payload for e in conductor.events(conn) if e.kind_name == "error"]
    assert "part 1 says 4 parts, the first said 3" in errors[-1].message
    sent = conductor.script.requests[-1].body["messages"][-1]["content"]
    assert [block["toolResult"]["status"] for block in sent if "toolResult" in block] == ["error"]


def test_parts_that_never_complete_fail_the_call_before_its_deadline(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    armed: list[float] = []
    monkeypatch.setattr(runtime.service().runner, "alarms", RecordingAlarms(armed))
    conn, call_id = read_file_turn(conductor)
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 0, "parts": 2})
    state = runtime.store().load(conn.session_id)
    assert state is not None
    call = state.model_call(call_id)
    assert call is not None and call.parts is not None and call.parts.received == [0]
    assert armed[-1] == call.parts.due == call.parts.first_at + PARTS_WINDOW_S < call.deadline  # armed by the part
    assert part_items(conn.session_id) != []
    monkeypatch.setattr(service_module.time, "time", lambda: call.parts.due + 1)  # the parts' alarm goes off
    runtime.service().expire_tool_calls(conn.session_id, callback_endpoint(conductor.management.domain, STAGE))
    assert part_items(conn.session_id) == []
    stored = runtime.store().messages(conn.session_id)
    results = [block["toolResult"] for m in stored for block in m["content"] if "toolResult" in block]
    assert results and results[-1]["status"] == "error"
    text = results[-1]["content"][0]["text"]
    assert "did not all arrive within 30 s" in text and "it sent 1 of the 2 parts of its result" in text


class RecordingAlarms:
    def __init__(self, armed: list[float]) -> None:
        self.armed = armed

    def set_alarm(self, session_id: str, endpoint: str, due_at: float) -> None:
        self.armed.append(due_at)


def test_a_barge_in_drops_the_pieces_that_came(conductor: Harness) -> None:
    conn, call_id = read_file_turn(conductor)
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "abc", "part": 0, "parts": 2})
    assert part_items(conn.session_id) != []
    conductor.barge_in(conn)
    assert part_items(conn.session_id) == []
    conductor.send(conn, "toolResult", {"callId": call_id, "result": "def", "part": 1, "parts": 2})
    assert conductor.summary(conn)[-1] == ("error", "no_pending_tool_call")
