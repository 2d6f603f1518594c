"""The as-deployed benchmark's inputs and its injection: every figure has a source and a sane
distribution, a hooked client really waits the drawn latency, the time-slicing adds up."""

from __future__ import annotations

import math
import statistics
from typing import Any

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse

from benchmarks import aws_latencies as aws
from benchmarks.deployed_latency import Injector, Wait, time_sliced
from conductor_local.bedrock.script import Pause


@pytest.mark.parametrize("latency", aws.every_latency(), ids=lambda latency: latency.name)
def test_every_input_has_a_source_and_a_sane_distribution(latency: aws.Latency) -> None:
    assert latency.source.startswith(("https://", "assumed:")), latency.source
    assert "assumed" in latency.source or "https://" in latency.source
    assert 0 < latency.p50_ms < latency.p99_ms <= 20 * latency.p50_ms
    assert latency.p99_ms < 10_000
    assert latency.sigma > 0


def test_the_cold_start_rate_and_the_anchors_are_sourced() -> None:
    assert 0 < aws.COLD_START_RATE < 0.2
    assert aws.COLD_START_RATE_SOURCE.startswith("https://")
    assert aws.ANCHORS and all(url.startswith("https://") for _, url in aws.ANCHORS)
    assert set(aws.MODELS) == {"dev", "prod"}
    assert aws.MODELS["prod"].first_token.p50_ms > aws.MODELS["dev"].first_token.p50_ms


def test_a_seeded_sampler_draws_the_log_normal_it_is_given() -> None:
    latency = aws.DYNAMODB["GetItem"]
    draws = [aws.Sampler(7).ms(latency) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # one seed, one draw
    sampler = aws.Sampler(11)
    many = sorted(sampler.ms(latency) for _ in range(20_000))
    assert statistics.median(many) == pytest.approx(latency.p50_ms, rel=0.05)
    assert many[int(0.99 * len(many))] == pytest.approx(latency.p99_ms, rel=0.15)


class _Stack:
    gateway = None
    bedrock_server = None


def _answered(**_: Any) -> AWSResponse:
    class Raw:
        def stream(self, **_: Any) -> Any:
            yield b"{}"

    return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 200, {}, Raw())


def test_a_hooked_client_waits_the_drawn_latency_of_its_operation() -> None:
    slept: list[float] = []
    injector = Injector(_Stack(), aws.Sampler(5), aws.MODELS["dev"], cold_rate=0, sleep=slept.append)
    client = botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    )
    injector.hook_client(client)
    client.meta.events.register("before-send", _answered)  # answers after the delay: no network
    client.get_item(TableName="t", Key={"pk": {"S": "a"}})
    client.put_item(TableName="t", Item={"pk": {"S": "a"}})
    expected = aws.Sampler(5)
    assert slept == [
        pytest.approx(expected.dynamodb_ms("GetItem") / 1000),
        pytest.approx(expected.dynamodb_ms("PutItem") / 1000),
    ]
    assert [w.kind for w in injector.waits.waits] == ["DynamoDB GetItem", "DynamoDB PutItem"]


def test_a_cold_start_adds_the_platform_init_and_the_measured_import() -> None:
    slept: list[float] = []
    injector = Injector(
        _Stack(), aws.Sampler(3), aws.MODELS["dev"], cold_rate=1.0, import_ms={"turn": 250.0}, sleep=slept.append
    )
    injector.maybe_cold("turn")
    expected = aws.Sampler(3)
    assert expected.chance(1.0)
    assert slept == [pytest.approx((expected.ms(aws.LAMBDA_INIT) + 250.0) / 1000)]
    assert injector.cold_starts == 1


def test_the_model_first_pause_is_drawn_for_the_stage_model() -> None:
    injector = Injector(_Stack(), aws.Sampler(9), aws.MODELS["prod"], sleep=lambda _: None)
    steps = [{"messageStart": {}}, Pause(0.4), {"delta": 1}, Pause(0.05), {"delta": 2}]
    drawn = injector.first_token(steps)
    expected = aws.Sampler(9).ms(aws.MODELS["prod"].first_token) / 1000
    assert drawn[1] == Pause(expected)
    assert drawn[3] == Pause(0.05)  # the pace between deltas is left alone


def test_time_slicing_splits_shared_instants_and_gives_the_model_its_own() -> None:
    waits = [Wait("a", 0.0, 0.2), Wait("b", 0.1, 0.3), Wait("model first token", 0.25, 0.6)]
    shares = time_sliced(waits, 0.0, 1.0)
    assert shares["a"] == pytest.approx(150)  # 100 alone, 100 shared with b
    assert shares["b"] == pytest.approx(100)  # 50 shared with a, 50 alone until the model's
    assert shares["model first token"] == pytest.approx(350)
    assert shares["rest"] == pytest.approx(400)
    assert math.fsum(shares.values()) == pytest.approx(1000)
