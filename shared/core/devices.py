"""Several devices of one person on one session: who is present, what each does, who gets what.

The session's connection (``state.connection_id``) is one device, ``state.device_id`` ("app" for
an app that names none, with every role); up to ``MAX_DEVICES - 1`` more are ``state.devices``,
each with its own connection, roles and declared tools. A device joins with a ``sessionStart``
naming another id than the session's device, from a connection that is not the session's; the
same id again (a reconnect) takes that entry's place. Pure: no I/O.

Routing (docs/protocol.md, "Which device gets what"): an event goes to every device present,
except a ``tts.speak`` (only the device whose words started the turn: ``voice_device``) and a
model's ``toolCall`` (only the device chosen to run it: ``ModelCall.device``). Partials go to the
devices that display and to the voice device. With no other device present, nothing is targeted:
a single-device session works, and costs, exactly as before. What each role allows is
``shared.core.roles``: nothing here names a role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.core.decision import SPEAK_TOOL, CoreSettings, Decision, Outcome
from shared.core.roles import Action, may
from shared.core.state import DeviceEntry, ModelCall, SessionState
from shared.core.wrapper import ClientTool
from shared.wire.protocol import (
    DEFAULT_DEVICE_ID,
    MAX_DEVICES,
    DevicesChanged,
    DeviceSeen,
    Payload,
    SessionStart,
    ToolCall,
)
from shared.wire.protocol_tools import MCP_TOOL_PREFIX
from shared.wire.wire_formats import format_timestamp


class TooManyDevices(Exception):
    """The session has ``MAX_DEVICES`` devices: this one is not added."""


class NotPermitted(Exception):
    """The device may not send this event (its roles): answered to it alone, ``invalid_event``."""


@dataclass(frozen=True)
class Recipient:
    device_id: str
    connection_id: str
    roles: tuple[str, ...]


def is_joining(state: SessionState, connection_id: str, start: SessionStart) -> bool:
    """Whether this ``sessionStart`` adds (or brings back) a device beside the session's own:
    from a connection that is not the session's, naming another device than the session's."""
    if connection_id == state.connection_id or start.device is None:
        return False
    if state.connection_id is None or not state.connection_live:
        return False  # no other device to stay beside: it becomes the session's connection
    return start.device.id != state.device_id


def entry_of(state: SessionState, connection_id: str) -> DeviceEntry | None:
    return next((entry for entry in state.devices if entry.connection_id == connection_id), None)


def device_of(state: SessionState, connection_id: str) -> str | None:
    """The device a connection is (None: a connection the session does not know)."""
    if connection_id == state.connection_id:
        return state.device_id
    entry = entry_of(state, connection_id)
    return entry.device_id if entry is not None else None


def name_of(state: SessionState, device_id: str) -> str:
    """The name a device gave itself (its id when it gave none)."""
    if device_id == state.device_id:
        return state.device_name or device_id
    entry = next((entry for entry in state.devices if entry.device_id == device_id), None)
    return (entry.name if entry is not None else "") or device_id


def roles_of(state: SessionState, device_id: str | None) -> list[str]:
    if device_id is None:
        return []
    if device_id == state.device_id:
        return state.device_roles
    entry = next((entry for entry in state.devices if entry.device_id == device_id), None)
    return entry.roles if entry is not None else []


def device_may(state: SessionState, device_id: str | None, action: Action) -> bool:
    """Whether the device's roles allow ``action`` (``shared.core.roles``)."""
    return may(roles_of(state, device_id), action)


def join(
    state: SessionState, connection_id: str, start: SessionStart, settings: CoreSettings, *, now: float
) -> Outcome:
    """A device joins beside the session's own (or comes back on a new connection): it is caught
    up from its own ``lastSeq`` before it is live. Raises ``TooManyDevices``."""
    assert start.device is not None
    decision = Decision(state)
    devices = decision.state.devices
    tools = [ClientTool.of_declared(tool) for tool in start.tools] if start.tools is not None else None
    entry = DeviceEntry(
        device_id=start.device.id,
        name=start.device.name,
        roles=list(start.device.roles),
        connection_id=connection_id,
        connected_at=now,
        live=False,
        tools=tools,
        capabilities=list(start.capabilities or ()),
    )
    known = next((index for index, old in enumerate(devices) if old.device_id == entry.device_id), None)
    if known is not None:
        if devices[known].connection_id != connection_id:
            decision.taken_over.append(devices[known].connection_id)  # the device is back elsewhere
        devices[known] = entry
    elif 1 + len(devices) >= MAX_DEVICES or connection_id in state.refused_connections:
        raise TooManyDevices(state.session_id)
    else:
        if not devices and decision.state.device_tools is None:
            decision.state.device_tools = decision.state.tools  # the session's own, kept apart
        devices.append(entry)
    decision.state.tools = merged_tools(decision.state)
    if start.last_seq is None:
        _resend_pending(decision, entry.device_id)
    decision.unnumbered.append(changed(decision.state, joined=entry.device_id))
    decision.notes.append(f"device {entry.device_id} joined")
    return decision.outcome()


