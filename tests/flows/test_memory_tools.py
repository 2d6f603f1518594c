"""The runner's memory calls: the guardrails before anything is written, merging, forgetting, scopes."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from shared.core import person_memory as rules
from shared.core.model_output import ToolUseRequest
from shared.core.person_memory import Recollection
from shared.core.state import SessionState
from shared.flows.config import Settings
from shared.flows.memory_recall import MemoryRecall, turn_of
from shared.flows.memory_tools import MemoryTools, memory_uses

SUB = "7f1c2a9e-1b2c-4d3e-8f90-123456789abc"
OTHER = "0c9d8e7f-1b2c-4d3e-8f90-123456789abc"


@dataclass
class FakeMemory:
    """The memory as the flows see it: records by namespace, retrieval by shared words."""

    records: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (namespace, text)
    events: list[dict[str, object]] = field(default_factory=list)
    made: int = 0
    fail: bool = False

    def _recollection(self, actor: str, record_id: str) -> Recollection | None:
        namespace, text = self.records[record_id]
        where = rules.placed(actor, namespace)
        if where is None:
            return None
        kind, scope, project = where
        return Recollection(record_id, text, kind, scope, project)

    def retrieve(self, actor: str, namespace_path: str, query: str, top_k: int) -> list[Recollection]:
        if self.fail:
            raise RuntimeError("memory down")
        found = [
            self._recollection(actor, record_id)
            for record_id, (namespace, _text) in self.records.items()
            if namespace.startswith(namespace_path)
        ]
        ranked = sorted((r for r in found if r), key=lambda r: -rules.overlap(query, r.text))
        return ranked[:top_k]

    def record(self, actor: str, record_id: str) -> Recollection | None:
        return self._recollection(actor, record_id) if record_id in self.records else None

    def create(self, namespace: str, text: str, *, request_key: str, now: float) -> str:
        self.made += 1
        record_id = f"mem-{self.made:040d}"
        self.records[record_id] = (namespace, text)
        return record_id

    def delete(self, record_id: str) -> bool:
        return self.records.pop(record_id, None) is not None

    def add_turn(self, actor: str, session_id: str, said: str, answered: str, **options: object) -> str:
        self.events.append({"actor": actor, "session": session_id, "said": said, "answered": answered, **options})
        return "1#ab"


@dataclass
class FakeWriteLog:
    times: dict[str, list[float]] = field(default_factory=dict)
    now: float = 1000.0

    def take(self, actor: str) -> float | None:
        kept, wait = rules.write_allowed(self.times.get(actor, []), self.now)
        if wait is None:
            self.times[actor] = kept
        return wait


class Counts:
    def __init__(self) -> None:
        self.counted: dict[str, float] = {}

    def count(self, name: str, value: float = 1) -> None:
        self.counted[name] = self.counted.get(name, 0) + value


def use(tool: str, arguments: dict[str, object], tool_use_id: str = "t1") -> ToolUseRequest:
    return ToolUseRequest(tool_use_id, "tool_call", {"name": tool, "arguments": arguments})


def tools(memory: FakeMemory, log: FakeWriteLog | None = None) -> tuple[MemoryTools, Counts]:
    counts = Counts()
    settings = Settings(memory_id="voiceide_local-0123456789", require_principal=True)
    return MemoryTools(memory, log or FakeWriteLog(), settings, logging.getLogger("t"), counts), counts


def state(principal: str | None = SUB, project: str | None = None) -> SessionState:
    workspace = {"desk": f"workspace: {project}"} if project else {}
    return SessionState(session_id="0b6f6d1e-1d5a-4c59-9d0b-1b3f7b9d6a10", principal=principal, workspace=workspace)


def test_only_the_wrappers_memory_uses_are_made() -> None:
    uses = [use("memory.search", {"query": "tabs"}), ToolUseRequest("t2", "tool_call", {"name": "editor.openFile"})]
    assert memory_uses(uses) == [("t1", "memory.search", '{"query": "tabs"}')]


def test_a_write_lands_in_the_persons_preferences_and_joins_the_block() -> None:
    memory = FakeMemory()
    made, _ = tools(memory)
    answer = made.answers(state(), [use("memory.write", {"text": "prefers tabs over spaces"})], 1000.0)["t1"]
    assert not answer.failed and json.loads(answer.text)["remembered"] is True
    assert list(memory.records.values()) == [(f"/people/{SUB}/preferences", "prefers tabs over spaces")]
    assert answer.added is not None and answer.added.kind == "preference"


def test_a_project_write_lands_under_the_sessions_project() -> None:
    memory = FakeMemory()
    made, _ = tools(memory)
    made.answers(state(project="Shop API"), [use("memory.write", {"text": "uses pnpm", "scope": "project"})], 1.0)
    assert list(memory.records.values()) == [(f"/people/{SUB}/projects/shop-api", "uses pnpm")]


def test_a_secret_is_refused_before_anything_is_counted_or_written() -> None:
    memory, log = FakeMemory(), FakeWriteLog()
    made, counts = tools(memory, log)
    answer = made.answers(state(), [use("memory.write", {"text": "my password is hunter2"})], 1.0)["t1"]
    assert answer.failed and answer.text == rules.SECRET_REFUSAL
    assert memory.records == {} and log.times == {} and counts.counted["MemoryWritesRefused"] == 1


def test_the_sixth_write_in_a_minute_is_refused_with_the_wait() -> None:
    memory = FakeMemory()
    made, _ = tools(memory)
    for index in range(5):
        answer = made.answers(state(), [use("memory.write", {"text": f"fact number {index} about builds"})], 1.0)
        assert not answer["t1"].failed
    refused = made.answers(state(), [use("memory.write", {"text": "one more thing entirely"})], 1.0)["t1"]
    assert refused.failed and "5 things a minute" in refused.text and "60 seconds" in refused.text
    assert len(memory.records) == 5


def test_a_near_duplicate_replaces_the_older_record() -> None:
    memory = FakeMemory()
    made, _ = tools(memory)
    first = made.answers(state(), [use("memory.write", {"text": "prefers tabs over spaces"})], 1.0)["t1"]
    again = made.answers(state(), [use("memory.write", {"text": "Prefers tabs over spaces."}, "t2")], 2.0)["t2"]
    assert json.loads(again.text)["merged"] is True
    assert first.added is not None and [record.id for record in again.removed] == [first.added.id]
    assert [text for _ns, text in memory.records.values()] == ["Prefers tabs over spaces."]


def test_forget_by_words_and_by_id_and_never_another_persons() -> None:
    memory = FakeMemory()
    memory.records["mem-" + "1" * 40] = (f"/people/{SUB}/preferences", "prefers tabs over spaces")
    memory.records["mem-" + "2" * 40] = (f"/people/{OTHER}/preferences", "prefers tabs over spaces")
    made, _ = tools(memory)
    foreign = made.answers(state(), [use("memory.forget", {"id": "mem-" + "2" * 40})], 1.0)["t1"]
    assert foreign.failed and foreign.text == rules.NOTHING_TO_FORGET
    gone = made.answers(state(), [use("memory.forget", {"text": "tabs over spaces"})], 1.0)["t1"]
    assert [record.id for record in gone.removed] == ["mem-" + "1" * 40]
    assert list(memory.records) == ["mem-" + "2" * 40]  # the other person's is still theirs


def test_search_shows_the_persons_own_and_this_projects_but_not_another_projects() -> None:
    memory = FakeMemory()
    memory.records["mem-" + "1" * 40] = (f"/people/{SUB}/preferences", "prefers tabs")
    memory.records["mem-" + "2" * 40] = (f"/people/{SUB}/projects/shop-api", "shop uses pnpm")
    memory.records["mem-" + "3" * 40] = (f"/people/{SUB}/projects/blog", "blog uses yarn")
    memory.records["mem-" + "4" * 40] = (f"/people/{OTHER}/preferences", "prefers spaces")
    made, _ = tools(memory)
    answer = made.answers(state(project="shop-api"), [use("memory.search", {"query": "what do I use"})], 1.0)["t1"]
    texts = {entry["text"] for entry in json.loads(answer.text)["memories"]}
    assert texts == {"prefers tabs", "shop uses pnpm"}


def test_no_signed_in_person_means_nothing_is_remembered() -> None:
    memory = FakeMemory()
    made, _ = tools(memory)
    answer = made.answers(state(principal=None), [use("memory.write", {"text": "prefers tabs"})], 1.0)["t1"]
    assert answer.failed and memory.records == {}


def test_a_failing_memory_is_told_to_the_model_and_counted() -> None:
    memory = FakeMemory(fail=True)
    made, counts = tools(memory)
    answer = made.answers(state(), [use("memory.search", {"query": "tabs"})], 1.0)["t1"]
    assert answer.failed and answer.text == rules.MEMORY_UNAVAILABLE and counts.counted["MemoryFailures"] == 1


def test_the_block_at_a_sessions_start_and_a_failing_read_keeps_what_the_session_had() -> None:
    memory = FakeMemory()
    memory.records["mem-" + "1" * 40] = (f"/people/{SUB}/preferences", "prefers tabs")
    recall = MemoryRecall(memory, Settings(require_principal=True), logging.getLogger("t"), Counts())
    lines = recall.block_lines(SUB)
    assert lines is not None and "prefers tabs" in lines[0]
    assert recall.block_lines(OTHER) == []
    memory.fail = True
    assert recall.block_lines(SUB) is None


def window(*messages: tuple[str, list[dict[str, object]]]) -> list[dict[str, object]]:
    return [{"role": role, "content": content} for role, content in messages]


def test_a_turns_event_holds_its_words_and_everything_said_back() -> None:
    turn = window(
        ("user", [{"text": "old question"}]),
        ("assistant", [{"text": "old answer"}]),
        ("user", [{"text": "open the readme"}]),
        (
            "assistant",
            [
                {"text": "Opening it."},
                {"toolUse": {"toolUseId": "t", "name": "tool_call", "input": {"name": "editor.openFile"}}},
            ],
        ),
        ("user", [{"toolResult": {"toolUseId": "t", "content": [{"text": "ok"}]}}]),
    )
    assert turn_of(turn, "It is open.") == ("open the readme", "Opening it. It is open.", False)  # type: ignore[arg-type]


def test_a_turn_that_wrote_a_record_is_not_extracted_again_and_a_secret_is_never_sent() -> None:
    memory = FakeMemory()
    recall = MemoryRecall(memory, Settings(require_principal=True), logging.getLogger("t"), Counts())
    wrote = window(
        ("user", [{"text": "remember that I prefer tabs"}]),
        ("assistant", [{"toolUse": {"toolUseId": "t", "name": "tool_call", "input": {"name": "memory.write"}}}]),
        ("user", [{"toolResult": {"toolUseId": "t", "content": [{"text": "ok"}]}}]),
    )
    recall.after_turn(state(), wrote, "I'll remember that.", 1.0)  # type: ignore[arg-type]
    assert memory.events[-1]["extract"] is False
    recall.after_turn(state(), window(("user", [{"text": "my password is hunter2"}])), "ok", 2.0)  # type: ignore[arg-type]
    assert len(memory.events) == 1
    recall.after_turn(state(), window(("user", [{"text": "I always run tests with -x"}])), "Sure.", 3.0)  # type: ignore[arg-type]
    assert memory.events[-1]["said"] == "I always run tests with -x" and memory.events[-1]["extract"] is True
