"""What each device role allows (docs/protocol.md, "Several devices"), as data.

``PERMISSIONS`` says, per role, what a device may send and which events it is sent because of its
roles; ``may`` is the one question the rest of the core asks of them (``shared.core.devices``,
``shared.core.from_device``), so no rule names a role. ``REFUSALS`` says how a frame a device may
not send is answered. ``ROUTING`` is the table "Which device gets what" of docs/protocol.md, one row
a line (tests/core/test_roles.py holds the document to it). Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from types import MappingProxyType

from shared.wire.protocol import DISPLAY, TOOLS, VOICE


class Action(StrEnum):
    """What a role allows a device: to send a kind of frame, or to be sent a kind of event."""

    SPEAK = "speak"  # sends transcripts (final and partial) and barge-ins; a turn it starts speaks to it
    CONFIRM = "confirm"  # sends confirmChange: a tap on a held change's card
    RUN_TOOLS = "run tools"  # is sent the model's calls of the tools it runs (declared, else the catalog's)
    SHOW_PARTIALS = "show partials"  # is sent assistantSpeechPartial
    SEE_PROGRESS = "see progress"  # is sent the other devices' toolProgress, as the conductor keeps it
    HEAR_VOCABULARY = "hear vocabulary"  # is sent the workspace's phrases for its recognizer (vocabulary)
    SEE_PROJECT = "see the project"  # is sent the devices' workspace context and the names a transcript may mean


PERMISSIONS: Mapping[str, frozenset[Action]] = MappingProxyType(
    {
        VOICE: frozenset({Action.SPEAK, Action.SEE_PROGRESS, Action.HEAR_VOCABULARY}),
        DISPLAY: frozenset({Action.CONFIRM, Action.SHOW_PARTIALS, Action.SEE_PROGRESS, Action.SEE_PROJECT}),
        TOOLS: frozenset({Action.RUN_TOOLS}),
    }
)
"""Role -> what it allows; a device may what any of its roles allows."""

REFUSALS: Mapping[Action, str] = MappingProxyType(
    {Action.CONFIRM: "confirmChange comes from a device that displays the change (the display role)"}
)
"""The ``invalid_event`` message for a frame sent without the action it needs, from any device.
A frame whose action is not here (speech) is simply not taken from a device beside the session's
own: a device that does not speak says nothing the session hears."""


class CallDevice(Enum):
    """Not a role: the device a call went to (or that device again after a reconnect)."""

    ONLY = "the device the call went to"


CALL_DEVICE = CallDevice.ONLY

SentBy = Action | CallDevice | None
"""Who may send a kind of frame: a device whose roles allow the action, the device the call went
to, or (None) any device of the session."""


def may(roles: Iterable[str], action: Action) -> bool:
    """Whether a device with ``roles`` may do ``action``."""
    return any(action in PERMISSIONS.get(role, frozenset()) for role in roles)


def roles_for(action: Action) -> frozenset[str]:
    """The roles that allow ``action``."""
    return frozenset(role for role, allowed in PERMISSIONS.items() if action in allowed)


# ---- routing: docs/protocol.md, "Which device gets what" ------------------------------------------


class Audience(StrEnum):
    """Who gets an event (or, for a call's answers, who may send them), in the document's words."""

    EVERY_DEVICE = "every device"
    TURN_VOICE = "the voice device of the turn"  # the device whose transcript started the turn
    ONE_RUNNER = "one device that runs that tool"
    CALL_DEVICE = "the device the call went to"
    OTHERS_PRESENT = "the other devices present"
    CHANGE_RUNNER = "the device that will run the change"
    SENDER = "the device that sent the sessionStart"
    EVERY_OTHER = "every other device present"
    PRESENT_WITH = "every device present with"  # the roles the line names
    ANY_DEVICE = "accepted from any device of the session"


@dataclass(frozen=True)
class Route:
    """One line of "Which device gets what": the event as the document names it, who gets it, and
    the actions whose roles decide it (the roles the line names)."""

    event: str
    audience: Audience
    actions: tuple[Action, ...] = ()

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(role for action in self.actions for role in roles_for(action))


ROUTING: tuple[Route, ...] = (
    Route("numbered events: finals, cards, turn errors, `convo.setState`", Audience.EVERY_DEVICE),
    Route("`assistantSpeechPartial`", Audience.TURN_VOICE, (Action.SHOW_PARTIALS, Action.SPEAK)),
    Route("`tts.speak`", Audience.TURN_VOICE, (Action.SPEAK,)),
    Route("a model's `toolCall`", Audience.ONE_RUNNER, (Action.RUN_TOOLS, Action.SPEAK)),
    Route("`toolResult`, `toolProgress` of a call", Audience.CALL_DEVICE),
    Route("`toolProgress` kept (the conductor's, with `name`)", Audience.OTHERS_PRESENT, (Action.SEE_PROGRESS,)),
    Route("a held change's preview (`editor.readFile`, `conductor-preview-…`)", Audience.CHANGE_RUNNER),
    Route("`sessionReady`", Audience.SENDER),
    Route("`devicesChanged`", Audience.EVERY_OTHER),
    Route("`workspaceContext`, `workspaceNames`", Audience.ANY_DEVICE),
    Route("`vocabulary`", Audience.PRESENT_WITH, (Action.HEAR_VOCABULARY,)),
    Route("`namesHeard`, a device's `workspaceContext` (forwarded)", Audience.PRESENT_WITH, (Action.SEE_PROJECT,)),
)
"""Who gets what, one row a line of the document's table, in its order."""
