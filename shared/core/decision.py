"""What every decision of the core is made of: the settings, the outcome, and the private copy of
the state a decision accumulates (events to send, history writes, whether to run the model)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from shared.core.background_report import failure_cards, report_text
from shared.core.history_ops import HistoryOp, HistoryWriter
from shared.core.messages import text_block
from shared.core.speakable import card_patch
from shared.core.state import (
    CALL_IDS_KEPT,
    OWN_CALLS_KEPT,
    ActiveStream,
    ModelCall,
    OwnCall,
    OwnPurpose,
    SessionState,
    Turn,
)
from shared.core.usage import finish_turn
from shared.core.wrapper import OWN_CALL_PREFIX
from shared.wire.protocol import (
    EXECUTING_STATE,
    SPEAKING_STATE,
    AssistantSpeechFinal,
    AssistantUIPatch,
    ErrorCode,
    ErrorPayload,
    Payload,
    ToolCall,
)
from shared.wire.protocol_tools import MCP_TOOL_PREFIX, RESERVED_TOOL_NAMES

SET_STATE_TOOL = "convo.setState"
SPEAK_TOOL = "tts.speak"
# setState values beyond the protocol's thinking / idle, and the capability an app announces for each.
STATE_CAPABILITIES = {"speaking": SPEAKING_STATE, "executing": EXECUTING_STATE}
# The conductor's own calls whose results change nothing are not recorded: their ids say so, and
# their results are acknowledged without reading or writing the session. Only the turn's last
# tts.speak is recorded (its result ends the turn).
UNRECORDED_CALL_PREFIXES = {
    OwnPurpose.THINKING: f"{OWN_CALL_PREFIX}state-",
    OwnPurpose.IDLE: f"{OWN_CALL_PREFIX}state-",
    OwnPurpose.SPEAK_BEFORE_TOOLS: f"{OWN_CALL_PREFIX}say-",
    OwnPurpose.SPEAK_SENTENCE: f"{OWN_CALL_PREFIX}say-",
    OwnPurpose.SPEAK_PROGRESS: f"{OWN_CALL_PREFIX}say-",
}


def is_unrecorded_own_call(call_id: str) -> bool:
    """A result for one of the conductor's own calls that needs no action (see above)."""
    return call_id.startswith(tuple(UNRECORDED_CALL_PREFIXES.values()))


def may_resume_the_model(call_id: str) -> bool:
    """Whether a result for this call id may complete a round of the model's tool calls (and so
    start the model): not one of the conductor's own calls."""
    return not call_id.startswith(OWN_CALL_PREFIX)


@dataclass(frozen=True)
class CoreSettings:
    catalog_names: frozenset[str]
    max_tool_rounds: int = 8
    max_turns_per_minute: int = 30
    max_tool_result_chars: int = 16_000  # what the model sees of one tool result
    # A launched stream not claimed by its runner within this time never started (the runner's
    # asynchronous invocation gives up after its maximum event age, 60 s).
    stream_start_timeout_s: float = 90.0
    # How long the app may take to answer one of the model's tool calls, and per tool overrides.
    tool_deadline_s: float = 60.0
    tool_deadlines: tuple[tuple[str, float], ...] = ()
    # The catalog's tools that change the person's project: asked about before they run.
    changing_tools: frozenset[str] = frozenset()
    # The catalog's tools that run long: the turn does not wait for them (shared.core.background).
    background_tools: frozenset[str] = frozenset()
    # "Still running …" while a foreground call takes long (shared.core.progress): after this long
    # without an answer, then at most once every progress_every_s; 0 turns it off.
    progress_after_s: float = 3.0
    progress_every_s: float = 10.0

    def deadline_for(self, tool: str) -> float:
        return dict(self.tool_deadlines).get(tool, self.tool_deadline_s)


DEFAULT_SETTINGS = CoreSettings(catalog_names=frozenset())


def tool_names(state: SessionState, settings: CoreSettings) -> frozenset[str]:
    """The tools the session's model may call: the app's declared ones (with the catalog's own
    protocol calls, tts.speak and convo.setState), else the catalog."""
    if state.tools is not None:
        return frozenset(tool.name for tool in state.tools) | (settings.catalog_names & RESERVED_TOOL_NAMES)
    return settings.catalog_names


