"""What a turn cost, through the handlers against the local Bedrock and moto: the ``turnUsage``
figures are Bedrock's ``metadata`` of every model request of the turn (tool rounds included), the
person's daily spend is kept per person and day (``PersonSpend``), and past the stage's ceiling a
final transcript starts no turn: ``budget_exceeded`` and one spoken line."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import boto3
import pytest

from conductor_local.bedrock.server import message, tool_call
from conductor_local.dynamodb.tables import create_tables
from lambdas import runtime
from shared.adapters.person_spend import KEPT_SECONDS, PersonSpend
from shared.adapters.store import SessionStore
from shared.core.usage import budget_line, day_of
from shared.wire.protocol import ErrorPayload, ToolCall, TurnUsage
from tests.handlers.conftest import TABLE, Harness


@pytest.fixture
def dynamodb(moto_url: str) -> Iterator[object]:
    client = boto3.client(
        "dynamodb", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    # moto's backends are shared by every moto server and mock of this process: a test elsewhere
    # that reset them took the table with it.
    create_tables(client, TABLE)
    yield client


# ---- the person's spend, in the conductor's table ----------------------------------------------


def test_person_spend_adds_per_person_and_day_and_expires_two_days_on(dynamodb: object) -> None:
    now = 1_800_000_000.0
    spend = SessionStore(dynamodb, TABLE, ttl_seconds=3600, clock=lambda: now).person_spend()
    assert isinstance(spend, PersonSpend)
    assert spend.spent("ana", "2027-01-15") == 0.0  # nothing yet: no item

    spend.add("ana", "2027-01-15", 0.0125)
    spend.add("ana", "2027-01-15", 0.0003)
    spend.add("ana", "2027-01-16", 1.0)
    spend.add("bo", "2027-01-15", 0.5)
    spend.add("ana", "2027-01-15", 0.0)  # nothing spent: nothing written

    assert spend.spent("ana", "2027-01-15") == pytest.approx(0.0128)
    assert spend.spent("ana", "2027-01-16") == pytest.approx(1.0)
    assert spend.spent("bo", "2027-01-15") == pytest.approx(0.5)
    item = dynamodb.get_item(  # type: ignore[attr-defined]
        TableName=TABLE, Key={"pk": {"S": "PERSON#ana"}, "sk": {"S": "SPEND#2027-01-15"}}
    )["Item"]
    assert int(item["expires_at"]["N"]) == int(now) + KEPT_SECONDS


def test_concurrent_turns_of_one_person_never_lose_an_addition(dynamodb: object) -> None:
    spend = SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend()
    day = "2027-02-01"

    def add_ten() -> None:
        for _ in range(10):
            spend.add("cy", day, 0.001)

    threads = [threading.Thread(target=add_ten) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert spend.spent("cy", day) == pytest.approx(0.04)


# ---- the turn's usage and the ceiling, through the handlers -------------------------------------


def _priced(monkeypatch: pytest.MonkeyPatch, ceiling: float | None = None) -> None:
    prices = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3, "as_of": "2026-01-01"}
    monkeypatch.setenv("CONDUCTOR_PRICES", json.dumps(prices))
    if ceiling is not None:
        monkeypatch.setenv("CONDUCTOR_DAILY_BUDGET_USD", str(ceiling))
    runtime.reset()


def _usages(conductor: Harness, conn: object) -> list[TurnUsage]:
    return [e.payload for e in conductor.all_events(conn) if isinstance(e.payload, TurnUsage)]  # type: ignore[arg-type]


def test_a_turns_usage_is_every_requests_metadata_tool_rounds_included(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _priced(monkeypatch)
    conductor.script.push(
        message(
            "Opening it.",
            tool_call("editor.openFile", {"path": "a.swift"}, call_id="c1"),
            input_tokens=1200,
            output_tokens=12,
        ),
        message("It is open.", input_tokens=1350, output_tokens=7),
    )
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "open a.swift")
    conductor.answer(conn, "c1", '{"opened":true}')
    conductor.finish_turn(conn)

    (usage,) = _usages(conductor, conn)
    assert usage.requests == 2 == len(conductor.script.requests)  # both model requests of the turn
    assert (usage.input_tokens, usage.output_tokens) == (1200 + 1350, 12 + 7)  # each one's metadata, summed
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (0, 0)
    assert usage.cost_usd == pytest.approx((2550 * 3.0 + 19 * 15.0) / 1_000_000)
    assert usage.prices_as_of == "2026-01-01"
    assert usage.end_ms >= (usage.first_speak_ms or 0) >= (usage.first_partial_ms or 0)


def test_past_the_daily_ceiling_the_turn_is_refused_and_the_line_spoken(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    # The first request's most fits under the ceiling; what it really cost is past it.
    _priced(monkeypatch, ceiling=0.05)
    conductor.script.push(message("Hi there.", input_tokens=50_000, output_tokens=3))
    conn = conductor.connect()  # no sign-in: the person is the session
    conductor.start_session(conn)
    conductor.say(conn, "hello")
    conductor.finish_turn(conn)
    (first,) = _usages(conductor, conn)
    assert first.cost_usd == pytest.approx((50_000 * 3.0 + 3 * 15.0) / 1_000_000)
    spend = SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend()
    assert spend.spent(conn.session_id, day_of(time.time())) == pytest.approx(first.cost_usd)
    requests = len(conductor.script.requests)

    mark = len(conductor.events(conn))
    conductor.say(conn, "and again")
    later = conductor.events(conn)[mark:]
    assert [e.payload.code for e in later if isinstance(e.payload, ErrorPayload)] == ["budget_exceeded"]
    spoken = [
        json.loads(e.payload.arguments)["text"]
        for e in later
        if isinstance(e.payload, ToolCall) and e.payload.name == "tts.speak"
    ]
    assert spoken == [budget_line(time.time())]
    assert len(conductor.script.requests) == requests  # no model request, no turn
    assert not [e for e in later if isinstance(e.payload, TurnUsage)]


def test_without_a_ceiling_no_spend_is_kept(
    conductor: Harness, monkeypatch: pytest.MonkeyPatch, dynamodb: object
) -> None:
    _priced(monkeypatch)
    conductor.script.push(message("Hi there.", input_tokens=500, output_tokens=3))
    conn = conductor.connect()
    conductor.start_session(conn)
    conductor.say(conn, "hello")
    conductor.finish_turn(conn)
    assert _usages(conductor, conn)[0].cost_usd
    assert (
        SessionStore(dynamodb, TABLE, ttl_seconds=3600).person_spend().spent(conn.session_id, day_of(time.time())) == 0
    )