def leave(state: SessionState, connection_id: str, settings: CoreSettings) -> Outcome:
    """A device's connection closed: it is no longer present. Its calls that read (and run in the
    foreground) go to another device that runs the tool; the others wait for it to come back
    until their deadline."""
    decision = Decision(state)
    entry = entry_of(decision.state, connection_id)
    if entry is None:
        return decision.outcome()
    decision.state.devices = [other for other in decision.state.devices if other.connection_id != connection_id]
    decision.state.tools = merged_tools(decision.state) if decision.state.devices else decision.state.device_tools
    if not decision.state.devices and decision.state.device_tools is not None:
        decision.state.device_tools = None
    turn = decision.state.turn
    for call in turn.tools.pending() if turn is not None and turn.tools is not None else ():
        if call.device != entry.device_id or call.held or not _rerunnable(decision.state, settings, call):
            continue
        other = tool_device(decision.state, call.name, settings)
        if other is not None and other != entry.device_id:
            call.device = other
            decision.send(ToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments))
    decision.unnumbered.append(changed(decision.state, left=entry.device_id))
    decision.notes.append(f"device {entry.device_id} left")
    return decision.outcome()


def mark_live(state: SessionState, device_id: str) -> SessionState:
    """The device was caught up: events go to it as they are made."""
    copy = state.model_copy(deep=True)
    for entry in copy.devices:
        if entry.device_id == device_id:
            entry.live = True
    return copy


def _rerunnable(state: SessionState, settings: CoreSettings, call: ModelCall) -> bool:
    """A call that only reads and answers at once: run again elsewhere, it changes nothing twice."""
    tool = next((tool for tool in state.tools or () if tool.name == call.name), None)
    if tool is not None:
        return tool.effects == "none" and not tool.background
    return call.name not in settings.changing_tools and call.name not in settings.background_tools


def _resend_pending(decision: Decision, device_id: str) -> None:
    """A device back without ``lastSeq`` (it may have restarted) gets its unanswered calls again."""
    turn = decision.state.turn
    for call in turn.tools.pending() if turn is not None and turn.tools is not None else ():
        if call.device == device_id and not call.held:
            decision.send(ToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments))


# ---- tools ---------------------------------------------------------------------------------------


def merged_tools(state: SessionState) -> list[ClientTool] | None:
    """The tools the model may call: those of every device that runs tools (None: the catalog,
    when no such device declared any)."""
    declared: list[ClientTool] = []
    any_declared = False
    sources: list[list[ClientTool] | None] = []
    if may(state.device_roles, Action.RUN_TOOLS):
        sources.append(state.device_tools if state.devices else state.tools)
    sources.extend(entry.tools for entry in state.devices if may(entry.roles, Action.RUN_TOOLS))
    for tools in sources:
        if tools is None:
            continue
        any_declared = True
        for tool in tools:
            index = next((at for at, known in enumerate(declared) if known.name == tool.name), None)
            if index is None:
                declared.append(tool)
            elif tool.effects == "changes" or tool.background:  # the strictest declaration counts
                known = declared[index]
                declared[index] = known.model_copy(
                    update={
                        "effects": "changes" if "changes" in (known.effects, tool.effects) else "none",
                        "background": known.background or tool.background,
                    }
                )
    return declared if any_declared else None


def changes_project(state: SessionState, name: str, settings: CoreSettings) -> bool:
    """Whether a call of ``name`` changes the person's project: so says any declaration of it by
    any device present (or the catalog, for a device that runs the catalog's tools)."""
    sources: list[list[ClientTool] | None] = [state.device_tools if state.devices else state.tools]
    sources.extend(entry.tools for entry in state.devices)
    for tools in sources:
        if tools is None:
            if name in settings.changing_tools:
                return True
        elif any(tool.name == name and tool.effects == "changes" for tool in tools):
            return True
    return False


def capabilities_of(state: SessionState, device_id: str | None) -> list[str]:
    """What a device announced in its ``sessionStart`` (the session's own: the session's)."""
    if device_id is None or device_id == state.device_id:
        return state.capabilities
    entry = next((entry for entry in state.devices if entry.device_id == device_id), None)
    return entry.capabilities if entry is not None else []


def _runs(tools: list[ClientTool] | None, name: str, settings: CoreSettings) -> bool:
    return name in settings.catalog_names if tools is None else any(tool.name == name for tool in tools)


def runs_tool(state: SessionState, device_id: str, name: str, settings: CoreSettings) -> bool:
    """Whether the device runs tool ``name`` (what it declared, else the catalog)."""
    if device_id == state.device_id:
        own = state.device_tools if state.devices else state.tools
        return may(state.device_roles, Action.RUN_TOOLS) and _runs(own, name, settings)
    entry = next((entry for entry in state.devices if entry.device_id == device_id), None)
    return entry is not None and may(entry.roles, Action.RUN_TOOLS) and _runs(entry.tools, name, settings)


