"""The VoiceIDE event protocol: the envelope, its nineteen kinds (``KINDS``: the base protocol's nine and
the conductor's ten extensions, the workspace's four in ``shared.wire.workspace``), parsing and serialization.

The wire contract is ``docs/protocol.md``.
Everything here is camelCase on the wire. Parsing never raises: it returns an ``Event``, an
``IgnoredEvent`` (unknown kind, per the spec's forward-compatibility rule) or a
``ProtocolError`` carrying the error code to send back.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from shared.wire import bounded_json
from shared.wire.payload import WirePayload as _Payload
from shared.wire.protocol_tools import MAX_DECLARED_TOOLS, MAX_RESULT_PARTS, DeclaredTool, checked_declarations
from shared.wire.wire_formats import (
    TIMESTAMP_SYNTAX,
    is_rfc3339_timestamp,
)
from shared.wire.workspace import NamesHeard, Vocabulary, WorkspaceContext, WorkspaceNames


class ErrorCode(StrEnum):
    """Error codes of the spec (server-side ones first, then client-side ones)."""

    INVALID_JSON = "invalid_json"
    INVALID_EVENT = "invalid_event"
    NO_SESSION = "no_session"
    EMPTY_TRANSCRIPT = "empty_transcript"
    NO_PENDING_TOOL_CALL = "no_pending_tool_call"
    INVALID_TOOL_CALL = "invalid_tool_call"
    BEDROCK_ERROR = "bedrock_error"
    CONDUCTOR_ERROR = "conductor_error"
    HANDLER_ERROR = "handler_error"
    # limits (an extension of the spec's list: a clear code for each configured limit)
    FRAME_TOO_LARGE = "frame_too_large"
    TRANSCRIPT_TOO_LONG = "transcript_too_long"
    RATE_LIMITED = "rate_limited"
    # the person ended or erased the session through the sessions API: the connection closes next
    SESSION_ENDED = "session_ended"
    SESSION_ERASED = "session_erased"
    # the person's daily spend ceiling is reached: the turn does not start until it resets
    BUDGET_EXCEEDED = "budget_exceeded"
    # a session has as many devices as it may: this sessionStart's device was not added
    TOO_MANY_DEVICES = "too_many_devices"
    # another connection took this session (or this device) over: this one hears nothing more
    TAKEN_OVER = "taken_over"
    # client-side codes
    WS_ERROR = "ws_error"
    WS_CONNECT_FAILED = "ws_connect_failed"
    WS_SEND_FAILED = "ws_send_failed"
    DECODE_ERROR = "decode_error"
    RECONNECT_FAILED = "reconnect_failed"
    AUDIO_OUTPUT_INTERRUPTED = "audio.output.interrupted"


SERVER_ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode.INVALID_JSON,
    ErrorCode.INVALID_EVENT,
    ErrorCode.NO_SESSION,
    ErrorCode.EMPTY_TRANSCRIPT,
    ErrorCode.NO_PENDING_TOOL_CALL,
    ErrorCode.INVALID_TOOL_CALL,
    ErrorCode.BEDROCK_ERROR,
    ErrorCode.CONDUCTOR_ERROR,
    ErrorCode.HANDLER_ERROR,
)
# Every code the conductor itself sends: the spec's server codes and one for each configured limit.
SENT_ERROR_CODES: tuple[ErrorCode, ...] = (
    *SERVER_ERROR_CODES,
    ErrorCode.FRAME_TOO_LARGE,
    ErrorCode.TRANSCRIPT_TOO_LONG,
    ErrorCode.RATE_LIMITED,
    ErrorCode.SESSION_ENDED,
    ErrorCode.SESSION_ERASED,
    ErrorCode.BUDGET_EXCEEDED,
    ErrorCode.TOO_MANY_DEVICES,
    ErrorCode.TAKEN_OVER,
)


# Capabilities an app may announce in ``sessionStart``.
SENTENCE_SPEECH = "sentenceSpeech"  # tts.speak per completed sentence while the model still writes
WHOLE_SENTENCES = "wholeSentences"  # with sentenceSpeech: never a first phrase, each tts.speak whole sentences
SPEAKING_STATE = "speakingState"  # convo.setState "speaking" when the first tts.speak goes out
EXECUTING_STATE = "executingState"  # convo.setState "executing" while the app runs the model's tools
AUTO_APPROVE_CHANGES = "autoApproveChanges"  # the app confirms changes itself: none is held for a yes
MAX_CAPABILITIES = 16
MAX_HANDOFF_TURNS = 8
MAX_HANDOFF_TEXT = 4000
MAX_HEARD_TEXT = 8000
# The deepest a frame may nest (envelope, kind and payload are 3; a declared tool's arguments schema
# is the deepest legitimate part, at 6 plus the schema's own depth): deeper is invalid_json.
MAX_FRAME_DEPTH = 64
# Optional extension fields left out of a frame when they have no value.
_OMITTED_WHEN_NONE = frozenset(
    {
        "lastSeq",
        "capabilities",
        "handoff",
        "heardText",
        "interrupted",
        "tools",
        "part",
        "parts",
        "fraction",
        "costUsd",
        "pricesAsOf",
        "firstPartialMs",
        "firstSpeakMs",
        "device",
        "devices",
        "joined",
        "left",
        "name",
    }
)
MAX_PROGRESS_MESSAGE = 200
Capability = Annotated[StrictStr, Field(min_length=1, max_length=64)]


class HandoffTurn(_Payload):
    role: Literal["user", "assistant"]
    text: StrictStr = Field(min_length=1, max_length=MAX_HANDOFF_TEXT)


class Handoff(_Payload):
    """A conversation moved from chat to voice: its summary and last turns, text only."""

    summary: StrictStr = Field(default="", max_length=MAX_HANDOFF_TEXT)
    # Extension: the chat's title, which the session keeps (left out of the wire when None).
    title: StrictStr | None = Field(default=None, max_length=200)

    @model_serializer(mode="wrap")
    def _without_no_title(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        wire: dict[str, Any] = handler(self)
        if wire.get("title") is None:
            wire.pop("title", None)
        return wire

    recent_turns: list[HandoffTurn] = Field(default_factory=list, alias="recentTurns", max_length=MAX_HANDOFF_TURNS)


# Several devices on one session (docs/protocol.md, "Several devices").
MAX_DEVICES = 4
VOICE: Final = "voice"  # hears and speaks: tts.speak, barge-in, a spoken yes
DISPLAY: Final = "display"  # shows the conversation: partials
TOOLS: Final = "tools"  # runs the tools it declares (none declared: the catalog's IDE tools)
DeviceRole = Literal["voice", "display", "tools"]
DEVICE_ROLES: tuple[DeviceRole, ...] = (VOICE, DISPLAY, TOOLS)
DEFAULT_DEVICE_ID = "app"  # the device of an app that does not say which it is


class Device(_Payload):
    """Extension: which device a connection is and what it does (``sessionStart.device``)."""

    id: StrictStr = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")
    name: StrictStr = Field(default="", max_length=64)
    roles: tuple[DeviceRole, ...] = Field(default=DEVICE_ROLES, min_length=1, max_length=3)

    @field_validator("roles")
    @classmethod
    def _roles_once(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("each role at most once")
        return tuple(role for role in DEVICE_ROLES if role in value)


class DeviceSeen(_Payload):
    """A device present on the session, as ``sessionReady`` and ``devicesChanged`` list it."""

    id: StrictStr
    name: StrictStr = ""
    roles: tuple[StrictStr, ...] = ()
    connected_at: StrictStr = Field(alias="connectedAt")
    self_: StrictBool = Field(default=False, alias="self")


class DevicesChanged(_Payload):
    """Extension (unnumbered, ignorable): a device joined or left the session."""

    devices: tuple[DeviceSeen, ...] = ()
    joined: StrictStr | None = None
    left: StrictStr | None = None


class ConfirmChange(_Payload):
    """Extension: a tap on a held change's card answers it, as a spoken yes or no would."""

    approve: StrictBool


