"""The model's memory calls (``memory.search``, ``memory.write``, ``memory.forget``), made by the runner.

They need I/O, so the runner makes them when the model's message is complete and before the commit
that ends its stream; the core then answers each call from what was found (``StreamReport.memory_answers``)
and keeps the session's block up to date. A write is checked before anything is sent: a secret is
refused with a spoken reason, the person's writes of the last minute are counted (``MemoryWriteLog``),
and a record that says nearly the same is updated instead of repeated.

Only the message's own uses are read here, and only the actor's own namespaces are touched: a record
id the model names that is another person's is answered like one that does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from shared.core import person_memory as rules
from shared.core.model_output import ToolUseRequest
from shared.core.person_memory import MemoryAnswer, Recollection
from shared.core.state import SessionState
from shared.core.wrapper import WRAPPER_TOOL_NAME
from shared.flows.config import Settings
from shared.wire.protocol_tools import MEMORY_TOOL_NAMES

FAILURES_METRIC = "MemoryFailures"
WRITES_METRIC = "MemoryWrites"
REFUSED_METRIC = "MemoryWritesRefused"


class Memory(Protocol):
    def retrieve(self, actor: str, namespace_path: str, query: str, top_k: int) -> list[Recollection]: ...
    def record(self, actor: str, record_id: str) -> Recollection | None: ...
    def create(self, namespace: str, text: str, *, request_key: str, now: float) -> str: ...
    def delete(self, record_id: str) -> bool: ...


class WriteLog(Protocol):
    def take(self, actor: str) -> float | None: ...


class Counter(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...


def memory_uses(tool_uses: Sequence[ToolUseRequest]) -> list[tuple[str, str, str]]:
    """(tool use id, memory tool, arguments as JSON) of the message's memory calls."""
    found: list[tuple[str, str, str]] = []
    for use in tool_uses:
        raw = use.input or {}
        name = raw.get("name")
        if use.name != WRAPPER_TOOL_NAME or name not in MEMORY_TOOL_NAMES:
            continue
        arguments = raw.get("arguments", {})
        found.append((use.tool_use_id, str(name), arguments if isinstance(arguments, str) else json.dumps(arguments)))
    return found


class MemoryTools:
    def __init__(self, memory: Memory, write_log: WriteLog, settings: Settings, logger: Any, metrics: Counter) -> None:
        self.memory = memory
        self.write_log = write_log
        self.settings = settings
        self.log = logger
        self.metrics = metrics

    def answers(self, state: SessionState, tool_uses: Sequence[ToolUseRequest], now: float) -> dict[str, MemoryAnswer]:
        """Each memory call of the message made, by tool use id (none: the message makes none)."""
        uses = memory_uses(tool_uses)
        if not uses:
            return {}
        actor = rules.actor_of(state.principal, signed_in_only=self.settings.require_principal)
        project = rules.project_slug(rules.project_of(state.workspace))
        answers: dict[str, MemoryAnswer] = {}
        for tool_use_id, name, arguments in uses:
            if actor is None:
                answers[tool_use_id] = MemoryAnswer("nothing is remembered for a person who is not signed in", True)
                continue
            wanted = rules.read_arguments(name, arguments)
            if wanted.problem is not None:
                answers[tool_use_id] = MemoryAnswer(wanted.problem, failed=True)
                continue
            try:
                if name == rules.SEARCH_TOOL:
                    answers[tool_use_id] = self._search(actor, project, wanted.text)
                elif name == rules.WRITE_TOOL:
                    key = f"{state.session_id}/{tool_use_id}"
                    answers[tool_use_id] = self._write(actor, project, wanted, key, now)
                else:
                    answers[tool_use_id] = self._forget(actor, project, wanted)
            except Exception:  # the memory failed: the model hears so, the turn goes on
                self.log.exception("memory call failed", extra={"session_id": state.session_id, "tool": name})
                self.metrics.count(FAILURES_METRIC)
                answers[tool_use_id] = MemoryAnswer(rules.MEMORY_UNAVAILABLE, failed=True)
        return answers

    def _visible(self, actor: str, project: str, query: str, top_k: int) -> list[Recollection]:
        """The actor's records most relevant to ``query``: theirs and this project's (not another project's)."""
        found = self.memory.retrieve(actor, rules.person_prefix(actor), query, top_k)
        return [record for record in found if record.scope != "project" or record.project == project]

    def _search(self, actor: str, project: str, query: str) -> MemoryAnswer:
        return MemoryAnswer(rules.search_answer(self._visible(actor, project, query, rules.SEARCH_TOP_K)))

    def _write(self, actor: str, project: str, wanted: rules.Wanted, key: str, now: float) -> MemoryAnswer:
        reason = rules.secret_reason(wanted.text)
        if reason is not None:
            self.metrics.count(REFUSED_METRIC)
            return MemoryAnswer(reason, failed=True)
        wait = self.write_log.take(actor)
        if wait is not None:
            self.metrics.count(REFUSED_METRIC)
            return MemoryAnswer(rules.rate_refusal(wait), failed=True)
        namespace = (
            rules.project_namespace(actor, project) if wanted.scope == "project" else rules.preferences_namespace(actor)
        )
        scope_of = [record for record in self._visible(actor, project, wanted.text, 5) if record.scope == wanted.scope]
        same = rules.near_duplicate(wanted.text, scope_of)
        record_id = self.memory.create(namespace, wanted.text, request_key=key, now=now)
        if same is not None and same.id != record_id:
            self.memory.delete(same.id)  # the newer words replace the older
        self.metrics.count(WRITES_METRIC)
        kind: rules.Kind = "fact" if wanted.scope == "project" else "preference"
        added = Recollection(
            id=record_id,
            text=wanted.text,
            kind=kind,
            scope=wanted.scope,
            project=project if wanted.scope == "project" else None,
            created_at=now,
        )
        replaced = (same,) if same is not None else ()
        return MemoryAnswer(rules.write_answer(record_id, same is not None), added=added, removed=replaced)

    def _forget(self, actor: str, project: str, wanted: rules.Wanted) -> MemoryAnswer:
        if wanted.record_id:
            record = self.memory.record(actor, wanted.record_id)
            targets = [record] if record is not None else []
        else:
            targets = rules.forget_targets(wanted.text, self._visible(actor, project, wanted.text, rules.SEARCH_TOP_K))
        if not targets:
            return MemoryAnswer(rules.NOTHING_TO_FORGET, failed=True)
        gone = tuple(record for record in targets if self.memory.delete(record.id))
        forgotten = [record.id for record in gone or targets]
        return MemoryAnswer(rules.forget_answer(forgotten), removed=gone)
