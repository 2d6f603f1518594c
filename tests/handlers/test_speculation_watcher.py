"""The watcher of the person's speech, against the real store on moto: it takes the watch, waits
for the partial to stay the same, starts the model on it and holds the answer, posting nothing,
until the final's commit promotes it (the answer then goes out as any turn's) or drops it (the
model is stopped and what it cost is counted). Also ``Prefetch``, the model stream read ahead.

The watcher's time is a clock the test moves: its sleeps wait until the test moves the clock to
when they end. The model is a scripted brain that can hold its stream at a given item.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from shared.adapters.brain import BrainError
from shared.adapters.model_prefetch import Prefetch
from shared.adapters.store import SessionStore
from shared.adapters.turn_launcher import TurnTask
from shared.core import session_index, speculation
from shared.core.messages import Message
from shared.core.model_output import MessageEnd, StreamItem, TextDelta, ToolUseRequest
from shared.core.state import SessionState
from shared.flows import speculation_watcher
from shared.flows.commit import Committer
from shared.flows.conductor_service import ConductorService
from shared.flows.config import Settings
from shared.flows.delivery import Delivery, Request
from shared.flows.speculation_watcher import SpeculationWatcher
from shared.flows.turn_runner import TurnRunner
from shared.wire.protocol import Event, ToolCall, TurnUsage, parse_event
from tests.handlers.conftest import TABLE, summarize
from tests.reliability.support import THINKING, Background, frame

ENDPOINT = "https://ws.example.test/dev"
WAIT_S = 10.0  # how long a test waits for another thread before it fails (never reached when all is well)
REMAINING_MS = 600_000
ANSWER = [TextDelta("It is "), TextDelta("noon. "), TextDelta("Anything else?")]
SAID = "It is noon. Anything else?"
USAGE = {"inputTokens": 40, "outputTokens": 6}


def remaining() -> int:
    return REMAINING_MS


# ---- doubles ------------------------------------------------------------------------------------


class Clock:
    """The watcher's time: it moves only when the test moves it. ``sleep`` waits until the clock
    reaches the sleeper's wake time; ``wake`` moves it there."""

    def __init__(self, now: float) -> None:
        self._now = now
        self._changed = threading.Condition()
        self._sleepers: list[float] = []
        self.sleeping_threads: set[int] = set()

    def __call__(self) -> float:
        with self._changed:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._changed:
            if seconds <= 0:
                return
            wake = self._now + seconds
            self._sleepers.append(wake)
            self.sleeping_threads.add(threading.get_ident())
            self._changed.notify_all()
            try:
                assert self._changed.wait_for(lambda: self._now >= wake, WAIT_S), "the test never moved the clock"
            finally:
                self._sleepers.remove(wake)

    def sleeper(self) -> float:
        """Wait until the watcher sleeps; returns when it means to wake."""
        with self._changed:
            asleep = self._changed.wait_for(lambda: any(wake > self._now for wake in self._sleepers), WAIT_S)
            assert asleep, "the watcher never slept"
            return min(wake for wake in self._sleepers if wake > self._now)

    def wake(self) -> None:
        """The sleeping watcher's time has come (a moment past it, so no rounding keeps it asleep)."""
        self.advance_to(self.sleeper() + 0.001)

    def advance(self, seconds: float) -> None:
        with self._changed:
            self._now += seconds
            self._changed.notify_all()

    def advance_to(self, when: float) -> None:
        with self._changed:
            self._now = max(self._now, when)
            self._changed.notify_all()


@dataclass
class Script:
    """One model answer: its items in order; an exception among them is raised there. With
    ``hold_at``, the stream stops before that item until ``release`` (``held`` says it got there)."""

    items: Sequence[StreamItem | BaseException]
    hold_at: int | None = None
    held: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)
    sent: int = 0  # items handed to the reader
    closed: bool = False

    def release(self) -> None:
        self.gate.set()

    def run(self, on_sent: Callable[[], None] | None) -> Iterator[StreamItem]:
        if on_sent is not None:
            on_sent()
        try:
            for index, item in enumerate(self.items):
                if index == self.hold_at:
                    self.held.set()
                    assert self.gate.wait(WAIT_S), "the test never released the model"
                if isinstance(item, BaseException):
                    raise item
                self.sent += 1
                yield item
        finally:
            self.closed = True