class SessionStart(_Payload):
    session_id: StrictStr = Field(alias="sessionId", min_length=1, max_length=128)
    # Extension: the last server ``seq`` the client saw, so missed events can be replayed.
    last_seq: Annotated[int, Field(ge=0, strict=True)] | None = Field(default=None, alias="lastSeq")
    # Extension: optional behaviours the app understands (unknown names are ignored).
    capabilities: tuple[Capability, ...] | None = Field(default=None, max_length=MAX_CAPABILITIES)
    # Extension: seeds a new session's memory (ignored on a session that already has history).
    handoff: Handoff | None = None
    # Extension: the tools the session's model may call (none: the conductor's catalog); a later
    # sessionStart with tools replaces them, one without keeps them.
    tools: tuple[DeclaredTool, ...] | None = None
    # Extension: which device this connection is and its roles (none: the one device of the app).
    device: Device | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_counted(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) > MAX_DECLARED_TOOLS:
            extra = value[MAX_DECLARED_TOOLS]
            name = extra.get("name") if isinstance(extra, dict) else None
            label = f"tool {name[:80]!r}" if isinstance(name, str) else f"the tool at index {MAX_DECLARED_TOOLS}"
            raise ValueError(f"{label} is one too many: at most {MAX_DECLARED_TOOLS} tools may be declared")
        return value

    @field_validator("tools")
    @classmethod
    def _tools_checked(cls, value: tuple[DeclaredTool, ...] | None) -> tuple[DeclaredTool, ...] | None:
        return checked_declarations(value)


