"""The one shared assertion: a stored history Bedrock would accept."""

from __future__ import annotations

from shared.core.messages import Message, history_problems


def assert_valid_history(messages: list[Message]) -> None:
    problems = history_problems(messages)
    assert not problems, f"history Bedrock would reject: {problems}\n{messages}"