class ScriptedBrain:
    """Answers each request with the next script, and keeps the requests."""

    def __init__(self) -> None:
        self.scripts: list[Script] = []
        self.requests: list[list[Message]] = []

    def script(self, items: Sequence[StreamItem | BaseException], hold_at: int | None = None) -> Script:
        script = Script(items, hold_at)
        self.scripts.append(script)
        return script

    def stream(
        self,
        messages: list[Message],
        *,
        summary: str | None = None,
        tools: Sequence[Any] | None = None,
        on_sent: Callable[[], None] | None = None,
        context: Sequence[str] = (),
    ) -> Iterator[StreamItem]:
        self.requests.append(messages)
        assert self.scripts, "the model was asked more often than the test expected"
        return self.scripts.pop(0).run(on_sent)


class Posts:
    """The management API: every frame posted, parsed."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def post(self, endpoint: str, connection_id: str, frame: str) -> bool:
        event = parse_event(frame)
        assert isinstance(event, Event)
        with self._lock:
            self.events.append(event)
        return True

    def close(self, endpoint: str, connection_id: str) -> bool:
        return True

    def since(self, mark: int) -> list[Event]:
        with self._lock:
            return [event for event in self.events[mark:] if event.kind_name != "sessionReady"]


class Launches:
    """Turn tasks ``$default`` launches, kept: the test runs the watchers itself."""

    def __init__(self) -> None:
        self.tasks: list[TurnTask] = []

    def launch(self, task: TurnTask) -> None:
        self.tasks.append(task)

    def watches(self) -> list[TurnTask]:
        return [task for task in self.tasks if task.watch]

    def streams(self) -> list[TurnTask]:
        return [task for task in self.tasks if not task.watch]


class Counts:
    """Metrics, counted; a test can wait for one to be counted."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seen: set[str] = set()
        self._changed = threading.Condition()

    def count(self, name: str, value: int = 1) -> None:
        with self._changed:
            self.counts[name] += value
            self.seen.add(name)
            self._changed.notify_all()

    def timing(self, name: str, milliseconds: float) -> None:
        self.count(f"timing:{name}")

    def wait_for(self, name: str) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: name in self.seen, WAIT_S), f"{name} was never counted"


# ---- the rig ------------------------------------------------------------------------------------


@dataclass
class Rig:
    store: SessionStore
    service: ConductorService
    watcher: SpeculationWatcher
    brain: ScriptedBrain
    posts: Posts
    launches: Launches
    metrics: Counts
    clock: Clock
    settings: Settings
    prefetches: list[Prefetch]

    def connect(self) -> tuple[str, str]:
        """A connected session whose app said sessionStart (its connection is live)."""
        session_id, connection_id = str(uuid.uuid4()), f"conn-{uuid.uuid4().hex[:12]}"
        assert self.service.connect(connection_id, session_id, None).status == 200
        self.send(connection_id, "sessionStart", {"sessionId": session_id})
        return session_id, connection_id

    def send(self, connection_id: str, kind: str, payload: dict[str, Any]) -> None:
        request = Request(connection_id=connection_id, endpoint=ENDPOINT, remaining_ms=lambda: 29_000)
        self.service.handle_frame(request, frame(kind, payload))

    def partial(self, connection_id: str, text: str) -> None:
        self.send(connection_id, "userAudioTranscriptPartial", {"text": text})

    def final(self, connection_id: str, text: str) -> None:
        self.send(connection_id, "userAudioTranscriptFinal", {"text": text})

    def load(self, session_id: str) -> SessionState:
        state = self.store.load(session_id)
        assert state is not None
        return state

    def watch(self, task: TurnTask) -> Background:
        return Background(lambda: self.watcher.watch(task, remaining))

    def speculating(self, connection_id: str, session_id: str, text: str = "what time is it") -> Background:
        """The person says ``text`` and pauses: the watcher starts the model on it."""
        self.partial(connection_id, text)
        (task,) = self.launches.watches()
        watching = self.watch(task)
        self.clock.wake()  # the partial stayed the same for the stable time
        self.clock.sleeper()  # the model runs; the watcher reads the session every poll
        turn = self.load(session_id).turn
        assert turn is not None and turn.speculative is not None
        return watching


