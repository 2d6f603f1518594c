"""The request that names a session for the person's session list (one short call, off the hot path)."""

from __future__ import annotations

from shared.core.memory import render_turns
from shared.core.messages import Message

TITLE_SYSTEM_PROMPT = (
    "You name conversations between a developer and a voice coding assistant in an IDE, for the "
    "developer's list of sessions. Reply with a title of at most six words that the developer would "
    "recognise, such as: Fixing the login test. No quotes, no full stop, nothing else."
)
TITLE_INPUT_CHARS = 3000
TITLE_MAX_TOKENS = 60


def title_request(messages: list[Message]) -> tuple[str, list[Message]]:
    """The system prompt and the one user message of a title call: the conversation's first
    turns as plain lines, at most ``TITLE_INPUT_CHARS`` characters."""
    turns = render_turns(messages)[:TITLE_INPUT_CHARS] or "(no turns)"
    return TITLE_SYSTEM_PROMPT, [{"role": "user", "content": [{"text": f"{turns}\n\nThe title:"}]}]
