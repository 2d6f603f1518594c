"""The sessions API on the wire (docs/sessions-api.md): pydantic models with the camelCase names
the app reads. Times are RFC 3339 in UTC with milliseconds and ``Z``. The OpenAPI document is
generated from these (``make openapi``); the transcript's entries are made from the core's by
``shared.core.transcript.entry_of``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

Status = Literal["active", "idle", "ended"]
TITLE_MAX_CHARS = 60
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 20, 100
TRANSCRIPT_LIMIT_DEFAULT, TRANSCRIPT_LIMIT_MAX = 50, 200

Timestamp = Annotated[
    str,
    Field(
        description="RFC 3339, UTC, milliseconds, Z",
        json_schema_extra={"format": "date-time"},
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$",
        examples=["2026-11-24T16:02:11.408Z"],
    ),
]


def timestamp(epoch_seconds: float) -> str:
    """``2026-11-24T16:02:11.408Z``."""
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SessionFacts(Protocol):
    """What a session list shows of a session, as the store lists it (``SessionRow``)."""

    @property
    def session_id(self) -> str: ...
    @property
    def title(self) -> str | None: ...
    @property
    def created_at(self) -> float: ...
    @property
    def last_active_at(self) -> float: ...
    @property
    def turns(self) -> int: ...
    @property
    def status(self) -> Status: ...
    @property
    def origin(self) -> str: ...
    @property
    def last_utterance(self) -> str | None: ...
    @property
    def devices(self) -> int: ...


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Session(_Wire):
    """One of the person's sessions, as the session picker lists it."""

    id: str = Field(description="the session id the app chose (lower case)")
    title: str | None = Field(description="at most 60 characters; null until the first complete turn has one made")
    created_at: Timestamp
    last_active_at: Timestamp
    turns: int = Field(ge=0, description="how many requests the person made")
    status: Status = Field(description="active while a connection is open, idle, or ended")
    origin: Literal["voice", "handoff"]
    last_utterance: str | None = Field(description="the last thing the person said (at most 120 characters)")
    devices: int = Field(ge=0, description="how many of the person's devices are on it now")

    @classmethod
    def of_row(cls, row: SessionFacts) -> Session:
        return cls(
            id=row.session_id,
            title=row.title,
            created_at=timestamp(row.created_at or row.last_active_at),
            last_active_at=timestamp(row.last_active_at or row.created_at),
            turns=row.turns,
            status=row.status,
            origin="handoff" if row.origin == "handoff" else "voice",
            last_utterance=row.last_utterance,
            devices=row.devices,
        )


class _EntryBase(_Wire):
    seq: int = Field(ge=0, description="the stored message it comes from: entries of one message share it")
    at: Timestamp | None = Field(description="when it was stored; null for entries stored before times were kept")


class UserEntry(_EntryBase):
    role: Literal["user"]
    text: str = Field(description="what the person said")


class AssistantEntry(_EntryBase):
    role: Literal["assistant"]
    text: str = Field(description="the answer as it was shown; when interrupted, what the person heard of it")
    interrupted: bool = Field(description="a barge-in cut it")


class ToolEntry(_EntryBase):
    role: Literal["tool"]
    name: str = Field(description="the app tool the model called")
    arguments: dict[str, object]
    call_id: str
    outcome: Literal["ok", "error", "timeout"]
    result: str = Field(max_length=2000, description="the result as the model saw it, cut at 2,000 characters")


Entry = Annotated[UserEntry | AssistantEntry | ToolEntry, Field(discriminator="role")]


class SessionList(_Wire):
    sessions: list[Session]
    next_cursor: str | None = Field(description="the next page's cursor, or null on the last page")


class UsageTotals(_Wire):
    """What the session's turns cost so far: the sums of their ``turnUsage`` events."""

    requests: int = Field(ge=0, description="model requests")
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cache_read_tokens: int = Field(ge=0)
    cache_write_tokens: int = Field(ge=0)
    speculation_input_tokens: int = Field(
        ge=0, description="of requests dropped before anything was heard (speculations, lost early launches)"
    )
    speculation_output_tokens: int = Field(ge=0)
    cost_usd: float | None = Field(description="estimated at the stage's list prices; null without prices")
    prices_as_of: str | None = Field(description="the day those prices were read")


class DeviceInfo(_Wire):
    """One of the person's devices on the session now."""

    name: str = Field(description="what the device calls itself (may be empty)")
    roles: list[Literal["voice", "display", "tools"]]
    connected_since: Timestamp


class SessionDetail(_Wire):
    session: Session
    devices: list[DeviceInfo] = Field(default_factory=list, description="the devices on it now")
    usage: UsageTotals | None = Field(default=None, description="what the session's turns cost so far")
    transcript: list[Entry] = Field(description="oldest first")
    next_cursor: str | None = Field(description="the next page's cursor, or null at the end")


class RenameBody(_Wire):
    title: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=TITLE_MAX_CHARS)] = Field(
        description="1 to 60 characters once trimmed"
    )


class ErrorDetail(_Wire):
    code: Literal["bad_request", "unauthorized", "not_found", "internal_error"]
    message: str


class ErrorBody(_Wire):
    """Every error the Lambda answers."""

    error: ErrorDetail


def error_body(code: str, message: str) -> dict[str, object]:
    return ErrorBody(error=ErrorDetail(code=code, message=message)).model_dump(mode="json")  # type: ignore[arg-type]


class Memory(_Wire):
    """One thing the conductor remembers of the person."""

    id: str = Field(description="the record's id (mem-…)")
    text: str
    kind: Literal["preference", "fact", "summary"] = Field(
        description="a preference, a fact of a project, or a past session's summary"
    )
    scope: Literal["person", "project", "session"]
    project: str | None = Field(description="the project it holds for (scope project), else null")
    created_at: Timestamp


class MemoryList(_Wire):
    memories: list[Memory]
    next_cursor: str | None = Field(description="the next page's cursor, or null on the last page")


class MemoriesErased(_Wire):
    deleted: int = Field(ge=0, description="how many records were deleted")