def tool_device(state: SessionState, name: str, settings: CoreSettings) -> str | None:
    """The device a model's call of ``name`` goes to: a device there for the tools (it runs them
    and does not speak: a desktop companion) that runs it, the one that joined last; else the one
    that spoke last if it runs the tool, else the one that joined last of those that do; None when
    no device present runs it."""
    if not state.devices:
        return state.device_id if may(state.device_roles, Action.RUN_TOOLS) else None
    candidates: list[tuple[float, str, bool]] = []  # (joined at, device, speaks)
    own = may(state.device_roles, Action.RUN_TOOLS) and state.connection_id is not None
    if own and _runs(state.device_tools, name, settings):
        candidates.append((state.device_connected_at, state.device_id, may(state.device_roles, Action.SPEAK)))
    for entry in state.devices:
        if may(entry.roles, Action.RUN_TOOLS) and _runs(entry.tools, name, settings):
            candidates.append((entry.connected_at, entry.device_id, may(entry.roles, Action.SPEAK)))
    if not candidates:
        return None
    runners = [candidate for candidate in candidates if not candidate[2]]
    if runners:
        return max(runners)[1]
    speaker = state.voice_device or state.device_id
    if any(device == speaker for _, device, _speaks in candidates):
        return speaker
    return max(candidates)[1]


# ---- routing -------------------------------------------------------------------------------------


def target_of(state: SessionState, payload: Payload) -> str | None:
    """The one device an event goes to (None: every device present). A session whose device
    never said which it is has one device: nothing is targeted (and nothing more is kept)."""
    if not isinstance(payload, ToolCall) or (not state.devices and state.device_id == DEFAULT_DEVICE_ID):
        return None
    if payload.name == SPEAK_TOOL:
        return state.voice_device or state.device_id
    call = state.model_call(payload.call_id) if state.turn is not None else None
    if call is not None:
        return call.device or state.device_id
    held = previewed(state, payload.call_id)
    if held is not None:
        return held.device or state.device_id
    job = next((job for job in state.background if job.call_id == payload.call_id), None)
    if job is not None:
        return job.device or state.device_id
    return None


def recipients(state: SessionState) -> list[Recipient]:
    """The devices present that hear events as they are made."""
    present = []
    if state.connection_id is not None and state.connection_live:
        present.append(Recipient(state.device_id, state.connection_id, tuple(state.device_roles)))
    present.extend(
        Recipient(entry.device_id, entry.connection_id, tuple(entry.roles)) for entry in state.devices if entry.live
    )
    return present


def hears(recipient: Recipient, target: str | None) -> bool:
    return target is None or recipient.device_id == target


def shows_partials(state: SessionState, recipient: Recipient) -> bool:
    """Partials go to the devices that display and to the voice device of the turn."""
    return may(recipient.roles, Action.SHOW_PARTIALS) or recipient.device_id == (state.voice_device or state.device_id)


def may_answer(state: SessionState, connection_id: str, call_id: str) -> bool:
    """Whether a result (or progress) for ``call_id`` may come from this connection: from the
    device it was sent to (any of its connections), or any device when it was not routed; never for
    a call of a tool on an MCP server (the conductor makes it: no device was sent it)."""
    turn = state.turn
    call = state.model_call(call_id) if turn is not None else None
    if call is None:
        call = previewed(state, call_id)
    job = next((job for job in state.background if job.call_id == call_id), None)
    name = call.name if call is not None else job.name if job is not None else ""
    if name.startswith(MCP_TOOL_PREFIX):
        return False
    if not state.devices:
        return True
    device = device_of(state, connection_id)
    owner = call.device if call is not None else None
    if owner is None and job is not None:
        owner = job.device
    return owner is None or owner == device


def previewed(state: SessionState, call_id: str) -> ModelCall | None:
    """The held change whose card waits for the read ``call_id`` (``shared.core.change_preview``)."""
    turn = state.turn
    if turn is None or turn.tools is None:
        return None
    return next((call for call in turn.tools.calls if call.held and call.preview == call_id), None)


REFUSED_KEPT = 8


def refuse(state: SessionState, connection_id: str) -> Outcome:
    """A connection refused as a device too many: later events from it are refused too."""
    decision = Decision(state)
    kept = [known for known in decision.state.refused_connections if known != connection_id]
    decision.state.refused_connections = [*kept, connection_id][-REFUSED_KEPT:]
    return decision.outcome()


# ---- who is present ------------------------------------------------------------------------------


def seen(state: SessionState, self_device: str | None = None) -> tuple[DeviceSeen, ...]:
    """The devices present, as ``sessionReady`` and ``devicesChanged`` list them."""
    listed: list[DeviceSeen] = []
    if state.connection_id is not None:
        listed.append(
            _seen(state.device_id, state.device_name, state.device_roles, state.device_connected_at, self_device)
        )
    listed.extend(_seen(e.device_id, e.name, e.roles, e.connected_at, self_device) for e in state.devices)
    return tuple(listed)


def _seen(device_id: str, name: str, roles: Iterable[str], at: float, self_device: str | None) -> DeviceSeen:
    return DeviceSeen(
        id=device_id, name=name, roles=tuple(roles), connected_at=format_timestamp(at), self_=device_id == self_device
    )


def changed(state: SessionState, *, joined: str | None = None, left: str | None = None) -> DevicesChanged:
    return DevicesChanged(devices=seen(state), joined=joined, left=left)
