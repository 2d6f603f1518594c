"""A transcript's turn launched alongside its write, and the memory written after a turn.

The turn runner's last commit announces the summary or title it writes next; that write withdraws
the announcement (even when nothing was made). A transcript decided while one is announced is
launched after its write: alongside it, it would lose its race to that write and its model request
would go to waste. An early launch whose write lost its race is counted by ``$default`` and by the
runner that found its stream gone.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from conductor_local.bedrock.server import message
from conductor_local.lambda_runtime.context import LocalLambdaContext
from conductor_local.lambda_runtime.turn_functions import TURN_FUNCTION, TURN_TIMEOUT_S
from lambdas import runtime, turn
from shared.core.state import MemoryWrite, SessionState
from tests.handlers.conftest import Connection, Harness
from tests.handlers.test_turn_runner import launches_held
from tests.reliability.support import THINKING

ANSWER = "Alpha beta gamma delta"


class CountedMetrics:
    """A metrics sink that passes everything on to the one it wraps, keeping the counts."""

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self.inner, self.counts, self.lock = inner, counts, threading.Lock()

    def count(self, name: str, value: int = 1) -> None:
        with self.lock:
            self.counts[name] += value
        self.inner.count(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        self.inner.timing(name, milliseconds)


@pytest.fixture
def counts() -> Counter[str]:
    """What ``$default``, the turn runner and its memory keeper count during the test."""
    counted: Counter[str] = Counter()
    service, runner = runtime.service(), runtime.turn_runner()
    assert runner.memory is not None
    service.metrics = CountedMetrics(service.metrics, counted)
    runner.metrics = CountedMetrics(runner.metrics, counted)
    runner.memory.metrics = CountedMetrics(runner.memory.metrics, counted)
    return counted


def early(counts: Counter[str]) -> dict[str, int]:
    """The early launches counted (not the lost ones' tokens: test_early_launch_lost_tokens.py)."""
    return {
        name: value
        for name, value in counts.items()
        if name.startswith("EarlyLaunch") and not name.endswith("Tokens") and value
    }


def run_task(task: dict[str, Any]) -> None:
    context = LocalLambdaContext(function_name=TURN_FUNCTION, timeout_seconds=TURN_TIMEOUT_S)
    assert turn.handler(task, context) == {"ran": True}


def stored(conn: Connection) -> SessionState:
    state = runtime.store().load(conn.session_id)
    assert state is not None
    return state


def ready(harness: Harness, **update: Any) -> Connection:
    """A started session, named (no title is made after its first answer) and updated as given."""
    conn = harness.connect()
    harness.start_session(conn)
    runtime.store().commit(stored(conn).model_copy(update={"title": "A session with a name", **update}))
    return conn


def said(harness: Harness, conn: Connection) -> list[tuple[Any, ...]]:
    return [item for item in harness.summary(conn) if item[0] in ("final", "toolCall")]


# ---- a transcript while a memory write is announced ------------------------------------------------


def test_a_transcript_is_launched_after_its_write_while_a_memory_write_is_announced(
    conductor: Harness, counts: Counter[str]
) -> None:
    conn = ready(conductor, memory_writes=[MemoryWrite(runner="a-runner", until=time.time() + 60)])
    with launches_held(conductor) as tasks:
        conductor.say(conn, "hello")
    assert len(tasks) == 1 and tasks[0].get("frames") is None  # launched after its write
    assert conductor.summary(conn) == [THINKING]  # so $default posted the decision's events itself
    assert early(counts) == {"EarlyLaunchesHeld": 1}
    conductor.script.push(message(ANSWER))
    run_task(tasks[0])
    assert ("final", ANSWER) in said(conductor, conn)


def test_an_announcement_past_its_time_holds_nothing_back(conductor: Harness, counts: Counter[str]) -> None:
    conn = ready(conductor, memory_writes=[MemoryWrite(runner="a-gone-runner", until=time.time() - 1)])
    with launches_held(conductor) as tasks:
        conductor.say(conn, "hello")
    assert len(tasks) == 1 and tasks[0].get("frames") is not None  # launched alongside its write
    assert conductor.summary(conn) == []  # its runner posts the decision's events
    assert early(counts) == {"EarlyLaunches": 1}


# ---- the runner's last commit announces, the memory write withdraws --------------------------------


class Summarizer:
    """The summary model: each call sees the stored state first (what a racing transcript reads)."""

    def __init__(self, conn: Connection, answer: str | None) -> None:
        self.conn, self.answer = conn, answer
        self.seen: list[tuple[list[MemoryWrite], float]] = []

    def summarize(self, system: str, messages: list[Any], *, model_id: str | None = None, max_tokens: int = 400) -> str:
        self.seen.append((stored(self.conn).memory_writes, time.time()))
        if self.answer is None:
            raise RuntimeError("the summary model failed")
        return self.answer


def test_the_turns_last_commit_announces_the_memory_write_which_withdraws_it(
    conductor: Harness, counts: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)  # no title yet: one is made after the first answer
    summarizer = Summarizer(conn, "Fix the login test")
    monkeypatch.setattr(runtime.turn_runner().memory, "summarizer", summarizer)
    conductor.script.push(message(ANSWER))
    conductor.say(conn, "fix the login test please")
    [(announced, at)] = summarizer.seen
    assert len(announced) == 1 and announced[0].until > at  # stored by the commit that ended the message
    after = stored(conn)
    assert after.title == "Fix the login test" and after.memory_writes == []
    assert counts["TitlesMade"] == 1 and counts["MemoryWritesUnannounced"] == 0


def test_an_announced_memory_write_that_made_nothing_still_withdraws_it(
    conductor: Harness, counts: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = conductor.connect()
    conductor.start_session(conn)
    summarizer = Summarizer(conn, None)
    monkeypatch.setattr(runtime.turn_runner().memory, "summarizer", summarizer)
    conductor.script.push(message(ANSWER))
    conductor.say(conn, "fix the login test please")
    [(announced, _at)] = summarizer.seen
    assert len(announced) == 1
    after = stored(conn)
    assert after.title is None and after.memory_writes == []
    assert counts["TitleFailures"] == 1 and counts["MemoryWritesUnannounced"] == 0


def lost_launch(conductor: Harness, monkeypatch: pytest.MonkeyPatch) -> tuple[Connection, list[dict[str, Any]]]:
    """A transcript launched alongside its write, which another write beats: decided again and
    launched after its write. Returns the session and the two tasks (the lost one first)."""
    conn = ready(conductor)
    store = runtime.store()
    commit = store.commit
    raced: list[int] = []

    def racing(state: SessionState, *args: Any, **kwargs: Any) -> SessionState:
        if not raced and state.turn is not None:  # the transcript's write: another write lands first
            raced.append(state.version)
            commit(stored(conn).model_copy(update={"summary": "What came before."}))
        return commit(state, *args, **kwargs)

    monkeypatch.setattr(store, "commit", racing)
    with launches_held(conductor) as tasks:
        conductor.say(conn, "hello")
    monkeypatch.setattr(store, "commit", commit)
    assert raced and len(tasks) == 2 and tasks[0].get("frames") is not None
    return conn, tasks


# ---- an early launch whose write lost its race ------------------------------------------------------


def test_an_early_launch_whose_write_lost_its_race_is_counted_and_asked_again(
    conductor: Harness, counts: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, tasks = lost_launch(conductor, monkeypatch)
    assert tasks[0].get("frames") is not None and tasks[1].get("frames") is None  # decided again, launched after
    assert early(counts) == {"EarlyLaunches": 1, "EarlyLaunchWritesLost": 1}
    conductor.script.push(message(ANSWER))
    conductor.script.push(message(ANSWER))
    run_task(tasks[0])  # asks the model, then finds its stream gone: says nothing
    assert early(counts) == {"EarlyLaunches": 1, "EarlyLaunchWritesLost": 1, "EarlyLaunchesLost": 1}
    run_task(tasks[1])
    assert said(conductor, conn).count(("final", ANSWER)) == 1