def deadline_of(state: SessionState, settings: CoreSettings, name: str) -> float:
    """How long the app may take to answer a call of ``name``: its declaration's deadline, else
    the configured one."""
    declared = next((tool for tool in state.tools or () if tool.name == name), None)
    if declared is not None and declared.deadline_s:
        return declared.deadline_s
    return settings.deadline_for(name)


@dataclass
class Outcome:
    state: SessionState
    events: list[Payload] = field(default_factory=list)
    history: list[HistoryOp] = field(default_factory=list)
    run_model: str | None = None  # stream id: run the model now, holding this id
    notes: list[str] = field(default_factory=list)
    first_seq: int = 0  # ``seq`` of the first event; the others follow in order
    # Results in parts: pieces to store with this commit, calls whose pieces are all in (the
    # caller reads them and decides again), and calls whose stored pieces go with this commit.
    part_writes: list[PartWrite] = field(default_factory=list)
    parts_complete: list[str] = field(default_factory=list)
    parts_dropped: list[tuple[str, int]] = field(default_factory=list)
    # A watcher to launch for the person's speech (``shared.core.speculation``): its id.
    watch: str | None = None
    # Events posted after the numbered ones and never kept (a turn's ``turnUsage``).
    unnumbered: list[Payload] = field(default_factory=list)
    # Connections another one took over (``taken_over``): each is told so, once, after the commit.
    taken_over: list[str] = field(default_factory=list)
    # Calls of tools on MCP servers to make now (the conductor runs them: ``shared.flows.mcp_runner``).
    mcp_calls: list[str] = field(default_factory=list)

    def numbered_events(self) -> list[tuple[int, Payload]]:
        return [(self.first_seq + index, payload) for index, payload in enumerate(self.events)]


@dataclass(frozen=True)
class PartWrite:
    call_id: str
    index: int
    text: str


class StreamSuperseded(Exception):
    """The stream is no longer the session's current one (barge-in, new turn): stop it."""


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def error_payload(code: ErrorCode, message: str) -> ErrorPayload:
    return ErrorPayload(code=str(code), message=message)