@pytest.fixture
def rig(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from rig_with(moto_url, monkeypatch)


def rig_with(moto_url: str, monkeypatch: pytest.MonkeyPatch, **settings_given: Any) -> Iterator[Rig]:
    """The rig, on settings with ``settings_given`` beside the rig's own."""
    client = boto3.client(
        "dynamodb", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    settings = Settings(
        table_name=TABLE,
        speculation=True,
        turn_reserve_ms=1000,
        # One partial per model delta, so the answer's partials can be read exactly.
        partial_flush_ms=0,
        partial_growth=0,
        speak_interval_ms=0,
        **settings_given,
    )
    store = SessionStore(client, TABLE, ttl_seconds=settings.session_ttl_seconds)
    metrics, posts, launches, brain = Counts(), Posts(), Launches(), ScriptedBrain()
    log = logging.getLogger("tests.speculation")
    committer = Committer(store, settings, metrics)
    delivery = Delivery(store=store, gateway=posts, committer=committer, logger=log, metrics=metrics)
    runner = TurnRunner(
        store=store,
        brain=brain,
        committer=committer,
        delivery=delivery,
        settings=settings,
        logger=log,
        metrics=metrics,
    )
    service = ConductorService(
        store=store, gateway=posts, launcher=launches, runner=runner, settings=settings, logger=log, metrics=metrics
    )
    # The watcher's clock starts at the epoch time ``$default`` stamps the partials with, then
    # moves only as the test moves it.
    clock = Clock(time.time())
    prefetches: list[Prefetch] = []

    class Kept(Prefetch):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            prefetches.append(self)

    monkeypatch.setattr(speculation_watcher, "Prefetch", Kept)
    watcher = SpeculationWatcher(runner, clock=clock, sleep=clock.sleep)
    yield Rig(store, service, watcher, brain, posts, launches, metrics, clock, settings, prefetches)
    for script in brain.scripts:  # nothing is left holding a model stream
        script.release()


def said(events: list[Event]) -> list[tuple[Any, ...]]:
    return summarize(events)


def carried(rig: Rig) -> list[tuple[Any, ...]]:
    """The events of the decisions whose turns were launched alongside their writes: their runners
    post them first (here the test keeps the turn tasks and runs none)."""
    frames = [frame for task in rig.launches.streams() for _seq, frame in task.decision_frames()]
    return summarize([parse_event(frame) for frame in frames])


# ---- the watcher ----------------------------------------------------------------------------------


def test_a_confirmed_speculation_speaks_its_answer_after_the_final(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    script = rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)], hold_at=2)
    rig.partial(conn, "what time is it")
    (task,) = rig.launches.watches()
    assert rig.launches.streams() == []
    listening = rig.load(session_id).listening
    assert listening is not None and listening.watcher == task.stream_id

    watching = rig.watch(task)
    assert rig.clock.sleeper() == pytest.approx(listening.heard_at + rig.settings.speculating.stable_s)
    held = rig.load(session_id)
    assert held.turn is None and held.listening is not None and held.listening.watcher_runner is not None
    rig.clock.wake()
    assert script.held.wait(WAIT_S)  # the model wrote its first words, and is held there
    rig.clock.sleeper()
    speculating = rig.load(session_id)
    assert speculating.turn is not None and speculating.turn.speculative == "what time is it"
    assert rig.brain.requests[0][-1] == {"role": "user", "content": [{"text": "what time is it"}]}
    assert rig.posts.since(mark) == []  # nothing of it reaches the app
    assert rig.store.messages(session_id) == []

    rig.final(conn, "What time is it?")
    assert rig.launches.streams() == []  # the watcher runs the turn: nothing is launched
    thinking = rig.posts.since(mark)
    assert said(thinking) == [THINKING]
    rig.clock.wake()  # the watcher reads that the final confirmed it
    script.release()
    assert watching.result() is not None
    events = rig.posts.since(mark)
    assert said(events) == [
        THINKING,
        ("partial", "It is"),
        ("partial", "It is noon."),
        ("partial", SAID),
        ("final", SAID),
        ("toolCall", "tts.speak", {"text": SAID}),
    ]
    numbered = [event.seq for event in events if event.kind_name != "assistantSpeechPartial"]
    assert numbered == list(range(thinking[0].seq or 0, (thinking[0].seq or 0) + 3))  # after the final's own
    assert rig.store.messages(session_id) == [
        {"role": "user", "content": [{"text": "What time is it?"}]},
        {"role": "assistant", "content": [{"text": SAID}]},
    ]
    assert len(rig.brain.requests) == 1  # the answer it already wrote, not a second request
    assert rig.metrics.counts["Speculations"] == 1
    assert (rig.metrics.counts["TurnsSpeculated"], rig.metrics.counts["TurnsPromoted"]) == (1, 1)
    assert "SpeculationsDiscarded" not in rig.metrics.seen
    assert rig.metrics.counts["OutputTokens"] == USAGE["outputTokens"]


