"""Session state as the core sees it: the turn in progress, pending calls, history position."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.core.messages import Block
from shared.core.wrapper import ClientTool

OWN_CALLS_KEPT = 32
CALL_IDS_KEPT = 256


class OwnPurpose(StrEnum):
    """Why the conductor itself asked the app for a tool call."""

    THINKING = "thinking"
    SPEAK_BEFORE_TOOLS = "speak_before_tools"
    SPEAK_SENTENCE = "speak_sentence"  # a completed sentence, spoken while the model still writes
    SPEAK_FINAL = "speak_final"
    SPEAK_PROGRESS = "speak_progress"  # "still running …" while a foreground call takes long
    IDLE = "idle"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", validate_assignment=False)


class OwnCall(_Model):
    call_id: str
    purpose: OwnPurpose
    turn_id: str


class Progress(_Model):
    """The latest progress the app sent for a call it runs (``toolProgress``)."""

    fraction: float | None = None
    message: str = ""
    at: float = 0.0  # epoch seconds it arrived
    said_at: float = 0.0  # the app's timestamp of its event: of two, the later one is kept


class ResultParts(_Model):
    """A result arriving in parts: each part is stored as an item of its own until all are in."""

    count: int
    received: list[int] = Field(default_factory=list)
    chars: int = 0
    field: Literal["result", "error"] = "result"
    first_at: float = 0.0  # epoch seconds the first part arrived
    due: float = 0.0  # epoch seconds by which all parts must be in (before the call's own deadline)


class ModelCall(_Model):
    """A tool call the model asked for, forwarded to the app; ``result`` once answered."""

    call_id: str
    tool_use_id: str
    name: str
    arguments: str
    result: Block | None = None
    sent_to: str | None = None  # the connection the toolCall was sent to
    # The device that runs it, when the session has several (``shared.core.devices``).
    device: str | None = None
    deadline: float = 0.0  # epoch seconds: past it, the model gets a timeout error for the call
    parts: ResultParts | None = None  # its result, while it arrives in parts
    held: bool = False  # a change waiting for the person's yes: not sent to the app yet
    preview: str | None = None  # held: the call id of the read its card waits for
    progress: Progress | None = None


class BackgroundJob(_Model):
    """A call of a background tool: the model was told it started; the app's result is reported
    in a turn of its own when it arrives (or that it never did, at its deadline)."""

    call_id: str
    name: str
    arguments: str
    device: str | None = None  # the device running it, when the session has several
    started_at: float  # epoch seconds
    deadline: float = 0.0
    progress: Progress | None = None


class BackgroundReport(_Model):
    """A background tool's outcome, waiting for the session to be idle to be reported."""

    call_id: str
    name: str
    text: str  # the result, or what went wrong, as the model will read it
    failed: bool
    started_at: float


class ToolRound(_Model):
    """One model message with tool uses, waiting for the app's results."""

    assistant_content: list[Block]
    tool_use_order: list[str]
    calls: list[ModelCall] = Field(default_factory=list)
    rejected: dict[str, Block] = Field(default_factory=dict)  # toolUseId -> error toolResult
    sent_at: float = 0.0  # epoch seconds the calls went to the app
    # When the next "still running" sentence may be spoken (0: the progress threshold after sent_at).
    progress_next_at: float = 0.0

    def pending(self) -> list[ModelCall]:
        return [call for call in self.calls if call.result is None]

    def results_in_order(self) -> list[Block]:
        by_id = dict(self.rejected)
        for call in self.calls:
            if call.result is not None:
                by_id[call.tool_use_id] = call.result
        return [by_id[tool_use_id] for tool_use_id in self.tool_use_order]


class ActiveStream(_Model):
    """The model stream in flight. Only the invocation holding ``stream_id`` may advance it.

    The stream runs in its own turn-runner invocation, launched asynchronously: ``launched_at``
    is when it was handed over, ``runner`` the invocation that claimed it and ``deadline`` the
    epoch second by which that invocation ends (its Lambda timeout). A stream never claimed in
    time, or still held past its deadline, belongs to a runner that is gone.
    """

    stream_id: str
    said: str = ""  # text already finalized in this model message (spoken before tool calls)
    # The current speech segment as of the runner's last commit (the runner holds the live text:
    # nothing is written per model delta), and how much of it was sent to tts.speak.
    text: str = ""
    spoken: int = 0
    launched_at: float = 0.0  # epoch seconds
    runner: str | None = None
    deadline: float | None = None  # epoch seconds
    # The seqs (first, last) of the events of the decision that launched the stream alongside its
    # write: its runner posts them when it claims the stream; a decision that ends the stream
    # before any runner claimed it posts them first (``shared.flows.early_launch``).
    unposted: tuple[int, int] | None = None


