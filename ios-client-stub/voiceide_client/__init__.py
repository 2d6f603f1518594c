"""A Python stand-in for the VoiceIDE iOS runtime: the conductor's WebSocket client, as library and CLI."""

from .client import (
    DEFAULT_BACKOFF,
    ClientClosed,
    ConductorClient,
    ConductorUnavailable,
    Link,
    scaled_backoff,
    session_url,
)
from .local_stub import OFFLINE_REPLY, LocalConductorStub
from .render import NullRenderer, TranscriptRenderer
from .speech import EspeakSpeaker, HeldSpeaker, PrintSpeaker, SilentSpeaker, Speaker, SpeakerError, make_speaker
from .tools import INTERRUPTED, ToolError, ToolHandler, ToolRouter
from .turn import ToolInvocation, TurnResult, TurnTimeout

__all__ = [
    "DEFAULT_BACKOFF",
    "INTERRUPTED",
    "OFFLINE_REPLY",
    "ClientClosed",
    "ConductorClient",
    "ConductorUnavailable",
    "EspeakSpeaker",
    "HeldSpeaker",
    "Link",
    "LocalConductorStub",
    "NullRenderer",
    "PrintSpeaker",
    "SilentSpeaker",
    "Speaker",
    "SpeakerError",
    "ToolError",
    "ToolHandler",
    "ToolInvocation",
    "ToolRouter",
    "TranscriptRenderer",
    "TurnResult",
    "TurnTimeout",
    "make_speaker",
    "scaled_backoff",
    "session_url",
]
