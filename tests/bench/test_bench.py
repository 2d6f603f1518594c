"""The hot-path benchmark's own arithmetic (capacity units, chains, metered messages, costs) and one
measured turn on a local stack, so ``make bench`` keeps working as the stack changes."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.barge_in import barge_in_turns
from benchmarks.bench_stack import bench_stack
from benchmarks.capacity import item_size, read_units, write_units
from benchmarks.costs import PRICES, TurnUsage, cost_per_1000, stages, websocket_messages
from benchmarks.load import sessions_in_own_process
from benchmarks.measured_turn import blocking_chain, longest_chain
from benchmarks.meters import DynamoRequest, ModelStream
from benchmarks.speculation import REQUESTS, Flow, differs, speculation_turns
from benchmarks.turn_latency import (
    PLAIN,
    RAMBLE,
    Scenario,
    run_scenario,
)
from conductor_local.bedrock.offline_brain import ModelPace
from conductor_local.stack import LocalStack


def test_item_sizes_follow_dynamodbs_rules() -> None:
    assert item_size({"ab": {"S": "héllo"}}) == 2 + 6  # names and strings count their UTF-8 bytes
    assert item_size({"n": {"N": "123"}}) == 1 + 2 + 1  # a byte per two significant digits, plus one
    assert item_size({"n": {"N": "-0.0100"}}) == 1 + 1 + 1  # leading and trailing zeros trimmed
    assert item_size({"b": {"B": "AAEC"}}) == 1 + 3  # raw bytes, not base64
    assert item_size({"t": {"BOOL": True}, "z": {"NULL": True}}) == 2 + 2
    assert item_size({"l": {"L": [{"S": "ab"}]}}) == 1 + 3 + 2 + 1  # 3 bytes + 1 per element
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + 1 + 1 + 1
    assert item_size({"s": {"SS": ["a", "bc"]}}) == 1 + 3
    assert item_size(None) == 0


def test_capacity_units_round_up_per_request() -> None:
    assert write_units(0, 1024) == 1 and write_units(1025, 10) == 2  # the larger of before and after
    assert write_units(0, 0) == 1  # a write always costs at least one unit
    assert write_units(1500, 0, transactional=True) == 4
    assert read_units(4096, consistent=True) == 1 and read_units(4097, consistent=True) == 2
    assert read_units(100, consistent=False) == 0.5
    assert read_units(0, consistent=True) == 1  # reading nothing still costs a unit
    assert read_units(5000, consistent=True, transactional=True) == 4


def test_the_blocking_chain_counts_requests_one_after_another() -> None:
    def request(start: float, end: float) -> DynamoRequest:
        return DynamoRequest("GetItem", start, end)

    assert longest_chain([]) == 0
    assert longest_chain([request(0, 1), request(0.5, 1.5), request(2, 3)]) == 2  # two overlap
    assert longest_chain([request(0, 1), request(1, 2), request(2, 3)]) == 3


def test_requests_in_the_models_shadow_are_not_blocking() -> None:
    def request(start: float, end: float) -> DynamoRequest:
        return DynamoRequest("GetItem", start, end)

    stream = ModelStream(requested=2.0, first_text=6.0)
    state, commit, claim, late_check = request(0, 1), request(1, 2), request(2.1, 3), request(6, 6.5)
    assert blocking_chain([state, commit, claim, late_check], [stream], [2.0], partial_at=7.0) == 3  # not the claim
    assert blocking_chain([state, commit, claim], [], [], partial_at=7.0) == 3  # no model: all of them
    # the model request went out (client side) before the endpoint got it: a claim issued after it
    # and answered before the endpoint's clock started is in the model's shadow too
    reached_late = ModelStream(requested=2.2, first_text=6.0)
    quick_claim = request(2.05, 2.15)
    assert blocking_chain([state, commit, quick_claim], [reached_late], [2.0], partial_at=7.0) == 2
    assert blocking_chain([state, commit, quick_claim], [reached_late], [], partial_at=7.0) == 3


def test_websocket_messages_are_metered_in_32_kb_increments() -> None:
    assert websocket_messages([0, 100, 32 * 1024]) == 3
    assert websocket_messages([32 * 1024 + 1]) == 2


def test_costs_use_the_stage_memory_and_the_cache_prices() -> None:
    dev, prod = stages()
    usage = TurnUsage(
        turns=1,
        message_bytes=[10, 10],
        lambda_invocations={"turn": 1},
        lambda_seconds={"turn": 2.0},
        input_tokens=5000,
        output_tokens=100,
        cacheable_tokens=4800,  # over both stages' caching minimums (Haiku 5.5: 4,096; Sonnet 5.5: 2,048)
    )
    dev_cost, prod_cost = cost_per_1000(usage, dev), cost_per_1000(usage, prod)
    assert dev_cost["apigw"] == pytest.approx(2 * PRICES["apigw_message"] * 1000)
    for stage, cost in ((dev, dev_cost), (prod, prod_cost)):
        gb_s = 2.0 * stage.memory_mb["turn"] / 1024
        assert cost["lambda"] == pytest.approx((gb_s * PRICES["lambda_gb_s"] + PRICES["lambda_request"]) * 1000)
    model = prod.model
    assert prod_cost["bedrock"] == pytest.approx(
        (5000 * PRICES[f"{model}:input"] + 100 * PRICES[f"{model}:output"]) * 1000
    )
    assert prod_cost["bedrock_cached"] == pytest.approx(
        (200 * PRICES[f"{model}:input"] + 4800 * PRICES[f"{model}:cache_read"] + 100 * PRICES[f"{model}:output"]) * 1000
    )


def test_a_prefix_under_the_models_caching_minimum_is_priced_as_plain_input() -> None:
    dev, prod = stages()
    usage = TurnUsage(turns=1, input_tokens=3000, output_tokens=100, cacheable_tokens=2800)
    dev_cost, prod_cost = cost_per_1000(usage, dev), cost_per_1000(usage, prod)
    assert dev_cost["bedrock_cached"] == pytest.approx(dev_cost["bedrock"])  # Haiku 5.5 caches from 4,096 tokens
    assert prod_cost["bedrock_cached"] < prod_cost["bedrock"]  # Sonnet 5.5 from 2,048


def test_one_measured_turn_on_a_local_stack() -> None:
    with bench_stack(None, naive=False) as bench:
        plain = asyncio.run(run_scenario(bench, Scenario("plain", PLAIN, 1)))
        long = asyncio.run(run_scenario(bench, Scenario("long", RAMBLE, 1)))

    (turn,) = plain.turns
    assert turn.completed and turn.final_complete
    assert turn.first_partial_ms is not None and turn.first_speak_ms is not None
    assert turn.dynamo and all(r.ended >= r.started for r in turn.dynamo)
    assert sum(r.wru for r in turn.dynamo) >= 1 and sum(r.rru for r in turn.dynamo) >= 1
    assert turn.blocking is not None and 1 <= turn.blocking <= len(turn.dynamo)
    assert any(p.kind == "assistantSpeechPartial" for p in turn.posts)
    assert any(p.kind == "toolCall:tts.speak" for p in turn.posts)
    assert len(turn.streams) == 1 and turn.streams[0].text == f"You said: {PLAIN}"
    assert {function for function, _, _ in turn.lambda_calls} >= {"message", "turn"}
    (long_turn,) = long.turns
    assert long_turn.completed and long_turn.final_complete
    assert sum(p.kind == "assistantSpeechPartial" for p in long_turn.posts) < 100  # partials are coalesced


def test_a_barge_in_is_measured_on_a_local_stack() -> None:
    pace = ModelPace(first_token_s=0.05, tokens_per_s=300)  # ramble 400: about 4 s
    with bench_stack(pace, naive=False) as bench:
        (plain,) = asyncio.run(barge_in_turns(bench, 1, 0.0, sentence_speech=False, after_s=0.5))
        (speaking,) = asyncio.run(barge_in_turns(bench, 1, 0.0, sentence_speech=True, after_s=0.5))
        streams = bench.model.since(0)
    for turn in (plain, speaking):
        assert turn.to_idle_ms is not None and turn.to_idle_ms >= 0
        assert turn.partials_after <= 1  # at most one already on its way
        assert turn.model_after_ms >= 0 and turn.model_chars_after >= 0
    # both answers were stopped long before their end: the stream's text is far from 400 deltas
    assert all(stream.ended is None for stream in streams[-2:]), "a stream was read to its end"


def test_finals_that_differ_are_spread_evenly_over_the_turns() -> None:
    assert [differs(i, 0.3) for i in range(10)].count(True) == 3
    assert sum(differs(i, 0.3) for i in range(40)) == 12
    assert not any(differs(i, 0.0) for i in range(40)) and all(differs(i, 1.0) for i in range(40))


def test_speculative_turns_are_measured_on_a_local_stack() -> None:
    flow = Flow("every other final differs", speculation=True, differ=0.5)
    pace = ModelPace(first_token_s=0.1, tokens_per_s=300)
    with bench_stack(pace, naive=False, extra_env=flow.env) as bench:
        run = asyncio.run(speculation_turns(bench, flow, 2, 1))

    matching, revised = run.turns
    assert not matching.differs and revised.differs
    assert all(turn.completed and turn.answered_final for turn in run.turns)
    assert run.counts["TurnsSpeculated"] == 2 and run.counts["TurnsPromoted"] == 1  # the greeting left out
    # the promoted stream was asked before the final; the revised final's own stream after it, the
    # speculation on its last partial discarded (at the endpoint and as the watcher counts it; a
    # partial that came late may have started one more)
    assert matching.asked_ms is not None and matching.asked_ms < 0
    assert revised.asked_ms is not None and revised.asked_ms > 0
    thrown = revised.discarded[-1]
    assert thrown.asked == REQUESTS[1][0] and thrown.input_tokens > thrown.prefix_tokens > 0
    assert run.counts["SpeculationsDiscarded"] == len(run.discarded()) >= 1


def test_the_stack_streams_at_the_pace_asked() -> None:
    pace = ModelPace(first_token_s=0.01, tokens_per_s=10_000)
    with bench_stack(pace, naive=False) as bench:
        assert bench.stack.bedrock_server is not None
        assert bench.stack.model_pace == pace
        plain = asyncio.run(run_scenario(bench, Scenario("plain", PLAIN, 1)))
    (turn,) = plain.turns
    assert turn.completed and turn.final_complete
    assert [len(s.text) for s in turn.streams] == [len(f"You said: {PLAIN}")]


def test_sessions_at_once_from_their_own_process_against_a_stack_of_service_processes() -> None:
    with LocalStack(port=0, quiet=True, service_processes=True) as stack:
        run = sessions_in_own_process(stack.ws_url, 3, 2)
        runner_cpu = stack.lambda_server.cpu_seconds()
        stored = stack.dynamodb_client().scan(TableName=stack.table_name, Select="COUNT")["Count"]
    assert stored >= 3 * 3, "the sessions' state and history live in the DynamoDB process"
    turns = run.turns
    assert len(turns) == 6 and run.seconds > 0 and run.apps_cpu_s > 0
    assert all(turn.completed and turn.final_complete for turn in turns), turns
    assert all(turn.first_partial_ms is not None for turn in turns)
    assert runner_cpu is None or runner_cpu > 0  # the turn runner ran in its own process
