"""A Python stand-in for the VoiceIDE iOS runtime: the conductor's WebSocket client, as library and CLI."""

from .client import (
    DEFAULT_BACKOFF,
    ClientClosed,
    ConductorClient,
    ConductorUnavailable,
    Link,
    TranscriptTooLarge,
    scaled_backoff,
    session_url,
)
from .local_stub import OFFLINE_REPLY, LocalConductorStub
from .recognizer import RecognizerPace
from .render import NullRenderer, TranscriptRenderer
from .speech import (
    EspeakSpeaker,
    HeldSpeaker,
    Playback,
    PrintSpeaker,
    SilentSpeaker,
    Speaker,
    SpeakerError,
    make_speaker,
)
from .tools import ToolError, ToolHandler, ToolRouter
from .turn import ToolInvocation, TurnResult, TurnTimeout
from .ui_model import PatchError, UIModel

__all__ = [
    "DEFAULT_BACKOFF",
    "OFFLINE_REPLY",
    "ClientClosed",
    "ConductorClient",
    "ConductorUnavailable",
    "EspeakSpeaker",
    "HeldSpeaker",
    "Link",
    "LocalConductorStub",
    "NullRenderer",
    "PatchError",
    "Playback",
    "PrintSpeaker",
    "RecognizerPace",
    "SilentSpeaker",
    "Speaker",
    "SpeakerError",
    "ToolError",
    "ToolHandler",
    "ToolInvocation",
    "ToolRouter",
    "TranscriptRenderer",
    "TranscriptTooLarge",
    "TurnResult",
    "TurnTimeout",
    "UIModel",
    "make_speaker",
    "scaled_backoff",
    "session_url",
]