class MemoryWrite(_Model):
    """A write of the conversation's memory (its summary, its title) that a turn runner makes after
    its turn's last commit, announced by that commit: a transcript's turn is not launched alongside
    its own write meanwhile, as the two writes would race (``shared.flows.early_launch``)."""

    runner: str  # the invocation that writes it
    until: float  # epoch seconds: past it, that invocation is taken to be gone


class Usage(_Model):
    """Tokens counted from Bedrock's ``metadata`` of each model request, and the requests."""

    COUNTS: ClassVar[tuple[str, ...]] = (
        "requests",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "speculation_input_tokens",
        "speculation_output_tokens",
    )
    """The counted figures, by the same names in ``turnUsage`` and the sessions API's totals."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # Of speculations started on the person's partial speech and dropped: spent for nothing.
    speculation_input_tokens: int = 0
    speculation_output_tokens: int = 0
    models: list[str] = Field(default_factory=list)

    def add(self, other: Usage) -> None:
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.speculation_input_tokens += other.speculation_input_tokens
        self.speculation_output_tokens += other.speculation_output_tokens
        self.models = [*self.models, *(model for model in other.models if model not in self.models)][:4]


class Turn(_Model):
    turn_id: str
    started_at: float = 0.0  # epoch seconds the turn started (its transcript, result or report)
    usage: Usage = Field(default_factory=Usage)
    first_partial_at: float | None = None
    first_speak_at: float | None = None
    shown: str = "thinking"  # the convo.setState value the app was last sent in this turn
    # A speculative turn (``shared.core.speculation``): the model runs on the partial transcript
    # whose normalized text this is, and nothing of it reaches the app until the final confirms it.
    speculative: str | None = None
    rounds: int = 0
    stream: ActiveStream | None = None
    tools: ToolRound | None = None


class Listening(_Model):
    """What the app's recognizer hears while no turn runs: its latest partial transcript, and the
    watcher (a turn-runner invocation) that starts a speculative turn once it stays the same."""

    text: str
    key: str  # the text normalized (``speculation.normalized``)
    heard_at: float  # epoch seconds the partials first read ``key``
    said_at: float | None = None  # the app's timestamp of the latest partial (epoch seconds)
    watcher: str | None = None  # the watcher launched for this utterance
    watcher_runner: str | None = None  # the invocation that took it
    watcher_until: float = 0.0  # epoch seconds: past it the watcher is gone and a partial launches another
    speculations: int = 0  # started in this utterance
    speculated: str | None = None  # the key of the last one started (never twice on the same text)


class DeviceEntry(_Model):
    """One more device of the session's person, beside the session's connection (``shared.core.devices``)."""

    device_id: str
    name: str = ""
    roles: list[str] = Field(default_factory=list)
    connection_id: str
    connected_at: float = 0.0  # epoch seconds
    live: bool = False  # caught up: events go to it as they are made
    tools: list[ClientTool] | None = None  # what it declared it runs (None: the catalog)
    capabilities: list[str] = Field(default_factory=list)  # what its sessionStart announced


class NameSet(_Model):
    """A device's names (``workspaceNames``): the set whose parts are arriving, and the last
    complete one (stored beside the state, one item a part)."""

    arriving: str | None = None
    arriving_parts: int = 0
    received: list[int] = Field(default_factory=list)
    complete: str | None = None
    complete_parts: int = 0


class KeptEvent(_Model):
    """A numbered event kept for replay, as its frame: ``to`` names the one device it is for."""

    seq: int
    frame: str
    to: str | None = None


class SessionState(_Model):
    session_id: str
    version: int = 0
    connection_id: str | None = None
    connection_start_seq: int = 1  # bound: first seq made after the bind; live: first seq sent live
    # A newly bound connection is not live until the app's first event has brought it up to date:
    # until then events are only kept in the outbox, so replay always comes before live events.
    connection_live: bool = True
    catch_up_owner: str | None = None  # the invocation posting the kept events to the new connection
    catch_up_since: float | None = None  # epoch seconds
    principal: str | None = None
    history_len: int = 0
    history_version: int = 0  # the version whose commit last wrote history (set by the store)
    last_role: Literal["user", "assistant"] | None = None
    turn: Turn | None = None
    own_calls: list[OwnCall] = Field(default_factory=list)
    recent_call_ids: list[str] = Field(default_factory=list)
    next_seq: int = 1
    turn_starts: list[float] = Field(default_factory=list)  # epoch seconds, for the rate limit
    # The app's events decided in the current second (``shared.core.admission``): from when, how many.
    events_window_at: float = 0.0
    events_in_window: int = 0
    # What the app announced in its latest sessionStart (``shared.wire.protocol`` capability names).
    capabilities: list[str] = Field(default_factory=list)
    # The rolling summary of the conversation before history seq ``summary_until`` (or a handoff's).
    summary: str | None = None
    summary_until: int = 0
    chars_per_token: float = 4.0  # of this conversation's requests, from Bedrock's input token counts
    memory_writes: list[MemoryWrite] = Field(default_factory=list)  # announced, not made yet
    # Messages the model's context window held when it last overflowed: later requests send fewer.
    window_cap: int | None = None
    # What the person's session list shows (shared.core.session_index): kept by the same commits.
    title: str | None = None
    created_at: float = 0.0  # epoch seconds
    last_active_at: float = 0.0
    turn_count: int = 0
    origin: Literal["voice", "handoff"] = "voice"
    last_utterance: str | None = None
    ended_at: float | None = None  # the person ended it; a later connect resumes it
    incarnation: str = ""  # made by the store when the state is first written
    # Made by the store for each write: two writers that both decided on version N write different
    # states numbered N + 1; a write conditional on a state handed on names which one it means.
    write_id: str = ""
    # The tools the app declared in its latest sessionStart that had some (None: the catalog).
    tools: list[ClientTool] | None = None
    # Background tools still running on the app, and outcomes waiting for idle to be reported.
    background: list[BackgroundJob] = Field(default_factory=list)
    background_reports: list[BackgroundReport] = Field(default_factory=list)
    # What the session's turns cost so far (``shared.core.usage``), and its dropped speculations'
    # tokens not yet given to a turn.
    usage_total: Usage = Field(default_factory=Usage)
    speculation_input_pending: int = 0
    speculation_output_pending: int = 0
    # The person is speaking: the latest partial transcript since the last final (or None).
    listening: Listening | None = None
    # Digests of the latest app events taken (``shared.core.event_ids``): a resend is recognised.
    seen_events: list[str] = Field(default_factory=list)
    # Several devices (``shared.core.devices``): the session's connection is the device ``device_id``
    # (an app that names none is "app", with every role); ``devices`` are the others present.
    device_id: str = "app"
    device_name: str = ""
    device_roles: list[str] = Field(default_factory=lambda: ["voice", "display", "tools"])
    device_connected_at: float = 0.0
    device_tools: list[ClientTool] | None = None  # what the session's connection declared, once others joined
    devices: list[DeviceEntry] = Field(default_factory=list)
    voice_device: str | None = None  # the device whose words started the latest turn (None: the session's)
    # Connections refused as a device too many: they get nothing of the session, not even by
    # sending another event (the latest few; a refused app reconnects to try again).
    refused_connections: list[str] = Field(default_factory=list)
    # What the devices see of the person's project (``shared.core.workspace_context``): each
    # device's latest context, rendered and bounded; its names' sets (stored beside the state, in
    # parts, as are the voice devices' phrases: they are read from the first part when needed).
    workspace: dict[str, str] = Field(default_factory=dict)
    name_sets: dict[str, NameSet] = Field(default_factory=dict)
    # What is remembered of the person from earlier sessions (``shared.core.person_memory``): the
    # block's lines, bounded, read at the session's start and kept up to date by the memory tools.
    remembered: list[str] = Field(default_factory=list)
    # Calls of tools on MCP servers already made (recorded before the call: MCP has no idempotency,
    # so a call is never made twice), and the servers the person was told cannot be reached.
    mcp_started: list[str] = Field(default_factory=list)
    mcp_unreachable: list[str] = Field(default_factory=list)
    # The newest kept events, stored with the state until a later write moves them to one item of
    # the outbox (``shared.adapters.outbox``): a decision's events cost no item of their own. Only
    # the store sets it.
    kept: list[KeptEvent] = Field(default_factory=list)

    def memory_write_due(self, now: float) -> bool:
        """Whether a runner announced a memory write that may still land after ``now``."""
        return any(write.until > now for write in self.memory_writes)

    def own_call(self, call_id: str) -> OwnCall | None:
        return next((call for call in self.own_calls if call.call_id == call_id), None)

    def model_call(self, call_id: str) -> ModelCall | None:
        if self.turn is None or self.turn.tools is None:
            return None
        return next((call for call in self.turn.tools.calls if call.call_id == call_id), None)
