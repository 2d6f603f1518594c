"""The transcript the sessions API shows, built from stored history (pure)."""

from __future__ import annotations

import json
from typing import Any

from shared.core.messages import (
    ERROR_MARKER,
    INTERRUPTED_MARKER,
    reasoning_block,
    text_block,
    tool_result_block,
    tool_use_block,
)
from shared.core.stream import CUT_OFF_LINE, CUT_OFF_MARKER, EMPTY_REPLY_MARKER, FILTERED_LINE, FILTERED_MARKER
from shared.core.transcript import (
    RESULT_MAX_CHARS,
    AssistantEntry,
    StoredMessage,
    ToolEntry,
    UserEntry,
    transcript_entries,
)


def wrapped(tool_use_id: str, name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    tool_input: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id is not None:
        tool_input["call_id"] = call_id
    return tool_use_block(tool_use_id, "tool_call", tool_input)


def messages(*contents: tuple[str, list[dict[str, Any]]]) -> list[StoredMessage]:
    return [StoredMessage(seq, 1000.0 + seq, role, content) for seq, (role, content) in enumerate(contents)]


def test_user_and_assistant_texts_in_order() -> None:
    entries = transcript_entries(
        messages(("user", [text_block("run the tests")]), ("assistant", [text_block("All 12 tests pass.")]))
    )
    assert entries == [
        UserEntry(0, 0, 1000.0, "run the tests"),
        AssistantEntry(1, 0, 1001.0, "All 12 tests pass."),
    ]


def test_a_tool_call_is_paired_with_its_result_in_the_next_message() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("open the readme")]),
            (
                "assistant",
                [text_block("Opening it."), wrapped("tu-1", "editor.openFile", {"path": "README.md"}, "call-1")],
            ),
            ("user", [tool_result_block("tu-1", '{"ok":true}', error=False)]),
            ("assistant", [text_block("It is open.")]),
        )
    )
    assert entries == [
        UserEntry(0, 0, 1000.0, "open the readme"),
        AssistantEntry(1, 0, 1001.0, "Opening it."),
        ToolEntry(1, 1, 1001.0, "editor.openFile", {"path": "README.md"}, "call-1", "ok", '{"ok":true}'),
        AssistantEntry(3, 0, 1003.0, "It is open."),
    ]


def test_outcomes_error_and_timeout_and_arguments_as_a_string() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("build and test")]),
            (
                "assistant",
                [
                    wrapped("tu-1", "build.run", json.dumps({"target": "app"})),
                    wrapped("tu-2", "tests.run", {}),
                ],
            ),
            (
                "user",
                [
                    tool_result_block("tu-1", "compiler crashed", error=True),
                    tool_result_block("tu-2", "timed out: the app did not answer tests.run within 60 s", error=True),
                ],
            ),
        )
    )
    tools = [entry for entry in entries if isinstance(entry, ToolEntry)]
    assert [(tool.name, tool.arguments, tool.call_id, tool.outcome) for tool in tools] == [
        ("build.run", {"target": "app"}, "tu-1", "error"),  # no call_id: the tool use id, as unwrapped
        ("tests.run", {}, "tu-2", "timeout"),
    ]
    assert [tool.part for tool in tools] == [0, 1]


def test_a_long_result_is_cut_at_2000_characters() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("read it")]),
            ("assistant", [wrapped("tu-1", "editor.readFile", {"path": "big.txt"})]),
            ("user", [tool_result_block("tu-1", "x" * 5000, error=False)]),
        )
    )
    tool = entries[-1]
    assert isinstance(tool, ToolEntry) and len(tool.result) == RESULT_MAX_CHARS == 2000


def test_a_rejected_tool_use_keeps_its_own_name_and_is_an_error() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("go")]),
            ("assistant", [tool_use_block("tu-1", "open_file", {"path": "a"})]),
            ("user", [tool_result_block("tu-1", "unknown tool 'open_file'", error=True)]),
        )
    )
    assert entries[-1] == ToolEntry(
        1, 0, 1001.0, "open_file", {"path": "a"}, "tu-1", "error", "unknown tool 'open_file'"
    )


