"""The capabilities the client announces in ``sessionStart``."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from shared.wire.protocol import EXECUTING_STATE, SENTENCE_SPEECH, SPEAKING_STATE, SessionStart

DEFAULT_CAPABILITIES: tuple[str, ...] = (SENTENCE_SPEECH, SPEAKING_STATE, EXECUTING_STATE)
"""What the client announces by default: it plays ``tts.speak`` calls in order, so the conductor
may speak each sentence as soon as it is complete, and it shows the states ``speaking`` and
``executing`` besides ``thinking`` and ``idle``."""


def checked_capabilities(capabilities: Sequence[str]) -> tuple[str, ...]:
    """The names as ``sessionStart`` carries them (in order, once each); a ValueError for what
    it cannot carry."""
    if isinstance(capabilities, str):
        raise ValueError("capabilities is a sequence of names, not one string")
    names = tuple(dict.fromkeys(capabilities))
    try:
        SessionStart(session_id="check", capabilities=names)
    except ValidationError as exc:
        raise ValueError(f"capabilities cannot be announced: {exc.errors()[0]['msg']}") from None
    return names