class Decision:
    """Accumulates one outcome on a private copy of the state."""

    def __init__(self, state: SessionState) -> None:
        self.state = state.model_copy(deep=True)
        self.events: list[Payload] = []
        self.history = HistoryWriter(self.state.history_len, self.state.last_role)
        self.run_model: str | None = None
        self.notes: list[str] = []
        self.part_writes: list[PartWrite] = []
        self.parts_complete: list[str] = []
        self.parts_dropped: list[tuple[str, int]] = []
        self.unnumbered: list[Payload] = []
        self.taken_over: list[str] = []
        self.mcp_calls: list[str] = []
        self.now: float | None = None  # when known: the time of a turn's first tts.speak

    def send(self, payload: Payload) -> None:
        self.events.append(payload)

    def dispatch(self, call: ModelCall) -> None:
        """A model's call goes out: to the device it was routed to, or, for a tool on an MCP server,
        to the conductor's own runner of those calls (the devices are not sent it)."""
        if call.name.startswith(MCP_TOOL_PREFIX):
            self.mcp_calls.append(call.call_id)
        else:
            self.send(ToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments))

    def own_call(self, name: str, arguments: dict[str, str], purpose: OwnPurpose, turn_id: str) -> None:
        unrecorded = UNRECORDED_CALL_PREFIXES.get(purpose)
        call_id = f"{unrecorded or OWN_CALL_PREFIX}{uuid.uuid4().hex[:16]}"
        if unrecorded is None:
            self.state.own_calls = [
                *self.state.own_calls,
                OwnCall(call_id=call_id, purpose=purpose, turn_id=turn_id),
            ][-OWN_CALLS_KEPT:]
        self.send(ToolCall(call_id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False)))
        turn = self.state.turn
        if name == SPEAK_TOOL and self.now and turn is not None and turn.first_speak_at is None:
            turn.first_speak_at = self.now

    def show(self, value: str) -> None:
        """``convo.setState`` within a turn as it moves between thinking, speaking and executing a
        tool: ``speaking`` / ``executing`` only for apps that announced they understand them."""
        turn = self.state.turn
        if turn is None or turn.shown == value:
            return
        needs = STATE_CAPABILITIES.get(value)
        if needs is not None and needs not in self.state.capabilities:
            return
        turn.shown = value
        self.set_state(value, turn.turn_id)

    def speak(self, text: str, purpose: OwnPurpose, turn_id: str, *, say: str | None = None) -> bool:
        """The final of a speech segment (its whole ``text``) and a tts.speak of what is left to
        ``say`` of it (all of it unless sentences were spoken already); False when nothing was."""
        self.send(AssistantSpeechFinal(text=text))
        say = text if say is None else say
        if not say:
            return False
        self.show("speaking")
        self.own_call(SPEAK_TOOL, {"text": say}, purpose, turn_id)
        return True

    def speak_line(self, text: str, purpose: OwnPurpose, turn_id: str) -> None:
        """A ``tts.speak`` of a line of the conductor's own that no final shows (the app shows the
        error event it goes with)."""
        self.show("speaking")
        self.own_call(SPEAK_TOOL, {"text": text}, purpose, turn_id)

    def speak_sentences(self, text: str, turn_id: str) -> None:
        self.show("speaking")
        self.own_call(SPEAK_TOOL, {"text": text}, OwnPurpose.SPEAK_SENTENCE, turn_id)

    def set_state(self, value: str, turn_id: str) -> None:
        purpose = OwnPurpose.IDLE if value == "idle" else OwnPurpose.THINKING
        self.own_call(SET_STATE_TOOL, {"state": value}, purpose, turn_id)

    def start_stream(self, turn: Turn, now: float) -> None:
        self.show("thinking")
        turn.stream = ActiveStream(stream_id=f"{turn.turn_id}.{turn.rounds}.{uuid.uuid4().hex[:8]}", launched_at=now)
        self.run_model = turn.stream.stream_id

    def end_turn(self, turn: Turn, now: float | None = None) -> None:
        """The turn is over: idle, unless a background tool's outcome waits to be reported (then
        its report turn starts at once, when ``now`` is known)."""
        self.set_state("idle", turn.turn_id)
        self.unnumbered.append(finish_turn(self.state, turn, now))
        self.state.turn = None
        if now is not None and self.state.background_reports:
            self.start_background_report(now)

    def start_background_report(self, now: float) -> None:
        """A turn of the conductor's own: the waiting background outcomes go to the model, which
        tells the person (a failure also shows as a card)."""
        reports, self.state.background_reports = self.state.background_reports, []
        for card in failure_cards(reports):
            self.send(AssistantUIPatch(patch=card_patch(card)))
        turn = Turn(turn_id=new_id("turn"), started_at=now)
        self.state.turn = turn
        self.history.add("user", [text_block(report_text(reports, now))])
        self.set_state("thinking", turn.turn_id)
        self.start_stream(turn, now)
        self.notes.append(f"report turn {turn.turn_id}: {[report.name for report in reports]}")

    def remember_call_ids(self, call_ids: list[str]) -> None:
        self.state.recent_call_ids = [*self.state.recent_call_ids, *call_ids][-CALL_IDS_KEPT:]

    def outcome(self) -> Outcome:
        self.state.history_len = self.history.history_len
        self.state.last_role = self.history.last_role
        first_seq = self.state.next_seq
        self.state.next_seq += len(self.events)
        return Outcome(
            self.state,
            self.events,
            self.history.ops(),
            self.run_model,
            self.notes,
            first_seq,
            self.part_writes,
            self.parts_complete,
            self.parts_dropped,
            unnumbered=self.unnumbered,
            taken_over=self.taken_over,
            mcp_calls=self.mcp_calls,
        )


def close_round(decision: Decision, turn: Turn) -> None:
    """Store the tool-use message and all its results together."""
    assert turn.tools is not None
    decision.history.add("assistant", turn.tools.assistant_content)
    decision.history.add("user", turn.tools.results_in_order())
    turn.tools = None