def test_an_interrupted_answer_is_what_was_heard() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("explain the diff")]),
            ("assistant", [text_block(f"The first change renames {INTERRUPTED_MARKER}")]),
            ("user", [text_block("stop")]),
        )
    )
    assert entries[1] == AssistantEntry(1, 0, 1001.0, "The first change renames", interrupted=True)


def test_an_answer_cut_off_before_anything_was_heard_is_empty_and_interrupted() -> None:
    entries = transcript_entries(
        messages(("user", [text_block("hi")]), ("assistant", [text_block(INTERRUPTED_MARKER)]))
    )
    assert entries[1] == AssistantEntry(1, 0, 1001.0, "", interrupted=True)


def test_an_answer_marked_after_playback_without_heard_text_keeps_its_text() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("hi")]), ("assistant", [text_block("Hello there."), text_block(INTERRUPTED_MARKER)])
        )
    )
    assert entries[1] == AssistantEntry(1, 0, 1001.0, "Hello there.", interrupted=True)


def test_reasoning_is_never_shown() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("why")]),
            (
                "assistant",
                [reasoning_block("secret plan", "sig"), text_block("<thinking>check the log</thinking>Because of X.")],
            ),
        )
    )
    assert entries[1] == AssistantEntry(1, 0, 1001.0, "Because of X.")


def test_a_plan_written_only_as_reasoning_before_tool_calls_shows_its_words() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("open it")]),
            (
                "assistant",
                [text_block("<thinking>I will open the file</thinking>"), wrapped("tu-1", "editor.openFile", {})],
            ),
            ("user", [tool_result_block("tu-1", "ok", error=False)]),
        )
    )
    assert entries[1] == AssistantEntry(1, 0, 1001.0, "I will open the file")


def test_bookkeeping_markers_become_what_the_person_saw() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("one")]),
            ("assistant", [text_block(EMPTY_REPLY_MARKER)]),
            ("user", [text_block("two")]),
            ("assistant", [text_block("[no answer: the model is unavailable]")]),
            ("user", [text_block("three")]),
            ("assistant", [text_block(f"A long list {CUT_OFF_MARKER}")]),
            ("user", [text_block("four")]),
            ("assistant", [text_block(FILTERED_MARKER)]),
            ("user", [text_block("five")]),
            ("assistant", [text_block(f"Halfway {ERROR_MARKER}")]),
        )
    )
    assert [(entry.seq, entry.text) for entry in entries if isinstance(entry, AssistantEntry)] == [
        (5, f"A long list\n\n{CUT_OFF_LINE}"),
        (7, FILTERED_LINE),
        (9, "Halfway"),
    ]


def test_two_utterances_in_one_message_are_two_entries() -> None:
    entries = transcript_entries(messages(("user", [text_block("first"), text_block("second")])))
    assert entries == [UserEntry(0, 0, 1000.0, "first"), UserEntry(0, 1, 1000.0, "second")]


def test_results_of_calls_before_the_first_message_are_left_out() -> None:
    later = [
        StoredMessage(4, None, "user", [tool_result_block("tu-9", "ok", error=False), text_block("and now?")]),
        StoredMessage(5, None, "assistant", [text_block("Done.")]),
    ]
    assert transcript_entries(later) == [UserEntry(4, 0, None, "and now?"), AssistantEntry(5, 0, None, "Done.")]


def test_a_handoffs_seeded_turns_are_ordinary_entries() -> None:
    entries = transcript_entries(
        messages(
            ("user", [text_block("from chat")]),
            ("assistant", [text_block("chat answer")]),
            ("user", [text_block("by voice")]),
        )
    )
    assert [type(entry).__name__ for entry in entries] == ["UserEntry", "AssistantEntry", "UserEntry"]
