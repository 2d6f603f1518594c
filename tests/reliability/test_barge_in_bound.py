"""A barge-in stops the model's stream within the bound, counted in model deltas.

The runner reads whether its stream was stopped every ``barge_in_check_ms`` (150 ms) once the
answer is shown, between the model's deltas. Here the streams' clock is virtual and moves by one
paced delta (3 tokens at 80 tokens a second: 37.5 ms) for each delta the runner reads, so the
bound is a count of deltas whatever this machine's speed: the person barges in while the stream
is held after one of its deltas 120 to 140 (where partials have grown far apart), and the
runner must close it within 150 ms of deltas plus the one it was reading (and its partial's
read): at most 6 deltas read after the barge-in, well inside the 300 ms (8 deltas) the check
promises at worst (a 1 s check, as before, lets up to 27 through). The local Bedrock endpoint must see the stream
closed before it sent the whole answer: the tokens after it are never spent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conductor_local.bedrock.script import Text
from conductor_local.bedrock.server import message
from lambdas import runtime
from shared.core.model_output import TextDelta
from tests.handlers.conftest import Harness
from tests.reliability.support import count_partials, gated, last_user_text, wait_partials

DELTA_S = 3 / 80  # the paced model: 3 tokens a delta, 80 tokens a second
WORDS = 400
BOUND_DELTAS = 6  # 150 ms of deltas (4), the delta being read, the partial's read
WORST_DELTAS = 8  # 300 ms


class DeltaClock:
    """A clock that moves one paced delta for each model delta the runner reads."""

    def __init__(self) -> None:
        self.base = time.time()
        self.read = 0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.base + self.read * DELTA_S

    def counting(self, stream: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Iterator[Any]:
            items = stream(*args, **kwargs)
            try:
                for item in items:
                    if isinstance(item, TextDelta):
                        with self._lock:
                            self.read += 1
                    yield item
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()

        return counted


@pytest.mark.parametrize("held_after", [120, 127, 134, 140])
def test_a_barge_in_mid_answer_closes_the_model_stream_within_six_deltas(
    conductor: Harness, route: Any, monkeypatch: pytest.MonkeyPatch, held_after: int
) -> None:
    # The stages' pacing: partials coalesced and growing apart (the harness sends one a delta).
    monkeypatch.setenv("CONDUCTOR_PARTIAL_FLUSH_MS", "120")
    monkeypatch.setenv("CONDUCTOR_PARTIAL_GROWTH", "0.5")
    runtime.reset()
    gate = threading.Event()
    sent = {"deltas": 0}
    answer = " ".join(f"word{i}" for i in range(WORDS))

    def rule(request: dict[str, Any]) -> Any:
        if "explain" not in last_user_text(request):
            return message("Fine.")

        def steps() -> Iterator[Any]:
            for step in gated(message(Text(answer, pause=0.002)), gate, after_deltas=held_after):
                if isinstance(step, dict) and "contentBlockDelta" in step:
                    sent["deltas"] += 1
                yield step

        return steps()

    route(rule)
    conn = conductor.connect()
    conductor.say(conn, "hello")  # the runner's singleton exists now
    runner = runtime.turn_runner()
    clock = DeltaClock()
    runner.clock = clock.now
    runner.brain.stream = clock.counting(runner.brain.stream)  # type: ignore[method-assign]

    shown_before = count_partials(conductor.events(conn))
    talking = conductor.send_in_background(conn, "userAudioTranscriptFinal", {"text": "explain it all"})
    wait_partials(conductor, conn, shown_before + 1)
    for _ in range(500):  # the runner reads the held delta, then waits for the next
        if clock.read >= held_after:
            break
        time.sleep(0.01)
    conductor.barge_in(conn)  # committed while the model is held
    read_at_barge_in = clock.read
    gate.set()
    talking.join(30)
    assert not talking.is_alive()

    read_after = clock.read - read_at_barge_in
    assert read_at_barge_in == held_after
    assert read_after <= BOUND_DELTAS <= WORST_DELTAS, f"{read_after} deltas read after the barge-in"
    assert sent["deltas"] < WORDS, "the whole answer was generated for nobody"
    finals = [e.payload.text for e in conductor.events(conn) if e.kind_name == "assistantSpeechFinal"]
    assert not any(f"word{WORDS - 1}" in text for text in finals)