def test_a_final_that_differs_stops_the_model_and_counts_what_it_cost(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    script = rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)], hold_at=1)
    watching = rig.speculating(conn, session_id)
    assert script.held.wait(WAIT_S)

    rig.final(conn, "What time is it in Paris?")
    (launched,) = rig.launches.streams()  # the turn starts on the final, as without speculation
    state = rig.load(session_id)
    assert state.turn is not None and state.turn.speculative is None
    assert state.turn.stream is not None and state.turn.stream.stream_id == launched.stream_id
    rig.clock.wake()
    rig.metrics.wait_for("SpeculationDiscardedOutputTokens")  # the model was stopped, then its cost counted
    script.release()
    assert watching.result() is None
    (prefetch,) = rig.prefetches
    prefetch.join(WAIT_S)
    assert script.closed and script.sent == 2  # it read one more delta, then closed the stream
    assert rig.metrics.counts["SpeculationsDiscarded"] == 1
    assert rig.metrics.counts["SpeculationDiscardedOutputTokens"] == math.ceil(len("It is ") / 4)
    assert rig.metrics.counts["SpeculationDiscardedInputTokens"] > 0  # estimated: the message never ended
    assert (rig.metrics.counts["TurnsSpeculated"], rig.metrics.counts["TurnsPromoted"]) == (1, 0)
    assert said(rig.posts.since(mark)) + carried(rig) == [THINKING]  # nothing of the speculation, before or after
    assert rig.store.messages(session_id) == [{"role": "user", "content": [{"text": "What time is it in Paris?"}]}]


def test_a_speculation_no_final_comes_for_is_dropped_at_the_hold_time(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)])
    watching = rig.speculating(conn, session_id)
    rig.prefetches[0].join(WAIT_S)  # the model has written it all
    rig.clock.advance(rig.settings.speculating.hold_s + 0.1)
    rig.clock.sleeper()  # back to watching
    state = rig.load(session_id)
    assert state.turn is None and state.listening is not None
    assert rig.metrics.counts["SpeculationDiscardedInputTokens"] == USAGE["inputTokens"]  # the model's own counts
    assert rig.posts.since(mark) == []

    rig.final(conn, "What time is it?")  # too late: the turn starts on it, as without speculation
    assert len(rig.launches.streams()) == 1
    rig.clock.wake()
    assert watching.result() is None
    assert said(rig.posts.since(mark)) + carried(rig) == [THINKING]
    assert (rig.metrics.counts["TurnsSpeculated"], rig.metrics.counts["TurnsPromoted"]) == (0, 0)
    # What it wrote is counted once its stream is closed, when the watch ends: the model's own count.
    assert rig.metrics.counts["SpeculationDiscardedOutputTokens"] == USAGE["outputTokens"]