class SessionReady(_Payload):
    """Extension: the conductor's answer to each ``sessionStart``, sent once the connection has
    every kept event it missed. Unnumbered: ``lastSeq`` is the newest event the session has."""

    resumed: StrictBool
    title: StrictStr | None = None
    last_seq: Annotated[int, Field(ge=0, strict=True)] = Field(alias="lastSeq")
    capabilities: tuple[Capability, ...] = ()
    # Extension: the devices present, this one marked ``self`` (omitted when it is the only one).
    devices: tuple[DeviceSeen, ...] | None = None


class UserAudioTranscriptPartial(_Payload):
    text: StrictStr


class UserAudioTranscriptFinal(_Payload):
    text: StrictStr


class AssistantSpeechPartial(_Payload):
    text: StrictStr


class AssistantSpeechFinal(_Payload):
    text: StrictStr
    # Extension: true on the final that ends a segment stopped by a barge-in or a new request; its
    # text is what the user heard of the segment (may be empty). Omitted otherwise.
    interrupted: StrictBool | None = None


class AssistantUIPatch(_Payload):
    patch: StrictStr


class ToolCall(_Payload):
    call_id: StrictStr = Field(alias="callId", min_length=1, max_length=256)
    name: StrictStr = Field(min_length=1, max_length=256)
    arguments: StrictStr


class ToolResult(_Payload):
    call_id: StrictStr = Field(alias="callId", min_length=1, max_length=256)
    result: StrictStr | None = None
    error: StrictStr | None = None
    # Extension: a result too big for one 32 KB frame comes in ``parts`` events, part 0 to
    # parts - 1, each carrying the next piece of ``result`` (or of ``error``).
    part: Annotated[int, Field(ge=0, lt=MAX_RESULT_PARTS, strict=True)] | None = None
    parts: Annotated[int, Field(ge=2, le=MAX_RESULT_PARTS, strict=True)] | None = None

    @model_validator(mode="after")
    def _parts_checked(self) -> ToolResult:
        if (self.part is None) != (self.parts is None):
            raise ValueError("part and parts go together")
        if self.part is not None and self.parts is not None:
            if self.part >= self.parts:
                raise ValueError(f"part {self.part} is out of range: parts are numbered 0 to {self.parts - 1}")
            if (self.result is None) == (self.error is None):
                raise ValueError("a part carries a piece of result or of error, not both or neither")
        return self


