"""The person's daily ceiling holds before every model request: a turn's, a tool round's, a
speculation's. Each request reserves its most in one conditional update and is settled at its real
cost, so requests started at once can never pass the ceiling together."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from conductor_local.bedrock.server import message, tool_call
from lambdas import runtime
from shared.adapters.store import SessionStore
from shared.core.model_output import MessageEnd
from shared.core.usage import Prices, budget_line, day_of, reservation_usd
from shared.wire.protocol import ErrorPayload, ToolCall
from tests.handlers.conftest import TABLE, Connection, Harness
from tests.handlers.test_speculation_watcher import ANSWER, USAGE, WAIT_S, Rig, rig_with
from tests.handlers.test_turn_usage import dynamodb as dynamodb  # the table's client, a fixture

PRICES = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3, "as_of": "2026-01-01"}
PERSON = "ana-sub"


def _ceiling(monkeypatch: pytest.MonkeyPatch, usd: float) -> None:
    monkeypatch.setenv("CONDUCTOR_PRICES", json.dumps(PRICES))
    monkeypatch.setenv("CONDUCTOR_DAILY_BUDGET_USD", str(usd))
    runtime.reset()


def _spent(dynamodb: object, person: str) -> float:
    return SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend().spent(person, day_of(time.time()))


def codes(conductor: Harness, conn: Connection) -> list[str]:
    return [e.payload.code for e in conductor.events(conn) if isinstance(e.payload, ErrorPayload)]


# ---- the reservation: one conditional update --------------------------------------------------------


def test_reservations_made_at_once_never_pass_the_ceiling_together(dynamodb: object) -> None:
    spend = SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend()
    held: list[bool] = []
    lock = threading.Lock()

    def reserve() -> None:
        ok = spend.reserve("bo", "2027-02-01", 0.1, 1.0)
        with lock:
            held.append(ok)

    threads = [threading.Thread(target=reserve) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert held.count(True) == 10 and held.count(False) == 6
    assert spend.spent("bo", "2027-02-01") == pytest.approx(1.0)
    spend.add("bo", "2027-02-01", 0.02 - 0.1)  # one settled at its real cost: room again
    assert spend.reserve("bo", "2027-02-01", 0.08, 1.0)
    assert not spend.reserve("bo", "2027-02-01", 0.01, 1.0)


def test_a_reservation_larger_than_the_ceiling_never_holds(dynamodb: object) -> None:
    spend = SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend()
    assert not spend.reserve("cy-ceiling", "2027-02-01", 2.0, 1.0)
    assert spend.spent("cy-ceiling", "2027-02-01") == 0.0


# ---- through the handlers --------------------------------------------------------------------------


def test_six_finals_of_one_person_at_once_spend_no_more_than_the_ceiling(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    most = reservation_usd(Prices(**PRICES), 200, 4.0, 1024)  # about what each request reserves
    ceiling = 2.5 * most
    _ceiling(monkeypatch, ceiling)
    conns = [conductor.connect(principal=PERSON) for _ in range(6)]
    for conn in conns:
        conductor.start_session(conn)
    for _ in conns:  # each request really costs about half its most
        conductor.script.push(message("Sure.", input_tokens=3_000, output_tokens=400))
    finals = [conductor.send_in_background(conn, "userAudioTranscriptFinal", {"text": "hello"}) for conn in conns]
    for thread in finals:
        thread.join(60)
    conductor.wait_for_turns()
    assert _spent(dynamodb, PERSON) <= ceiling
    asked = len(conductor.script.requests)
    assert 1 <= asked <= 5
    refused = [
        conn
        for conn in conns
        if any(
            isinstance(e.payload, ErrorPayload) and e.payload.code == "budget_exceeded" for e in conductor.events(conn)
        )
    ]
    assert len(refused) == 6 - asked  # every final not answered heard why
    for conn in refused:
        spoken = [
            json.loads(e.payload.arguments)["text"]
            for e in conductor.events(conn)
            if isinstance(e.payload, ToolCall) and e.payload.name == "tts.speak"
        ]
        assert spoken[-1] == budget_line(time.time())


def test_a_tool_round_past_the_ceiling_asks_the_model_nothing_more(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    most = reservation_usd(Prices(**PRICES), 200, 4.0, 1024)
    _ceiling(monkeypatch, 1.5 * most)
    conductor.script.push(
        message("Opening it.", tool_call("editor.openFile", {"path": "a.swift"}, call_id="c1"), input_tokens=50_000)
    )
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "open a.swift")
    assert _spent(dynamodb, conn.session_id) > 1.5 * most  # the first request cost more than it held
    conductor.answer(conn, "c1", '{"opened":true}')
    assert len(conductor.script.requests) == 1  # the round's result asked the model nothing
    assert codes(conductor, conn) == ["budget_exceeded"]


def test_the_spend_is_each_requests_real_cost_once_settled(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    _ceiling(monkeypatch, 5.0)
    conductor.script.push(
        message("Opening it.", tool_call("editor.openFile", {"path": "a.swift"}, call_id="c1"), input_tokens=1200),
        message("It is open.", input_tokens=1350, output_tokens=7),
    )
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "open a.swift")
    conductor.answer(conn, "c1", '{"opened":true}')
    conductor.finish_turn(conn)
    usage = [e.payload for e in conductor.all_events(conn) if e.kind_name == "turnUsage"]
    assert _spent(dynamodb, conn.session_id) == pytest.approx(usage[-1].cost_usd, abs=1e-7)


# ---- speculation ------------------------------------------------------------------------------------


@pytest.fixture
def ceiling_rig(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from rig_with(moto_url, monkeypatch, prices=json.dumps(PRICES), daily_budget_usd=1.0)


def test_past_the_ceiling_a_partial_starts_no_speculative_request(ceiling_rig: Rig) -> None:
    rig = ceiling_rig
    session_id, conn = rig.connect()
    spend = rig.store.person_spend()
    spend.add(session_id, day_of(time.time()), 0.999)  # what is left holds no request's most
    rig.brain.script([*ANSWER])  # never asked
    rig.partial(conn, "what time is it")
    (task,) = rig.launches.watches()
    watching = rig.watch(task)
    rig.clock.wake()  # the words stayed the same: a speculation would start now
    assert watching.result() is None
    assert rig.brain.requests == [] and rig.prefetches == []
    assert rig.metrics.counts["RequestsOverBudget"] == 1
    state = rig.load(session_id)
    assert state.turn is None


def test_a_dropped_speculation_is_settled_at_what_it_spent(ceiling_rig: Rig) -> None:
    rig = ceiling_rig
    session_id, conn = rig.connect()
    script = rig.brain.script([*ANSWER, MessageEnd("end_turn", USAGE)], hold_at=1)
    watching = rig.speculating(conn, session_id)
    assert script.held.wait(WAIT_S)
    held = rig.store.person_spend().spent(session_id, day_of(time.time()))
    assert held > 0.01  # the speculation holds its most while it runs
    rig.final(conn, "What time is it in Paris?")  # another utterance: the speculation is dropped
    rig.clock.wake()
    rig.metrics.wait_for("SpeculationDiscardedOutputTokens")
    script.release()
    assert watching.result() is None
    spent = rig.store.person_spend().spent(session_id, day_of(time.time()))
    assert 0 < spent < 0.001  # its estimated input and the words it wrote, not its most