def test_a_final_that_confirms_it_as_the_hold_time_ends_still_gets_its_answer(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final's commit lands between the watcher's read that the hold time is over and its
    commit dropping the speculation: the final wins, and the watcher runs the turn it promoted."""
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)])
    watching = rig.speculating(conn, session_id)
    rig.prefetches[0].join(WAIT_S)
    give_up_reason = rig.watcher._give_up_reason

    def final_meanwhile(*args: Any) -> str | None:
        reason = give_up_reason(*args)
        if reason is not None and not rig.load(session_id).history_len:
            rig.final(conn, "What time is it?")
        return reason

    monkeypatch.setattr(rig.watcher, "_give_up_reason", final_meanwhile)
    rig.clock.advance(rig.settings.speculating.hold_s + 0.1)
    rig.clock.wake()  # the watcher reads the session again
    assert watching.result() is not None
    assert [item for item in said(rig.posts.since(mark)) if item[0] != "partial"] == [
        THINKING,
        ("final", SAID),
        ("toolCall", "tts.speak", {"text": SAID}),
    ]
    assert "SpeculationsDiscarded" not in rig.metrics.seen
    assert len(rig.brain.requests) == 1


def test_a_model_that_fails_before_its_first_word_drops_the_speculation(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    rig.brain.script([BrainError("ThrottlingException", "slow down", during_stream=False)])
    watching = rig.speculating(conn, session_id)
    rig.prefetches[0].join(WAIT_S)
    assert rig.prefetches[0].failed_early
    rig.clock.wake()
    rig.clock.sleeper()  # back to watching
    assert rig.load(session_id).turn is None
    assert rig.metrics.counts["SpeculationsDiscarded"] == 1

    rig.final(conn, "What time is it?")
    assert len(rig.launches.streams()) == 1  # a turn of its own, with a request of its own
    rig.clock.wake()
    assert watching.result() is None
    assert said(rig.posts.since(mark)) + carried(rig) == [THINKING]


def test_a_confirmed_speculation_whose_model_failed_at_once_asks_the_model_again(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    rig.brain.script([BrainError("ThrottlingException", "slow down", during_stream=False)])
    watching = rig.speculating(conn, session_id)
    rig.prefetches[0].join(WAIT_S)
    rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)])
    rig.final(conn, "What time is it?")  # before the watcher read that the model failed
    assert rig.launches.streams() == []
    rig.clock.wake()
    assert watching.result() is not None
    assert len(rig.brain.requests) == 2
    assert rig.brain.requests[1][-1] == {"role": "user", "content": [{"text": "What time is it?"}]}
    assert [item for item in said(rig.posts.since(mark)) if item[0] != "partial"] == [
        THINKING,
        ("final", SAID),
        ("toolCall", "tts.speak", {"text": SAID}),
    ]


def test_a_barge_in_during_a_speculation_posts_nothing_and_stops_the_model(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    script = rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)], hold_at=1)
    watching = rig.speculating(conn, session_id)
    assert script.held.wait(WAIT_S)
    rig.send(conn, "error", {"code": "audio.output.interrupted", "message": "user spoke"})
    assert rig.load(session_id).turn is None
    rig.clock.wake()
    rig.metrics.wait_for("SpeculationsDiscarded")
    script.release()
    rig.clock.sleeper()  # it watches on (the same words are not speculated on again)
    assert len(rig.brain.requests) == 1
    rig.final(conn, "What time is it?")
    rig.clock.wake()
    assert watching.result() is None
    assert said(rig.posts.since(mark)) + carried(rig) == [THINKING]
    assert len(rig.launches.streams()) == 1


def test_a_session_ended_during_a_speculation_drops_it(rig: Rig) -> None:
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)])
    watching = rig.speculating(conn, session_id)
    rig.service.committer.apply(session_id, lambda state: session_index.end_session(state, rig.clock()))
    rig.clock.wake()
    assert watching.result() is None
    state = rig.load(session_id)
    assert state.turn is None and state.listening is None
    assert rig.metrics.counts["SpeculationsDiscarded"] == 1
    assert rig.posts.since(mark) == []


def test_a_watcher_that_hears_nothing_new_leaves(rig: Rig) -> None:
    session_id, conn = rig.connect()
    rig.partial(conn, "what time")
    (task,) = rig.launches.watches()
    watching = rig.watch(task)
    listening = rig.load(session_id).listening
    assert listening is not None
    rig.clock.sleeper()
    rig.clock.advance_to(listening.heard_at + rig.settings.speculating.idle_s + 1)  # nothing more, nor a final
    assert watching.result() is None
    assert rig.brain.requests == []
    assert rig.load(session_id).listening is None  # the next partial launches another
    rig.partial(conn, "what time is it")
    assert len(rig.launches.watches()) == 2


def test_one_watch_is_held_by_one_invocation(rig: Rig) -> None:
    session_id, conn = rig.connect()
    rig.partial(conn, "what time is it")
    (task,) = rig.launches.watches()
    first = rig.watch(task)
    rig.clock.sleeper()
    holder = rig.load(session_id).listening
    assert holder is not None and holder.watcher_runner is not None
    assert rig.watcher.watch(task, remaining) is None  # a second delivery of the launch returns at once
    listening = rig.load(session_id).listening
    assert listening is not None and listening.watcher_runner == holder.watcher_runner
    rig.final(conn, "What time is it?")
    rig.clock.wake()
    assert first.result() is None
    assert len(rig.clock.sleeping_threads) == 1


def test_two_deliveries_of_one_launch_at_once_watch_once(rig: Rig) -> None:
    _, conn = rig.connect()
    rig.partial(conn, "what time is it")
    (task,) = rig.launches.watches()
    both = [rig.watch(task), rig.watch(task)]
    rig.clock.sleeper()
    rig.final(conn, "What time is it?")
    rig.clock.wake()
    assert [watching.result() for watching in both] == [None, None]
    assert len(rig.clock.sleeping_threads) == 1  # only one ever waited on the partial
    assert rig.brain.requests == []


def test_a_watcher_that_dies_running_a_confirmed_speculation_ends_its_turn_with_an_apology(rig: Rig) -> None:
    session_id, conn = rig.connect()
    rig.partial(conn, "what time is it")
    (task,) = rig.launches.watches()
    runner, deadline = f"{task.stream_id}.dead", rig.clock() + 600  # the invocation that will die
    rig.service.committer.apply(
        session_id, lambda state: speculation.take_watch(state, task.stream_id, runner, deadline=deadline)
    )
    rig.service.committer.apply(
        session_id,
        lambda state: speculation.start_speculation(
            state,
            task.stream_id,
            runner,
            "what time is it",
            now=rig.clock(),
            deadline=deadline,
            settings=rig.settings.speculating,
        ),
    )
    rig.final(conn, "What time is it?")  # promoted: the dead invocation was to run it
    promoted = rig.load(session_id).turn
    assert promoted is not None and promoted.speculative is None
    mark = len(rig.posts.events)

    rig.watcher.abandoned(task)  # its failure record came

    assert rig.load(session_id).turn is not None  # until the apology is spoken
    events = rig.posts.since(mark)
    assert [e.payload.code for e in events if e.kind_name == "error"] == ["conductor_error"]
    assert [e.payload.name for e in events if e.kind_name == "toolCall"][-1] == "tts.speak"


def test_a_dead_watchers_record_leaves_a_turn_another_runner_holds_alone(rig: Rig) -> None:
    session_id, conn = rig.connect()
    rig.partial(conn, "what time is it")
    (task,) = rig.launches.watches()
    rig.final(conn, "What time is it?")  # no speculation: the turn is launched as before
    assert len(rig.launches.streams()) == 1
    before = rig.load(session_id)
    rig.watcher.abandoned(task)
    after = rig.load(session_id)
    assert after.turn == before.turn and after.listening is None


def test_a_repeated_partial_costs_no_write_and_launches_nothing(rig: Rig) -> None:
    session_id, conn = rig.connect()
    rig.partial(conn, "what time is it")
    version = rig.load(session_id).version
    rig.partial(conn, "What time is it?")
    assert rig.load(session_id).version == version
    assert len(rig.launches.watches()) == 1


def test_partials_are_ignored_when_speculation_is_off(rig: Rig) -> None:
    session_id, conn = rig.connect()
    rig.service.settings = rig.settings.model_copy(update={"speculation": False})
    version = rig.load(session_id).version
    rig.partial(conn, "what time is it")
    assert rig.load(session_id).version == version and rig.launches.tasks == []


# ---- Prefetch -----------------------------------------------------------------------------------


def prefetched(script: Script, clock: Callable[[], float] | None = None) -> Prefetch:
    if clock is None:
        return Prefetch(lambda: script.run(None))
    return Prefetch(lambda: script.run(None), clock=clock)


def test_prefetch_yields_every_item_in_order() -> None:
    items: list[StreamItem] = [*ANSWER, MessageEnd("end_turn", USAGE)]
    prefetch = prefetched(Script(items))
    assert list(prefetch.items()) == items
    assert prefetch.usage == USAGE and not prefetch.failed_early


def test_prefetch_hands_over_what_it_read_then_the_rest_as_it_comes() -> None:
    clock = Clock(1000.0)
    script = Script([*ANSWER, MessageEnd("end_turn")], hold_at=2)
    prefetch = prefetched(script, clock)
    assert prefetch.requested_at == 1000.0
    assert script.held.wait(WAIT_S)
    assert prefetch.output_chars == len("It is noon. ") and prefetch.first_text_at == 1000.0
    items = prefetch.items()
    assert [next(items), next(items)] == ANSWER[:2]  # read ahead
    script.release()
    assert list(items) == [ANSWER[2], MessageEnd("end_turn")]  # live


def test_prefetch_raises_what_the_model_raised_after_what_it_wrote() -> None:
    failure = BrainError("ModelStreamErrorException", "broken", during_stream=True)
    prefetch = prefetched(Script([ANSWER[0], failure]))
    items = prefetch.items()
    assert next(items) == ANSWER[0]
    with pytest.raises(BrainError):
        next(items)
    assert not prefetch.failed_early


def test_a_request_that_fails_at_once_fails_early() -> None:
    def refused() -> Iterator[StreamItem]:
        raise BrainError("ValidationException", "bad request", during_stream=False)

    prefetch = Prefetch(refused)
    prefetch.join(WAIT_S)
    assert prefetch.failed_early
    with pytest.raises(BrainError):
        list(prefetch.items())


def test_stop_ends_the_read_at_the_next_item() -> None:
    script = Script([*ANSWER, MessageEnd("end_turn")], hold_at=1)
    prefetch = prefetched(script)
    assert script.held.wait(WAIT_S)
    prefetch.stop()
    script.release()
    prefetch.join(WAIT_S)
    assert script.closed and script.sent == 2
    assert list(prefetch.items()) == ANSWER[:2]


def test_a_reader_that_stops_reading_stops_the_model() -> None:
    script = Script([*ANSWER, MessageEnd("end_turn")], hold_at=2)
    prefetch = prefetched(script)
    items = prefetch.items()
    assert next(items) == ANSWER[0]
    items.close()  # the turn was stopped
    script.release()
    prefetch.join(WAIT_S)
    assert script.closed and script.sent < len(ANSWER) + 1


def test_output_tokens_are_the_models_count_else_estimated_from_the_text() -> None:
    estimated = prefetched(Script([TextDelta("0123456789")]))
    estimated.join(WAIT_S)
    assert estimated.output_tokens() == math.ceil(10 / 4)
    use = ToolUseRequest("tu-1", "tool_call", {"name": "editor.openFile"})
    with_tool = prefetched(Script([TextDelta("ab"), use]))
    with_tool.join(WAIT_S)
    assert with_tool.output_tokens() == math.ceil((2 + len(str(use.input))) / 4)
    reported = prefetched(Script([TextDelta("0123456789"), MessageEnd("end_turn", {"outputTokens": 7})]))
    reported.join(WAIT_S)
    assert reported.output_tokens() == 7


def test_a_dropped_speculations_tokens_reach_the_next_turns_usage(rig: Rig) -> None:
    """What a dropped speculation spent (Bedrock's own counts, its message having ended) is kept in
    the state when the watch ends, and the next turn's ``turnUsage`` carries it beside the turn's
    own request, whose figures are its metadata's."""
    session_id, conn = rig.connect()
    mark = len(rig.posts.events)
    rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)])
    watching = rig.speculating(conn, session_id)
    rig.prefetches[0].join(WAIT_S)
    rig.clock.advance(rig.settings.speculating.hold_s + 0.1)
    rig.clock.sleeper()  # dropped: no final came in time
    rig.final(conn, "What time is it?")
    rig.clock.wake()
    assert watching.result() is None
    state = rig.load(session_id)
    assert (state.speculation_input_pending, state.speculation_output_pending) == (40, 6)

    turn_usage = {"inputTokens": 55, "outputTokens": 9, "cacheReadInputTokens": 3}
    rig.brain.script([TextDelta("Noon."), MessageEnd("end_turn", turn_usage)])
    (task,) = rig.launches.streams()
    rig.service.runner.run(task, remaining)
    for _ in range(3):  # the app answers the speech: the turn ends
        speaks = [
            e.payload.call_id
            for e in rig.posts.since(mark)
            if isinstance(e.payload, ToolCall) and e.payload.name == "tts.speak"
        ]
        for call_id in speaks:
            rig.send(conn, "toolResult", {"callId": call_id, "result": json.dumps({"spoken": True})})
        if rig.load(session_id).turn is None:
            break
    reported = [event.payload for event in rig.posts.since(mark) if isinstance(event.payload, TurnUsage)]
    assert len(reported) == 1
    usage = reported[0]
    assert (usage.requests, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (1, 55, 9, 3)
    assert (usage.speculation_input_tokens, usage.speculation_output_tokens) == (40, 6)
    state = rig.load(session_id)
    assert (state.speculation_input_pending, state.speculation_output_pending) == (0, 0)
    assert (state.usage_total.input_tokens, state.usage_total.speculation_input_tokens) == (55, 40)