class ToolProgress(_Payload):
    """Extension, from the app: how far a call it runs has got (the latest one counts). The
    conductor forwards it, unnumbered and with the tool's ``name``, to the session's other devices."""

    call_id: StrictStr = Field(alias="callId", min_length=1, max_length=256)
    name: StrictStr | None = Field(default=None, max_length=64)
    fraction: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    message: StrictStr = Field(default="", max_length=MAX_PROGRESS_MESSAGE)

    @field_validator("fraction", mode="before")
    @classmethod
    def _fraction_is_a_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int | float)):
            raise ValueError("fraction must be a number from 0 to 1")
        return value


class ToolCancel(_Payload):
    """Extension, from the conductor: stop running this call (the model cancelled it). Its result,
    if one still comes, is answered like any late result."""

    call_id: StrictStr = Field(alias="callId", min_length=1, max_length=256)
    name: StrictStr = ""
    reason: StrictStr = ""


class TurnUsage(_Payload):
    """Extension, from the conductor, unnumbered: what one turn cost, sent after its last speech."""

    turn_id: StrictStr = Field(alias="turnId")
    models: tuple[StrictStr, ...] = ()
    requests: Annotated[int, Field(ge=0, strict=True)] = 0
    input_tokens: Annotated[int, Field(ge=0, strict=True)] = Field(default=0, alias="inputTokens")
    output_tokens: Annotated[int, Field(ge=0, strict=True)] = Field(default=0, alias="outputTokens")
    cache_read_tokens: Annotated[int, Field(ge=0, strict=True)] = Field(default=0, alias="cacheReadTokens")
    cache_write_tokens: Annotated[int, Field(ge=0, strict=True)] = Field(default=0, alias="cacheWriteTokens")
    # What requests dropped before anyone heard them spent (in the totals): speculations started on
    # the person's partial speech and then dropped, turns launched alongside a write that lost its race.
    speculation_input_tokens: Annotated[int, Field(ge=0, strict=True)] = Field(
        default=0, alias="speculationInputTokens"
    )
    speculation_output_tokens: Annotated[int, Field(ge=0, strict=True)] = Field(
        default=0, alias="speculationOutputTokens"
    )
    cost_usd: float | None = Field(default=None, alias="costUsd")
    prices_as_of: StrictStr | None = Field(default=None, alias="pricesAsOf")
    first_partial_ms: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="firstPartialMs")
    first_speak_ms: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="firstSpeakMs")
    end_ms: Annotated[int, Field(ge=0)] = Field(default=0, alias="endMs")


class ErrorPayload(_Payload):
    code: StrictStr = Field(min_length=1, max_length=128)
    message: StrictStr = ""
    # Extension, on the app's ``audio.output.interrupted``: the words the user actually heard
    # (a longer report is cut, never a reason to lose the barge-in).
    heard_text: StrictStr | None = Field(default=None, alias="heardText")

    @field_validator("heard_text")
    @classmethod
    def _cap_heard_text(cls, value: str | None) -> str | None:
        return value[:MAX_HEARD_TEXT] if value is not None else None


Payload = (
    SessionStart
    | SessionReady
    | UserAudioTranscriptPartial
    | UserAudioTranscriptFinal
    | AssistantSpeechPartial
    | AssistantSpeechFinal
    | AssistantUIPatch
    | ToolCall
    | ToolResult
    | ToolProgress
    | ToolCancel
    | TurnUsage
    | DevicesChanged
    | ConfirmChange
    | WorkspaceContext
    | WorkspaceNames
    | Vocabulary
    | NamesHeard
    | ErrorPayload
)

