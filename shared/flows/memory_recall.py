"""What a session knows of its person from earlier ones, and what each of its turns leaves for later.

* **At a session's start** (each ``sessionStart`` of its connection) the person's most relevant records
  are retrieved once (``RetrieveMemoryRecords``, top ``BLOCK_TOP_K``) and kept in the state as the block's
  lines: every model request of the session carries them after its cached prefix, read with the state
  the turn reads anyway, so no turn waits for the memory before its first word.
* **After each turn**, once its events went out, the person's words and the answer are written as one
  event (``CreateEvent``): AgentCore's strategies extract preferences, facts and the session's summary
  from it, asynchronously.

A memory that fails leaves the session as it was: a turn never fails for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shared.core import person_memory as rules
from shared.core.messages import Message, is_plain_user_message
from shared.core.person_memory import Recollection
from shared.core.state import SessionState
from shared.core.wrapper import WRAPPER_TOOL_NAME
from shared.flows.config import Settings
from shared.flows.memory_tools import FAILURES_METRIC, Counter

EVENTS_METRIC = "MemoryEvents"
SECRETS_KEPT_OUT_METRIC = "MemoryEventsWithSecrets"  # turns not written: their words looked like a secret


class Memory(Protocol):
    def retrieve(self, actor: str, namespace_path: str, query: str, top_k: int) -> list[Recollection]: ...
    def add_turn(
        self,
        actor: str,
        session_id: str,
        said: str,
        answered: str,
        *,
        project: str,
        turn_key: str,
        now: float,
        extract: bool = True,
    ) -> str: ...


class MemoryRecall:
    def __init__(self, memory: Memory, settings: Settings, logger: Any, metrics: Counter) -> None:
        self.memory = memory
        self.settings = settings
        self.log = logger
        self.metrics = metrics

    def actor(self, principal: str | None) -> str | None:
        return rules.actor_of(principal, signed_in_only=self.settings.require_principal)

    def block_lines(self, principal: str | None, project: str | None = None) -> list[str] | None:
        """The lines of the block for a session of ``principal`` starting now (None: the memory
        failed, keep what the session has)."""
        actor = self.actor(principal)
        if actor is None:
            return []
        query = rules.SESSION_START_QUERY + (f", in the project {project}" if project else "")
        try:
            found = self.memory.retrieve(actor, rules.person_prefix(actor), query, rules.BLOCK_TOP_K)
        except Exception:
            self.log.exception("memory not read at the session's start")
            self.metrics.count(FAILURES_METRIC)
            return None
        slug = rules.project_slug(project) if project else None
        shown = [record for record in found if record.scope != "project" or slug is None or record.project == slug]
        return rules.block_lines(shown)

    def after_turn(
        self, state: SessionState | None, window: Sequence[Message] | None, final_text: str | None, now: float
    ) -> None:
        """Leave the ended turn's words for later sessions (``window``: its last request's messages,
        ``final_text``: its last message, which ended it; None: the turn did not end in this run).
        Nothing when they look like a secret; not extracted when the turn wrote or forgot records
        itself (the person said what to keep, and what to forget must not come back)."""
        if state is None or window is None or final_text is None:
            return
        found = turn_of(window, final_text)
        actor = self.actor(state.principal)
        if found is None or actor is None:
            return
        said, answered, managed = found
        turn_key = f"{state.turn_count}:{said}"
        if rules.secret_reason(said) is not None or rules.secret_reason(answered) is not None:
            self.metrics.count(SECRETS_KEPT_OUT_METRIC)
            return
        project = rules.project_slug(rules.project_of(state.workspace))
        try:
            self.memory.add_turn(
                actor,
                rules.memory_session_id(state.session_id),
                said,
                answered.strip(),
                project=project,
                turn_key=turn_key,
                now=now,
                extract=not managed,
            )
            self.metrics.count(EVENTS_METRIC)
        except Exception:
            self.log.exception("turn not written to the memory", extra={"session_id": state.session_id})
            self.metrics.count(FAILURES_METRIC)


MANAGING = frozenset({rules.WRITE_TOOL, rules.FORGET_TOOL})


def _texts(message: Message) -> list[str]:
    return [block["text"] for block in message.get("content", []) if isinstance(block, dict) and "text" in block]


def turn_of(window: Sequence[Message], final_text: str) -> tuple[str, str, bool] | None:
    """The person's words that started the window's last turn, everything said back, and whether the
    turn wrote or forgot records."""
    start = next((index for index in range(len(window) - 1, -1, -1) if is_plain_user_message(window[index])), None)
    if start is None:
        return None
    said = " ".join(_texts(window[start])).strip()
    if not said:
        return None
    answered: list[str] = []
    managed = False
    for message in window[start + 1 :]:
        if message.get("role") != "assistant":
            continue
        answered.extend(_texts(message))
        for block in message.get("content", []):
            use = block.get("toolUse") if isinstance(block, dict) else None
            if isinstance(use, dict) and use.get("name") == WRAPPER_TOOL_NAME:
                managed = managed or (use.get("input") or {}).get("name") in MANAGING
    answered.append(final_text)
    return said, " ".join(text.strip() for text in answered if text.strip()), managed
