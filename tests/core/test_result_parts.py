"""Results in parts, in the pure core: any order assembles the same text; every misfit fails the call once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.decision import CoreSettings
from shared.core.result_parts import handle_assembled_result, handle_tool_result_part
from shared.core.state import ModelCall, SessionState, ToolRound, Turn
from shared.wire.protocol import ToolResult
from shared.wire.protocol_tools import MAX_RESULT_CHARS

SETTINGS = CoreSettings(catalog_names=frozenset({"editor.readFile"}), max_tool_result_chars=100_000)


def waiting() -> SessionState:
    call = ModelCall(call_id="c1", tool_use_id="tu-1", name="editor.readFile", arguments="{}", deadline=1000.0)
    use = {"toolUse": {"toolUseId": "tu-1", "name": "tool_call", "input": {"name": "editor.readFile"}}}
    round_ = ToolRound(assistant_content=[use], tool_use_order=["tu-1"], calls=[call], sent_at=10.0)
    turn = Turn(turn_id="turn-1", tools=round_)
    return SessionState(session_id="s", turn=turn, history_len=1, last_role="user")


def part(index: int, count: int, text: str, field: str = "result") -> ToolResult:
    return ToolResult.model_validate({"callId": "c1", field: text, "part": index, "parts": count})


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.text(min_size=1, max_size=30), min_size=2, max_size=8), data=st.data())
def test_any_arrival_order_assembles_the_pieces_in_index_order(pieces: list[str], data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(pieces))))
    state, stored = waiting(), []
    for step, index in enumerate(order):
        outcome = handle_tool_result_part(state, part(index, len(pieces), pieces[index]), SETTINGS, now=20.0)
        state = outcome.state
        stored += [(write.index, write.text) for write in outcome.part_writes]
        assert outcome.parts_complete == (["c1"] if step == len(pieces) - 1 else [])
        assert outcome.events == [] and outcome.run_model is None
    final = handle_assembled_result(state, "c1", stored, SETTINGS, now=21.0)
    assert final.parts_dropped == [("c1", len(pieces))] and final.run_model is not None
    (message,) = [op for op in final.history if op.role == "user"]
    (block,) = message.content
    assert block["toolResult"]["content"][0]["text"] == "".join(pieces)


def test_a_total_over_the_limit_fails_the_call_and_drops_the_pieces() -> None:
    state = handle_tool_result_part(waiting(), part(0, 3, "x" * (MAX_RESULT_CHARS - 10)), SETTINGS).state
    outcome = handle_tool_result_part(state, part(1, 3, "y" * 20), SETTINGS)
    assert [getattr(e, "code", None) for e in outcome.events] == ["invalid_event"]
    assert outcome.parts_dropped == [("c1", 3)] and outcome.run_model is not None
    assert outcome.state.turn is not None and outcome.state.turn.tools is None  # the round was answered


def test_a_part_of_error_among_parts_of_result_fails_the_call() -> None:
    state = handle_tool_result_part(waiting(), part(0, 2, "abc"), SETTINGS).state
    outcome = handle_tool_result_part(state, part(1, 2, "boom", field="error"), SETTINGS)
    assert "carries error, the others result" in outcome.events[0].message


def test_an_assembly_after_the_call_was_answered_changes_nothing() -> None:
    state = handle_tool_result_part(waiting(), part(0, 2, "abc"), SETTINGS).state
    state = handle_tool_result_part(state, part(1, 2, "def"), SETTINGS).state
    answered = handle_assembled_result(state, "c1", [(0, "abc"), (1, "def")], SETTINGS).state
    again = handle_assembled_result(answered, "c1", [], SETTINGS)
    assert again.events == [] and again.history == [] and again.parts_dropped == []
