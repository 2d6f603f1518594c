"""Conversation memory: the token budget window, elided tool results and the summary request."""

from __future__ import annotations

import copy
import json
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.memory import (
    MAX_SUMMARY_INPUT_CHARS,
    SUMMARY_END,
    SUMMARY_MARKER,
    SUMMARY_SYSTEM_PROMPT,
    Budget,
    calibrated,
    elide_old_tool_results,
    fit_budget,
    message_chars,
    stepped_window,
    summary_of,
    summary_request,
    with_summary,
)
from shared.core.messages import (
    Message,
    is_plain_user_message,
    reasoning_block,
    text_block,
    tool_result_block,
    tool_use_block,
)
from tests.history_check import assert_valid_history


def user(text: str) -> Message:
    return {"role": "user", "content": [text_block(text)]}


def reply(text: str) -> Message:
    return {"role": "assistant", "content": [text_block(text)]}


def uses(*calls: tuple[str, str], text: str | None = None) -> Message:
    """An assistant message with ``tool_call`` uses: (toolUseId, app tool name) pairs."""
    content = [text_block(text)] if text else []
    content += [
        tool_use_block(i, "tool_call", {"name": name, "arguments": {"path": f"{i}.swift"}}) for i, name in calls
    ]
    return {"role": "assistant", "content": content}


def results(*answers: tuple[str, str], error: bool = False) -> Message:
    return {"role": "user", "content": [tool_result_block(i, text, error=error) for i, text in answers]}


def session(turns: int, result_chars: int = 30_000) -> list[Message]:
    """A long voice session: each turn reads a big file, then answers."""
    history: list[Message] = []
    for n in range(turns):
        history += [
            user(f"turn {n}: open the file and tell me what it does"),
            uses((f"t{n}", "editor.readFile")),
            results((f"t{n}", f"// file {n}\n" + "x" * result_chars)),
            reply(f"answer {n}: it parses the config. " + "It reads the keys one by one. " * 20),
        ]
    return history


def result_texts(message: Message) -> list[str]:
    return [b["toolResult"]["content"][0]["text"] for b in message["content"] if "toolResult" in b]


# ---- sizes and calibration --------------------------------------------------------------------


def test_message_chars_is_the_compact_json_size() -> None:
    message = user("héllo")
    assert message_chars(message) == len(json.dumps(message, separators=(",", ":"), ensure_ascii=False)) + 1
    assert message_chars(user("x" * 1000)) - message_chars(user("")) == 1000


def test_calibration_is_the_observed_ratio_clamped() -> None:
    assert calibrated(36_000, 10_000) == 3.6
    assert calibrated(2_000, 10_000) == 1.0
    assert calibrated(900_000, 10_000) == 8.0


def test_calibration_ignores_tiny_requests() -> None:
    assert calibrated(400, 100, previous=3.2) == 3.2
    assert calibrated(0, 0, previous=3.2) == 3.2


# ---- elision ----------------------------------------------------------------------------------


def test_old_big_results_become_one_line_naming_the_tool_and_size() -> None:
    history = session(3, result_chars=38 * 1024)
    elided = elide_old_tool_results(history, 2_000)

    assert result_texts(elided[2]) == ["editor.readFile result, 38 KB, elided"]
    assert result_texts(elided[6]) == ["editor.readFile result, 38 KB, elided"]
    assert result_texts(elided[10]) == result_texts(history[10])  # the last round is kept
    kept = elided[2]["content"][0]["toolResult"]
    assert kept["toolUseId"] == "t0" and kept["status"] == "success"
    assert_valid_history(elided)


def test_elision_keeps_status_small_results_and_never_mutates() -> None:
    history = [
        user("build it"),
        uses(("a", "build.run"), ("b", "editor.readFile")),
        {
            "role": "user",
            "content": [
                tool_result_block("a", "error: " + "e" * 5_000, error=True),
                tool_result_block("b", "short", error=False),
            ],
        },
        reply("the build failed"),
        user("and now?"),
        uses(("c", "project.search")),
        results(("c", "found")),
    ]
    before = copy.deepcopy(history)
    elided = elide_old_tool_results(history, 2_000)

    assert history == before
    first, second = (b["toolResult"] for b in elided[2]["content"])
    assert first == {"toolUseId": "a", "content": [{"text": "build.run result, 5 KB, elided"}], "status": "error"}
    assert second == history[2]["content"][1]["toolResult"]
    assert elided[6] == history[6]


