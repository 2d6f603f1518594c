"""``shrink_window``: the smaller history window sent when a request overflows the model's context.

Bedrock refuses a window that starts at an assistant message or at tool results whose tool uses
are not in it, so every shrunk window must still be a history Bedrock accepts.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.messages import (
    Message,
    history_problems,
    is_plain_user_message,
    shrink_window,
    text_block,
    tool_result_block,
    tool_use_block,
)
from tests.history_check import assert_valid_history


def user(text: str) -> Message:
    return {"role": "user", "content": [text_block(text)]}


def reply(text: str) -> Message:
    return {"role": "assistant", "content": [text_block(text)]}


def uses(*ids: str, text: str | None = None) -> Message:
    content = [text_block(text)] if text else []
    content += [tool_use_block(i, "tool_call", {"name": "project.search", "arguments": {}}) for i in ids]
    return {"role": "assistant", "content": content}


def results(*ids: str, then_said: str | None = None) -> Message:
    content = [tool_result_block(i, '{"ok":true}', error=False) for i in ids]
    if then_said:  # a new utterance while the calls were pending: merged after the cancelled results
        content.append(text_block(then_said))
    return {"role": "user", "content": content}


def plain_user_indexes(messages: list[Message]) -> list[int]:
    return [index for index, message in enumerate(messages) if is_plain_user_message(message)]


# ---- examples -------------------------------------------------------------------------------


def test_a_lone_user_message_cannot_shrink() -> None:
    assert shrink_window([user("hi")]) is None


def test_a_window_whose_only_plain_user_message_is_first_cannot_shrink() -> None:
    window = [user("build"), uses("t1"), results("t1"), uses("t2", text="again"), results("t2")]
    assert shrink_window(window) is None


def test_the_newer_half_is_kept_from_its_first_plain_user_message() -> None:
    window = [user("a"), reply("A"), user("b"), reply("B"), user("c"), reply("C"), user("d"), reply("D"), user("e")]
    assert shrink_window(window) == window[4:]


def test_tool_results_never_start_a_window() -> None:
    window = [user("a"), reply("A"), user("search"), uses("t1"), results("t1"), uses("t2"), results("t2")]
    shrunk = shrink_window(window)
    assert shrunk == window[2:]  # the newer half starts at tool results: back to the utterance
    assert_valid_history(shrunk)
    assert shrink_window(shrunk) is None


def test_results_merged_with_a_new_utterance_are_not_a_window_start() -> None:
    window = [user("a"), reply("A"), user("search"), uses("t1"), results("t1", then_said="never mind"), reply("OK")]
    assert shrink_window(window) == window[2:]


def test_the_last_user_message_is_always_kept_and_shrinking_ends() -> None:
    window = [user(str(i)) if i % 2 == 0 else reply(str(i)) for i in range(41)]
    sizes = []
    while (smaller := shrink_window(window)) is not None:
        assert len(smaller) < len(window)
        window = smaller
        sizes.append(len(window))
    assert window == [user("40")]
    assert sizes == [21, 11, 5, 3, 1]


# ---- property: any valid history ------------------------------------------------------------


@st.composite
def histories(draw: Any) -> list[Message]:
    """A history as the conductor stores it: turns of an utterance, tool rounds, a reply; the last
    turn may still wait for the model (the shape of a request)."""
    messages: list[Message] = []
    counter = iter(range(10**6))
    turns = draw(st.integers(min_value=1, max_value=12))
    for turn in range(turns):
        last = turn == turns - 1
        if messages and messages[-1]["role"] == "user":  # the previous turn was cut while calls were pending
            messages[-1]["content"].append(text_block(f"utterance {turn}"))
        else:
            messages.append(user(f"utterance {turn}"))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            ids = [f"t{next(counter)}" for _ in range(draw(st.integers(min_value=1, max_value=3)))]
            messages.append(uses(*ids, text=draw(st.sampled_from([None, "one moment"]))))
            messages.append(results(*ids))
        ending = draw(st.sampled_from(["reply", "reply", "pending"] if not last else ["reply", "open"]))
        if ending == "reply":
            messages.append(reply(f"answer {turn}"))
        elif ending == "pending" and messages[-1]["role"] == "assistant":
            messages.append(reply("ok"))
    if draw(st.booleans()) and messages[-1]["role"] == "assistant":
        messages.append(user("and one more thing"))
    return messages


@settings(max_examples=300, deadline=None)
@given(histories())
def test_every_shrunk_window_is_a_valid_suffix_starting_at_a_plain_user_message(messages: list[Message]) -> None:
    assert history_problems(messages) == [], messages  # the generator's own check
    starts = [index for index in plain_user_indexes(messages) if index > 0]
    shrunk = shrink_window(messages)
    if not starts:
        assert shrunk is None
        return
    assert shrunk is not None
    start = len(messages) - len(shrunk)
    assert start > 0 and messages[start:] == shrunk
    assert is_plain_user_message(shrunk[0])
    assert history_problems(shrunk) == []
    assert start <= starts[-1], "the last plain user message was dropped"
    newer_half = [index for index in starts if index >= len(messages) // 2]
    if newer_half:
        assert len(shrunk) <= len(messages) - len(messages) // 2


@settings(max_examples=200, deadline=None)
@given(histories())
def test_shrinking_repeatedly_ends_at_the_last_plain_user_message(messages: list[Message]) -> None:
    window = messages
    steps = 0
    while (smaller := shrink_window(window)) is not None:
        assert len(smaller) < len(window)
        assert history_problems(smaller) == []
        window = smaller
        steps += 1
        assert steps <= len(messages)
    assert window[0] is messages[plain_user_indexes(messages)[-1]]
    assert all(not is_plain_user_message(message) for message in window[1:])