#: wire name of each kind -> payload model, exactly as the spec spells them
KINDS: dict[str, type[Payload]] = {
    "sessionStart": SessionStart,
    "sessionReady": SessionReady,
    "userAudioTranscriptPartial": UserAudioTranscriptPartial,
    "userAudioTranscriptFinal": UserAudioTranscriptFinal,
    "assistantSpeechPartial": AssistantSpeechPartial,
    "assistantSpeechFinal": AssistantSpeechFinal,
    "assistantUIPatch": AssistantUIPatch,
    "toolCall": ToolCall,
    "toolResult": ToolResult,
    "toolProgress": ToolProgress,
    "toolCancel": ToolCancel,
    "turnUsage": TurnUsage,
    "devicesChanged": DevicesChanged,
    "confirmChange": ConfirmChange,
    "workspaceContext": WorkspaceContext,
    "workspaceNames": WorkspaceNames,
    "vocabulary": Vocabulary,
    "namesHeard": NamesHeard,
    "error": ErrorPayload,
}
KIND_NAMES: dict[type[Payload], str] = {model: name for name, model in KINDS.items()}


def now_timestamp() -> str:
    """UTC with milliseconds and ``Z``, as the spec's examples (what the conductor writes)."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _validate_timestamp(value: str) -> str:
    if not is_rfc3339_timestamp(value):
        raise ValueError(
            "timestamp must be an RFC 3339 date-time in ASCII digits with Z or an offset, "
            "e.g. 2025-01-15T10:30:00Z or 2025-01-15T10:30:00.000+02:00"
        )
    return value


class Event(BaseModel):
    """One frame on the wire: ``{id, timestamp, kind: {<kindName>: payload}}``.

    ``seq`` is an optional extension: the per-session sequence number of server events, so a
    reconnecting client can ask for what it missed. Clients that don't know it ignore it.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    id: uuid.UUID
    timestamp: StrictStr
    kind_name: str
    payload: Payload
    seq: int | None = None

    @field_validator("timestamp")
    @classmethod
    def _timestamp_shape(cls, value: str) -> str:
        return _validate_timestamp(value)

    @field_serializer("id")
    def _id_str(self, value: uuid.UUID) -> str:
        return str(value)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": str(self.id),
            "timestamp": self.timestamp,
            "kind": {self.kind_name: _payload_wire(self.payload)},
        }
        if self.seq is not None:
            wire["seq"] = self.seq
        return wire

    def to_json(self) -> str:
        return json.dumps(self.to_wire(), separators=(",", ":"), ensure_ascii=False)


def _payload_wire(payload: _Payload) -> dict[str, Any]:
    wire = payload.model_dump(by_alias=True, mode="json")
    return {key: value for key, value in wire.items() if value is not None or key not in _OMITTED_WHEN_NONE}


def make_event(payload: Payload, *, seq: int | None = None, event_id: uuid.UUID | None = None) -> Event:
    """A fresh event (new UUID, current timestamp) carrying ``payload``."""
    return Event(
        id=event_id or uuid.uuid4(),
        timestamp=now_timestamp(),
        kind_name=KIND_NAMES[type(payload)],
        payload=payload,
        seq=seq,
    )


def error_event(code: ErrorCode | str, message: str) -> Event:
    return make_event(ErrorPayload(code=str(code), message=message))


