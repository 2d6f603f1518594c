"""Hands a turn's model stream to its own invocation of the turn-runner function.

API Gateway gives a route's integration at most 29 s, and a turn with a build or a long answer
runs longer, so ``$default`` only decides and commits, then launches the stream here: an
asynchronous ``Invoke`` (``InvocationType=Event``), answered by Lambda as soon as the event is
queued. The runner's retries are off and its event age short (infrastructure), and the stream id
it carries lets exactly one invocation run it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.core.messages import Message
from shared.core.state import SessionState

# Lambda's Invoke takes at most 1 MB of payload for an asynchronous (``Event``) invocation (API
# reference, Invoke). The task is measured as the UTF-8 bytes Lambda receives, with room to spare: a
# history in a script of three bytes a character is three times its length in characters.
ASYNC_PAYLOAD_LIMIT = 1024 * 1024
PAYLOAD_BUDGET = ASYNC_PAYLOAD_LIMIT - 64 * 1024


class TurnTask(BaseModel):
    """What a turn-runner invocation needs: whose stream to run and where to post its events."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    session_id: str = Field(alias="sessionId", min_length=1, max_length=128)
    stream_id: str = Field(alias="streamId", min_length=1, max_length=256)
    endpoint: str = Field(min_length=1, max_length=2048)  # the management API of the app's connection
    # The session state as ``$default`` committed it (JSON, with its version): the runner starts
    # from it instead of reading it again; a newer stored state shows up as a lost race.
    state: str | None = Field(default=None, max_length=ASYNC_PAYLOAD_LIMIT)
    # The history window for the stream's first request (JSON), read by ``$default`` beside the
    # state: the runner then calls the model without reading it again.
    history: str | None = Field(default=None, max_length=ASYNC_PAYLOAD_LIMIT)
    # The events of the decision that started the stream (JSON list of ``[seq, frame]``) when it was
    # launched alongside its write: the runner posts them first, once its claim shows the write
    # landed, so the app hears them before anything of the stream.
    frames: str | None = Field(default=None, max_length=ASYNC_PAYLOAD_LIMIT)
    # A watcher of the person's speech (``shared.flows.speculation_watcher``): ``stream_id`` is then the
    # watch's id, and a stream is started only if a partial transcript stays the same.
    watch: bool = False
    # Calls of tools on MCP servers to make (``shared.flows.mcp_runner``): ``stream_id`` then only names the task.
    mcp_calls: list[str] = Field(default_factory=list, alias="mcpCalls", max_length=64)

    @classmethod
    def for_stream(
        cls, state: SessionState, stream_id: str, endpoint: str, history: list[Message] | None = None
    ) -> TurnTask:
        """The task with the committed state and the history window when the whole payload fits
        the budget; else without the window (the runner reads it), then without the state too."""
        snapshot = state.model_dump_json()
        window = json.dumps(history, ensure_ascii=False, separators=(",", ":")) if history is not None else None
        bare = cls(session_id=state.session_id, stream_id=stream_id, endpoint=endpoint)
        for carried in ({"state": snapshot, "history": window}, {"state": snapshot}, {"history": window}):
            task = bare.model_copy(update=carried)
            if task.payload_bytes() <= PAYLOAD_BUDGET:
                return task
        return bare

    @classmethod
    def for_watch(cls, state: SessionState, watch_id: str, endpoint: str) -> TurnTask:
        return cls.for_stream(state, watch_id, endpoint).model_copy(update={"watch": True})

    @classmethod
    def for_mcp(cls, state: SessionState, call_ids: list[str], endpoint: str) -> TurnTask:
        return cls.model_validate(
            {
                "sessionId": state.session_id,
                "streamId": f"mcp-{call_ids[0]}"[:256],
                "endpoint": endpoint,
                "mcpCalls": call_ids,
            }
        )

    def history_window(self) -> list[Message] | None:
        """The carried history window; None when there is none or it does not parse (then it is read)."""
        if self.history is None:
            return None
        try:
            window = json.loads(self.history)
        except ValueError:
            return None
        if not isinstance(window, list) or not all(
            isinstance(message, dict) and isinstance(message.get("content"), list) for message in window
        ):
            return None
        return window

    def decision_frames(self) -> list[tuple[int, str]]:
        """The carried events of the decision that started the stream (none when not carried)."""
        if self.frames is None:
            return []
        try:
            pairs = json.loads(self.frames)
        except ValueError:
            return []
        if not isinstance(pairs, list):
            return []
        return [
            (pair[0], pair[1])
            for pair in pairs
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int) and isinstance(pair[1], str)
        ]

    def session_state(self) -> SessionState | None:
        """The carried state; None when there is none or it does not parse (then it is read)."""
        if self.state is None:
            return None
        try:
            return SessionState.model_validate_json(self.state)
        except ValidationError:
            return None

    def to_payload(self) -> bytes:
        """The Invoke payload: JSON in UTF-8 (text in any script as its own bytes, not escaped; a lone
        surrogate, which UTF-8 cannot hold, as its JSON escape)."""
        text = json.dumps(self.model_dump(by_alias=True), ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", errors="backslashreplace")

    def payload_bytes(self) -> int:
        return len(self.to_payload())


class LambdaTurnLauncher:
    """Launches turn-runner invocations through the Lambda ``Invoke`` API."""

    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function_name = function_name

    def launch(self, task: TurnTask) -> None:
        """Queue the task; raises botocore's errors when Lambda refuses it."""
        self._client.invoke(FunctionName=self._function_name, InvocationType="Event", Payload=task.to_payload())