def test_only_results_before_the_last_round_are_elided() -> None:
    big = "y" * 10_000
    history = [user("go"), uses(("a", "x.read")), results(("a", big)), uses(("b", "x.read")), results(("b", big))]
    elided = elide_old_tool_results(history, 2_000)
    assert result_texts(elided[2]) == ["x.read result, 10 KB, elided"]
    assert result_texts(elided[4]) == [big]
    # A plain answer and a new question after the last round leave that round whole.
    later = [*history, reply("done"), user("thanks")]
    assert result_texts(elide_old_tool_results(later, 2_000)[4]) == [big]


def test_json_results_are_measured_and_elided() -> None:
    big = {"toolResult": {"toolUseId": "a", "content": [{"json": {"lines": ["z" * 3_000]}}], "status": "success"}}
    history = [user("go"), uses(("a", "project.search")), {"role": "user", "content": [big]}, *session(1)]
    assert result_texts(elide_old_tool_results(history, 2_000)[2]) == ["project.search result, 3 KB, elided"]


# ---- the budget window ------------------------------------------------------------------------


def test_a_long_session_fits_the_budget_and_stays_valid() -> None:
    history = session(60)
    budget = Budget(input_tokens=24_000)
    window = fit_budget(history, fixed_chars=8_000, budget=budget)

    assert window.estimated_tokens <= budget.input_tokens
    chars = 8_000 + sum(message_chars(m) for m in window.messages)
    assert window.estimated_tokens == -(-chars // 4)
    assert_valid_history(window.messages)
    assert is_plain_user_message(window.messages[0])
    assert window.messages[-1] == history[-1]
    assert window.start == len(history) - len(window.messages)
    # Elided results make room for many turns, not just the one with the big result; not for all.
    assert 40 < len(window.messages) < len(history)
    # One more turn would not fit.
    assert window.start >= 4
    wider = elide_old_tool_results(history, budget.elide_over_chars)[window.start - 4 :]
    assert -(-(8_000 + sum(message_chars(m) for m in wider)) // 4) > budget.input_tokens


def test_everything_is_sent_when_it_fits() -> None:
    history = session(3, result_chars=100)
    window = fit_budget(history, fixed_chars=100, budget=Budget())
    assert window.start == 0 and window.messages == history


def test_the_window_never_starts_at_an_assistant_message_or_results() -> None:
    history = [user("a" * 400), reply("b" * 400), user("c" * 400), uses(("t", "x.read")), results(("t", "ok"))]
    history += [reply("d" * 400), user("e")]
    for tokens in range(1, 700, 20):
        window = fit_budget(history, fixed_chars=0, budget=Budget(input_tokens=tokens))
        assert is_plain_user_message(window.messages[0])
        assert window.start in (0, 2, 6)
        assert_valid_history(window.messages)


def test_a_tool_use_keeps_its_results_when_the_budget_cuts_close() -> None:
    history = [user("read both"), uses(("a", "x.read"), ("b", "x.read")), results(("a", "1"), ("b", "2"))]
    history += [reply("done"), user("next")]
    needed = fit_budget(history, fixed_chars=0, budget=Budget(input_tokens=10_000)).estimated_tokens
    window = fit_budget(history, fixed_chars=0, budget=Budget(input_tokens=needed - 1))
    assert window.start == 4
    assert window.messages == [user("next")]


def test_an_oversized_turn_is_still_returned() -> None:
    huge = [user("old"), reply("ok"), user("summarize this " + "w" * 50_000)]
    window = fit_budget(huge, fixed_chars=1_000, budget=Budget(input_tokens=1_000))
    assert window.start == 2 and window.messages == [huge[2]]
    assert window.estimated_tokens > 1_000


def test_an_oversized_last_round_is_kept_whole() -> None:
    history = [user("read"), uses(("a", "x.read")), results(("a", "r" * 200_000))]
    window = fit_budget(history, fixed_chars=0, budget=Budget(input_tokens=1_000))
    assert window.start == 0 and window.messages == history


def test_calibration_changes_the_window() -> None:
    history = session(20)
    dense = fit_budget(history, fixed_chars=0, budget=Budget(chars_per_token=2.0))
    loose = fit_budget(history, fixed_chars=0, budget=Budget(chars_per_token=6.0))
    assert len(dense.messages) < len(loose.messages)


def test_no_plain_user_message_gives_an_empty_window() -> None:
    assert fit_budget([], fixed_chars=10, budget=Budget()).messages == []


# ---- property: any valid history --------------------------------------------------------------


@st.composite
def histories(draw: Any) -> list[Message]:
    """Random valid histories: turns of a question, zero or more tool rounds, then an answer, or a
    new utterance merged after the results (a message with results and text: not a window start).
    The last turn may end without an answer."""
    history: list[Message] = []
    counter = 0
    turns = draw(st.integers(1, 8))
    for turn in range(turns):
        question = "q" * draw(st.integers(1, 3_000))
        if history and history[-1]["role"] == "user":
            history[-1] = {**history[-1], "content": [*history[-1]["content"], text_block(question)]}
        else:
            history.append(user(question))
        for _ in range(draw(st.integers(0, 3))):
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                ids.append(f"t{counter}")
            history.append(uses(*[(i, "editor.readFile") for i in ids]))
            sizes = [draw(st.integers(0, 6_000)) for _ in ids]
            history.append(results(*[(i, "r" * size) for i, size in zip(ids, sizes, strict=True)]))
        merge_next = history[-1]["role"] == "user" and len(history) > 1 and draw(st.booleans())
        if not merge_next and (turn < turns - 1 or draw(st.booleans())):
            history.append(reply("a" * draw(st.integers(1, 500))))
    assert_valid_history(history)
    return history


@settings(max_examples=200, deadline=None)
@given(
    history=histories(),
    tokens=st.integers(1, 20_000),
    fixed=st.integers(0, 20_000),
    cpt=st.floats(1.0, 8.0),
)
def test_any_window_is_valid_and_a_suffix_modulo_elision(
    history: list[Message], tokens: int, fixed: int, cpt: float
) -> None:
    before = copy.deepcopy(history)
    budget = Budget(input_tokens=tokens, chars_per_token=cpt)
    window = fit_budget(history, fixed_chars=fixed, budget=budget)

    assert history == before
    assert_valid_history(window.messages)
    assert window.messages and is_plain_user_message(window.messages[0])
    assert window.messages == elide_old_tool_results(history, budget.elide_over_chars)[window.start :]
    original = history[window.start :]
    for sent, was in zip(window.messages, original, strict=True):
        assert sent["role"] == was["role"] and len(sent["content"]) == len(was["content"])
        assert [set(b) for b in sent["content"]] == [set(b) for b in was["content"]]
    later_starts = [i for i, m in enumerate(history) if is_plain_user_message(m) and i > window.start]
    assert window.estimated_tokens <= tokens or not later_starts


# ---- the summary ------------------------------------------------------------------------------


def test_summary_request_renders_the_dropped_turns_as_plain_lines() -> None:
    dropped = [
        user("open the parser"),
        {
            "role": "assistant",
            "content": [
                reasoning_block("secret thoughts", "sig"),
                text_block("Opening it."),
                tool_use_block("a", "tool_call", {"name": "editor.readFile", "arguments": {"path": "Parser.swift"}}),
                {"cachePoint": {"type": "default"}},
            ],
        },
        results(("a", "struct Parser {" + "p" * 1_000 + "}")),
        reply("It is a recursive descent parser."),
    ]
    system, messages = summary_request("User works on the lexer.", dropped)

    assert system == SUMMARY_SYSTEM_PROMPT and "200 words" in system
    assert len(messages) == 1 and messages[0]["role"] == "user"
    text = messages[0]["content"][0]["text"]
    assert "User works on the lexer." in text
    lines = text.splitlines()
    assert "user: open the parser" in lines
    assert "assistant: Opening it." in lines
    assert 'assistant: called editor.readFile {"path":"Parser.swift"}' in lines
    result_line = next(line for line in lines if line.startswith("user: editor.readFile result: struct Parser {"))
    assert len(result_line) < 400
    assert "assistant: It is a recursive descent parser." in lines
    assert "secret thoughts" not in text and "cachePoint" not in text
    assert_valid_history(messages)


def test_summary_request_without_a_previous_summary_or_turns_is_still_valid() -> None:
    system, messages = summary_request(None, [])
    assert system == SUMMARY_SYSTEM_PROMPT
    assert_valid_history(messages)


def test_summary_request_keeps_the_newest_part_of_a_long_transcript() -> None:
    dropped = [m for n in range(400) for m in (user(f"question {n:03d} " + "q" * 200), reply(f"answer {n:03d}"))]
    _, messages = summary_request("earlier", dropped)
    text = messages[0]["content"][0]["text"]
    assert len(text) <= MAX_SUMMARY_INPUT_CHARS + 200
    assert "answer 399" in text and "question 000" not in text
    turns = text.split("Conversation turns to fold in:\n", 1)[1]
    assert turns.startswith(("user: question", "assistant: answer"))


def test_failed_results_are_marked_in_the_summary_request() -> None:
    dropped = [user("build"), uses(("b", "build.run")), results(("b", "linker error"), error=True), reply("broken")]
    text = summary_request(None, dropped)[1][0]["content"][0]["text"]
    assert "user: build.run failed: linker error" in text.splitlines()


def test_with_summary_appends_a_delimited_section() -> None:
    assert with_summary("You are VoiceIDE.", None) == "You are VoiceIDE."
    assert with_summary("You are VoiceIDE.", "  ") == "You are VoiceIDE."
    prompt = with_summary("You are VoiceIDE.", "The user fixes the parser.")
    assert prompt.startswith("You are VoiceIDE.\n\n")
    assert f"{SUMMARY_MARKER}\nThe user fixes the parser.\n{SUMMARY_END}" in prompt
    assert summary_of(prompt) == "The user fixes the parser."
    assert summary_of("You are VoiceIDE.") is None


# ---- the stepped window -----------------------------------------------------------------------


def play_steps(turns: int, *, budget: Budget, max_messages: int | None = None) -> list[tuple[int, bool, Any]]:
    """A session played turn after turn as the conductor keeps it: each window from where the
    previous one started (the summary's end once a step folded it). (start, stepped, window)."""
    history: list[Message] = []
    keep_from = 0
    played = []
    for turn in range(turns):
        history.append(user(f"question {turn} " + "q" * 300))
        if turn % 3 == 2:
            history += [uses((f"t{turn}", "editor.readFile")), results((f"t{turn}", "r" * 5_000))]
        window = stepped_window(
            history, fixed_chars=4_000, budget=budget, keep_from=keep_from, max_messages=max_messages
        )
        played.append((window.start, window.stepped, window))
        history.append(reply(f"answer {turn} " + "a" * 400))
        keep_from = window.start
    return played


def test_the_start_stays_while_it_fits_and_steps_by_about_half() -> None:
    budget = Budget(input_tokens=6_000)
    played = play_steps(60, budget=budget)
    steps = [turn for turn, (_, stepped, _) in enumerate(played) if stepped]
    assert 2 <= len(steps) <= 12  # a few steps, not one every turn
    room = budget.input_tokens - 1_000
    for turn, (start, stepped, window) in enumerate(played):
        assert window.estimated_tokens <= budget.input_tokens
        assert is_plain_user_message(window.messages[0])
        assert_valid_history(window.messages)
        if turn and not stepped:
            assert start == played[turn - 1][0]  # the prefix is the one before's
        if stepped:
            assert start > played[turn - 1][0]
            assert window.estimated_tokens - 1_000 <= room / 2  # about half dropped at once
            before = played[turn - 1][2].estimated_tokens - 1_000
            assert window.estimated_tokens - 1_000 < before * 0.75


def test_between_steps_a_request_starts_with_the_one_befores_messages_up_to_a_new_rounds_elision() -> None:
    played = play_steps(40, budget=Budget(input_tokens=6_000))
    for turn, ((_, _, before), (_, stepped, after)) in enumerate(pairwise(played), 1):
        if stepped:
            continue
        same = before.messages[:-1]
        if turn % 3 == 2:  # a new round: the previous round's big result is now one line
            rounds = [i for i, m in enumerate(same) if any("toolResult" in b for b in m["content"])]
            same = same[: rounds[-1]] if rounds else same
        assert after.messages[: len(same)] == same


def test_a_step_by_the_message_count_keeps_about_half_of_them() -> None:
    played = play_steps(60, budget=Budget(input_tokens=1_000_000), max_messages=40)
    steps = [window for _, stepped, window in played if stepped]
    assert steps and all(len(window.messages) <= 20 for window in steps)
    assert all(len(window.messages) <= 40 for _, _, window in played)
    assert sum(1 for _, stepped, _ in played if not stepped) > 3 * len(steps)


def test_a_previous_start_no_longer_read_steps() -> None:
    history = session(12, result_chars=100)
    window = stepped_window(history, fixed_chars=0, budget=Budget(), keep_from=None)
    assert window.stepped and is_plain_user_message(window.messages[0])
    assert len(window.messages) <= len(history) / 2
    kept = stepped_window(history, fixed_chars=0, budget=Budget(), keep_from=0)
    assert not kept.stepped and kept.start == 0 and kept.messages == history


def test_a_previous_start_inside_a_round_moves_to_the_next_plain_user_message() -> None:
    history = [user("a"), uses(("t", "x.read")), results(("t", "ok")), reply("b"), user("c"), reply("d"), user("e")]
    window = stepped_window(history, fixed_chars=0, budget=Budget(), keep_from=2)
    assert window.start == 4 and not window.stepped
    assert_valid_history(window.messages)


def test_the_current_turn_always_goes_even_past_the_budget() -> None:
    huge = [user("old"), reply("ok"), user("summarize this " + "w" * 50_000)]
    for keep_from in (None, 0, 2, 5):
        window = stepped_window(huge, fixed_chars=1_000, budget=Budget(input_tokens=1_000), keep_from=keep_from)
        assert window.start == 2 and window.messages == [huge[2]]
    history = [user("read"), uses(("a", "x.read")), results(("a", "r" * 200_000))]
    window = stepped_window(history, fixed_chars=0, budget=Budget(input_tokens=1_000), keep_from=0)
    assert window.start == 0 and window.messages == history
    assert stepped_window([], fixed_chars=10, budget=Budget(), keep_from=0).messages == []


@settings(max_examples=200, deadline=None)
@given(
    history=histories(),
    tokens=st.integers(1, 20_000),
    fixed=st.integers(0, 20_000),
    keep_from=st.one_of(st.none(), st.integers(0, 40)),
    max_messages=st.one_of(st.none(), st.integers(2, 40)),
)
def test_any_stepped_window_is_valid_and_a_suffix_modulo_elision(
    history: list[Message], tokens: int, fixed: int, keep_from: int | None, max_messages: int | None
) -> None:
    before = copy.deepcopy(history)
    budget = Budget(input_tokens=tokens)
    window = stepped_window(history, fixed_chars=fixed, budget=budget, keep_from=keep_from, max_messages=max_messages)
    assert history == before
    assert_valid_history(window.messages)
    assert window.messages and is_plain_user_message(window.messages[0])
    assert window.messages == elide_old_tool_results(history, budget.elide_over_chars)[window.start :]
    later_starts = [i for i, m in enumerate(history) if is_plain_user_message(m) and i > window.start]
    assert window.estimated_tokens <= tokens or not later_starts
    if max_messages is not None and later_starts:
        assert len(window.messages) <= max_messages
    if not window.stepped and keep_from is not None and later_starts:
        assert window.start >= keep_from  # never reaches back before the previous start