class IgnoredEvent(BaseModel):
    """A well-formed envelope of a kind this conductor does not know: ignored, never an error."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind_name: str


class ProtocolError(BaseModel):
    """A frame that cannot be accepted; ``event_id`` is set when the frame had a readable id."""

    model_config = ConfigDict(frozen=True)

    code: ErrorCode
    message: str
    event_id: str | None = None


ParseOutcome = Event | IgnoredEvent | ProtocolError


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: uuid.UUID
    timestamp: StrictStr
    kind: dict[str, Any]
    seq: Annotated[int, Field(strict=True)] | None = None

    @field_validator("timestamp")
    @classmethod
    def _timestamp_shape(cls, value: str) -> str:
        return _validate_timestamp(value)

    @field_validator("id", mode="before")
    @classmethod
    def _id_is_string(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("id must be a UUID string")
        return value


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"]) or "event"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_event(frame: str | bytes) -> ParseOutcome:
    """Parse one frame. Never raises."""
    if isinstance(frame, bytes):
        try:
            frame = frame.decode("utf-8")
        except UnicodeDecodeError:
            return ProtocolError(code=ErrorCode.INVALID_JSON, message="frame is not UTF-8 text")
    try:
        raw = bounded_json.loads(frame, max_depth=MAX_FRAME_DEPTH)
    except bounded_json.JsonRefused as refused:
        message = str(refused) if refused.bound else "message body is not valid JSON"
        return ProtocolError(code=ErrorCode.INVALID_JSON, message=message)
    if not isinstance(raw, dict):
        return ProtocolError(code=ErrorCode.INVALID_EVENT, message="an event must be a JSON object")
    try:  # "\ud800" is valid JSON but not Unicode text: nothing downstream could store it
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return ProtocolError(code=ErrorCode.INVALID_EVENT, message="strings must be valid Unicode (no lone surrogates)")
    except RecursionError:
        return ProtocolError(code=ErrorCode.INVALID_EVENT, message="event nests too deeply")
    raw_id = raw.get("id")
    readable_id = raw_id if isinstance(raw_id, str) and len(raw_id) <= 64 else None
    try:
        envelope = _Envelope.model_validate(raw)
    except (ValidationError, RecursionError) as exc:
        message = _describe(exc) if isinstance(exc, ValidationError) else "event nests too deeply"
        return ProtocolError(code=ErrorCode.INVALID_EVENT, message=message, event_id=readable_id)
    if len(envelope.kind) != 1:
        return ProtocolError(
            code=ErrorCode.INVALID_EVENT,
            message=f"kind must hold exactly one key, got {len(envelope.kind)}",
            event_id=readable_id,
        )
    ((kind_name, body),) = envelope.kind.items()
    model = KINDS.get(kind_name)
    if model is None:
        return IgnoredEvent(id=str(envelope.id), kind_name=kind_name[:64])
    if not isinstance(body, dict):
        return ProtocolError(
            code=ErrorCode.INVALID_EVENT, message=f"{kind_name} must be an object", event_id=readable_id
        )
    try:
        payload = model.model_validate(body)
    except (ValidationError, RecursionError) as exc:
        message = _describe(exc) if isinstance(exc, ValidationError) else "event nests too deeply"
        return ProtocolError(code=ErrorCode.INVALID_EVENT, message=f"{kind_name}: {message}", event_id=readable_id)
    return Event(
        id=envelope.id,
        timestamp=envelope.timestamp,
        kind_name=kind_name,
        payload=payload,
        seq=envelope.seq,
    )


# ---- JSON Schema export -------------------------------------------------------------------

_UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


def json_schema() -> dict[str, Any]:
    """The protocol as one JSON Schema (draft 2020-12) for the iOS team to validate against."""
    defs: dict[str, Any] = {}
    kind_refs = []
    for name, model in KINDS.items():
        schema = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        defs[model.__name__] = schema
        kind_refs.append(
            {
                "type": "object",
                "title": name,
                "properties": {name: {"$ref": f"#/$defs/{model.__name__}"}},
                "required": [name],
                "additionalProperties": False,
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://voiceide.dev/schema/voiceide-event.json",
        "title": "VoiceIDE event",
        "description": (
            "One WebSocket frame of the VoiceIDE event protocol. Clients must ignore events whose "
            "kind they do not know; this schema lists the kinds known today."
        ),
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": _UUID_PATTERN},
            "timestamp": {
                "type": "string",
                "format": "date-time",
                "pattern": f"^{TIMESTAMP_SYNTAX}$",
                "description": (
                    "RFC 3339 date-time: Z/z or a numeric offset, 0 to 9 fraction digits, T/t separator, "
                    "ASCII digits. The day must exist in its month; a second 60 only as a leap second "
                    "(the last second of a month in UTC). The conductor writes UTC with milliseconds and Z."
                ),
            },
            "seq": {
                "type": "integer",
                "minimum": 1,
                "description": "Extension: per-session sequence number of server events.",
            },
            "kind": {"oneOf": kind_refs},
        },
        "required": ["id", "timestamp", "kind"],
        "$defs": defs,
    }
