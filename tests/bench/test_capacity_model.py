"""The capacity model's arithmetic: people per limit from given per-speaker figures, which limit
binds first, what holding a target takes, the cost of an hour, and the quota table's sources."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest

from benchmarks import aws_quotas
from benchmarks.capacity_model import (
    SpeakerFigures,
    StageView,
    account_quotas,
    capacity,
    changes_to_hold,
    cost_per_user_hour,
    limits,
    stage_view,
    tpm_per_speaker,
    unreserved_pool,
)
from benchmarks.capacity_report import report_stage
from benchmarks.costs import PRICES


def figures(**overrides: object) -> SpeakerFigures:
    """One speaker: 60 route requests and 120 posts a minute (1 and 2 a second), a turn function
    execution held 30 s a minute (0.5 at once), $default 6 s (0.1), 6,000 input and 200 output
    tokens a minute, 600 WRU and 120 RRU a minute."""
    base = SpeakerFigures(
        speculation=True,
        minutes=1.0,
        turns=4,
        ws_in=58,
        ws_in_messages=58,
        posts=120,
        ws_out_messages=120,
        connects=2,
        disconnects=2,
        invocations={"message": 58, "turn": 4, "watcher": 4, "connect": 2, "disconnect": 2},
        seconds={"message": 6.0, "turn": 12.0, "watcher": 18.0, "connect": 0.3, "disconnect": 0.3},
        dynamodb_requests=200,
        rru=120,
        wru=600,
        index_wru=60,
        bedrock_requests=5,
        input_tokens=6_000,
        output_tokens=200,
        stream_seconds=0.0,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def stage(**overrides: object) -> StageView:
    base = StageView(
        name="prod",
        model="anthropic.claude-sonnet-5-5",
        max_tokens=2048,
        speculation=True,
        auth="cognito",
        rate_limit=100,
        burst_limit=200,
        turn_reserved=1500,
        message_reserved=None,
        planned_concurrency=3000,
        memory_mb={"message": 512, "turn": 1024, "watcher": 1024, "connect": 256, "disconnect": 256},
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def by_name(found: list, start: str):  # type: ignore[no-untyped-def]
    (limit,) = [limit for limit in found if limit.name.startswith(start)]
    return limit


def test_each_limit_divides_by_what_one_speaker_uses_of_it() -> None:
    found = limits(stage(), figures())
    route = by_name(found, "API Gateway route throttle")
    assert route.per_speaker == pytest.approx(1.0)  # (58 frames + 2 connects) / 60 s
    assert route.people == pytest.approx(100)
    account = by_name(found, "API Gateway account throttle")
    assert account.per_speaker == pytest.approx(3.0)  # route requests and posts share it
    assert account.people == pytest.approx(10_000 / 3)
    turn = by_name(found, "Lambda turn function reserved")
    assert turn.per_speaker == pytest.approx(0.5)  # (12 + 18) s a minute: runner and watcher together
    assert turn.people == pytest.approx(3000)
    pool = by_name(found, "Lambda unreserved pool")
    assert pool.value == 1500  # 3,000 less the turn function's 1,500
    assert pool.per_speaker == pytest.approx((6.0 + 0.3 + 0.3) / 60)
    assert by_name(found, "DynamoDB table write").people == pytest.approx(40_000 / 10)
    assert by_name(found, "DynamoDB table read").people == pytest.approx(40_000 / 2)
    assert by_name(found, "API Gateway new connections").people == pytest.approx(500 / (2 / 60))


def test_bedrock_tokens_count_output_at_the_burndown_rate_and_reservations_in_flight() -> None:
    assert aws_quotas.value("bedrock_output_burndown") == 5
    assert tpm_per_speaker(figures(), 2048) == pytest.approx(6_000 + 5 * 200)
    # a stream in flight 30 s of every minute holds max_tokens half the time
    assert tpm_per_speaker(figures(stream_seconds=30.0), 2048) == pytest.approx(7_000 + 1024)
    bedrock = by_name(limits(stage(), figures()), "Bedrock tokens per minute")
    assert bedrock.value == aws_quotas.value("bedrock_tpm:anthropic.claude-sonnet-5-5")
    assert bedrock.people == pytest.approx(bedrock.value / 7_000)
    assert bedrock.basis == "assumed"  # no documented default for Claude Sonnet 5.5


def test_cache_writes_count_against_the_token_quota_and_cache_reads_do_not() -> None:
    """AWS, "How tokens are counted in Amazon Bedrock": InputTokenCount + CacheWriteInputTokens +
    OutputTokenCount x burndown; CacheReadInputTokens are not counted."""
    cached = figures(cache_read_tokens=50_000, cache_write_tokens=1_000)
    assert tpm_per_speaker(cached, 2048) == pytest.approx(6_000 + 1_000 + 5 * 200)
    assert tpm_per_speaker(figures(cache_read_tokens=1_000_000), 2048) == tpm_per_speaker(figures(), 2048)


def test_the_bedrock_quotas_a_stage_states_replace_the_defaults() -> None:
    stated = stage(bedrock_tpm=20_000_000, bedrock_rpm=15_000)
    found = limits(stated, figures())
    tokens = by_name(found, "Bedrock tokens per minute")
    assert (tokens.value, tokens.basis, tokens.setting) == (20_000_000, "stated", "cdk.json bedrock.tokens_per_minute")
    requests = by_name(found, "Bedrock requests per minute")
    assert (requests.value, requests.basis) == (15_000, "stated")
    assert requests.per_speaker == 5  # the speaker's requests a minute
    assert requests.people == pytest.approx(3_000)
    # Not stated: no requests-per-minute default is documented for the model, so none is assumed.
    assert not [limit for limit in limits(stage(), figures()) if limit.name.startswith("Bedrock requests")]
    assert by_name(found, "API Gateway route throttle").basis == "setting"
    assert by_name(found, "DynamoDB table read").basis == "default"
    assert by_name(found, "Lambda unreserved pool").basis == "stated"
    assert by_name(limits(stage(planned_concurrency=None), figures()), "Lambda unreserved pool").basis == "default"


def test_holding_a_target_beyond_a_stated_bedrock_quota_names_the_setting_and_the_request() -> None:
    stated = stage(rate_limit=10_000, burst_limit=5_000, bedrock_tpm=2_000_000, bedrock_rpm=1_000)
    changes = {change.setting: change for change in changes_to_hold(stated, figures(), 1000)}
    tokens = changes["cdk.json bedrock.tokens_per_minute"]
    assert (tokens.current, tokens.needed) == (2_000_000, 7_000_000)
    assert tokens.how.startswith("bedrock.tokens_per_minute 7000000, after Service Quotas request:")
    assert "Cross-Region InvokeModel tokens per minute for Anthropic Claude Sonnet 5.5" in tokens.how
    requests = changes["cdk.json bedrock.requests_per_minute"]
    assert (requests.current, requests.needed) == (1_000, 5_000)
    assert "Cross-Region InvokeModel requests per minute for Anthropic Claude Sonnet 5.5" in requests.how
    roomy = stage(rate_limit=10_000, burst_limit=5_000, bedrock_tpm=8_000_000, bedrock_rpm=6_000)
    assert not changes_to_hold(roomy, figures(), 1000)


def test_the_smallest_limit_binds_and_the_next_two_follow_in_order() -> None:
    result = capacity(stage(), figures())
    people = [limit.people for limit in result.ranked]
    assert people == sorted(people)
    assert result.people == people[0]
    assert result.binding[0].name.startswith("API Gateway route throttle")  # 100 people
    assert result.binding[1].name.startswith("Bedrock tokens per minute")  # 1,000,000 / 7,000 = 142
    assert len(result.binding) == 3


def test_raising_the_binding_limit_moves_the_binding_to_the_next() -> None:
    result = capacity(stage(rate_limit=10_000, burst_limit=5_000), figures())
    assert result.binding[0].name.startswith("Bedrock tokens per minute")
    assert result.people == pytest.approx(1_000_000 / 7_000)


def test_without_a_reservation_the_turn_function_runs_in_the_unreserved_pool() -> None:
    dev = stage(name="dev", turn_reserved=None, planned_concurrency=1000)
    found = limits(dev, figures())
    assert not [limit for limit in found if limit.name.startswith("Lambda turn function reserved")]
    pool = by_name(found, "Lambda unreserved pool")
    assert pool.value == 1000 == unreserved_pool(dev, account_quotas(dev, "stated"))
    assert pool.per_speaker == pytest.approx((6.0 + 12.0 + 18.0 + 0.3 + 0.3) / 60)


def test_an_open_stage_shares_one_partition_of_the_sessions_index() -> None:
    open_stage = limits(stage(auth="none"), figures(index_wru=600))
    assert by_name(open_stage, "DynamoDB sessions index partition").people == pytest.approx(1000 / 10)
    assert not [limit for limit in limits(stage(), figures()) if "partition" in limit.name]


def test_what_holding_a_target_takes_is_computed_from_the_figures() -> None:
    changes = {change.setting: change for change in changes_to_hold(stage(), figures(), 1000)}
    assert changes["throttle.rate_limit"].needed == 1000  # 1 request a second each
    assert changes["throttle.burst_limit"].needed == 2000
    assert "bedrock_tpm:anthropic.claude-sonnet-5-5" in changes
    assert changes["bedrock_tpm:anthropic.claude-sonnet-5-5"].needed == 7_000_000
    planned = "cdk.json lambdas.planned_account_concurrency"
    assert "lambdas.turn_reserved_concurrency" not in changes  # 1,000 x 0.5 = 500 <= 1,500
    assert planned not in changes
    more = {change.setting: change for change in changes_to_hold(stage(), figures(), 4000)}
    assert more["lambdas.turn_reserved_concurrency"].needed == 2000
    assert planned not in more  # 2,000 reserved + 4,000 x 0.11 = 440 fit in 3,000
    assert "L-8A5B8E43" in more["apigw_account_rps"].how  # 4,000 x 3 = 12,000 > 10,000 requests/s
    most = {change.setting: change for change in changes_to_hold(stage(), figures(), 8000)}
    assert most[planned].needed == 4000 + 880  # the reservation and the pool
    assert "L-B99A9384" in most[planned].how
    assert most[planned].how.startswith("cdk.json: lambdas.planned_account_concurrency 4880, after")
    assert not changes_to_hold(stage(), figures(), 50)


def test_an_hour_costs_sixty_minutes_of_each_service_at_list_prices() -> None:
    cost = cost_per_user_hour(stage(), figures())
    assert cost["API Gateway"] == pytest.approx(
        60 * (178 * PRICES["apigw_message"] + PRICES["apigw_connection_minute"])
    )
    gb_s = 6.0 * 0.5 + 30.0 * 1.0 + 0.6 * 0.25
    assert cost["Lambda"] == pytest.approx(60 * (gb_s * PRICES["lambda_gb_s"] + 70 * PRICES["lambda_request"]))
    assert cost["DynamoDB"] == pytest.approx(60 * (120 * PRICES["dynamodb_rru"] + 660 * PRICES["dynamodb_wru"]))
    model = "anthropic.claude-sonnet-5-5"
    assert cost["Bedrock"] == pytest.approx(60 * (6000 * PRICES[f"{model}:input"] + 200 * PRICES[f"{model}:output"]))


def test_a_speaker_using_nothing_of_a_limit_is_never_bound_by_it() -> None:
    found = limits(stage(), figures(connects=0.0))
    assert math.isinf(by_name(found, "API Gateway new connections").people)


def test_the_report_names_the_binding_limit_and_what_to_raise() -> None:
    out = io.StringIO()
    report_stage(stage(), figures(), out, target=1000)
    text = out.getvalue()
    assert "== prod: 100 people speaking at once at AWS defaults; no reading; 100 on the stated quotas" in text
    assert "raise throttle.rate_limit from 100 to 1,000" in text
    assert "1,000,000 [assumed]" in text  # no documented Bedrock default for Claude Sonnet 5.5
    stated = io.StringIO()
    report_stage(
        stage(bedrock_tpm=20_000_000, bedrock_rpm=15_000, max_turns_per_minute=3), figures(), stated, target=10
    )
    text = stated.getvalue()
    assert "20,000,000 [stated]" in text and "15,000 [stated]" in text
    assert "max_turns_per_minute 3 is below the speaker's 4.0 turns a minute" in text


def test_the_stages_of_cdk_json_are_read_through_the_stage_config() -> None:
    from infra.config import read_cdk_json_context, select_stage

    settings = dict(read_cdk_json_context()["stages"]["dev"])
    settings["throttle"] = {"rate_limit": 4, "burst_limit": 8}
    settings["speculation"] = {"enabled": False}
    settings["lambdas"] = {**settings.get("lambdas", {}), "planned_account_concurrency": None}
    settings["lambdas"].pop("turn_reserved_concurrency", None)
    settings["lambdas"].pop("reserved_concurrency", None)
    view = stage_view(select_stage({"x": settings}, "x"))
    assert view.name == "x" and not view.model.startswith("us.")  # the foundation model, priced and quoted
    assert (view.rate_limit, view.burst_limit, view.speculation) == (4, 8, False)
    assert view.turn_reserved is None and view.message_reserved is None
    assert view.planned_concurrency is None
    assert (view.bedrock_tpm, view.bedrock_rpm) == (None, None)
    settings["bedrock"] = {**settings["bedrock"], "tokens_per_minute": 2_400_000, "requests_per_minute": 600}
    settings["max_turns_per_minute"] = 12
    view = stage_view(select_stage({"x": settings}, "x"))
    assert (view.bedrock_tpm, view.bedrock_rpm, view.max_turns_per_minute) == (2_400_000, 600, 12)


def test_every_quota_names_its_source_and_undocumented_values_say_so() -> None:
    for quota in aws_quotas.QUOTAS.values():
        assert quota.source_url.startswith("https://") and quota.source_title
        if not quota.documented:
            assert quota.note
    assert aws_quotas.quota("apigw_account_rps").code == "L-8A5B8E43"
    assert aws_quotas.quota("lambda_concurrency").code == "L-B99A9384"
    with pytest.raises(ValueError, match="no default to assume"):
        aws_quotas.value("bedrock_rpm:anthropic.claude-sonnet-5-5")
    assert aws_quotas.bedrock_rpm("anthropic.claude-sonnet-5-5") is not None


def test_figures_survive_a_json_round_trip() -> None:
    measured = figures()
    assert SpeakerFigures.from_json(measured.to_json()) == measured


# ---- the three columns: AWS defaults, doctor's reading, the stated plans -----------------------------

PINNED = "123456789012"
PROFILE = "us.anthropic.claude-sonnet-5-5"


def reading(lambda_concurrency: int | None = 2000, tpm: int | None = 2_000_000):  # type: ignore[no-untyped-def]
    from infra.quota_readings import BedrockReading, QuotaReading

    return QuotaReading(
        PINNED,
        "us-east-1",
        "2026-11-28T12:00:00Z",
        lambda_concurrency=lambda_concurrency,
        bedrock={PROFILE: BedrockReading(tokens_per_minute=tpm)},
    )


def pinned(**overrides: object) -> StageView:
    base = {
        "rate_limit": 10_000,
        "burst_limit": 5_000,
        "bedrock_tpm": 20_000_000,
        "account": PINNED,
        "model_id": PROFILE,
    }
    return stage(**(base | overrides))


def test_each_column_holds_the_stage_to_its_own_quotas() -> None:
    prod = pinned()
    defaults = account_quotas(prod, "defaults")
    assert defaults is not None
    assert (defaults.lambda_concurrency.value, defaults.lambda_concurrency.basis) == (1000, "default")
    assert (defaults.bedrock_tpm.value, defaults.bedrock_tpm.basis) == (1_000_000, "assumed")
    assert not defaults.reserves  # without a reading synth reserves nothing
    assert account_quotas(prod, "read", None) is None
    read = account_quotas(prod, "read", reading())
    assert read is not None
    assert (read.lambda_concurrency.value, read.lambda_concurrency.basis) == (2000, "read")
    assert (read.bedrock_tpm.value, read.bedrock_tpm.basis) == (2_000_000, "read")
    assert read.bedrock_rpm.value is None  # not read and no documented default: not held to one
    assert read.reserves  # 1,500 leaves 500 of 2,000 unreserved
    stated = account_quotas(prod, "stated")
    assert stated is not None
    assert (stated.bedrock_tpm.value, stated.bedrock_tpm.basis) == (20_000_000, "stated")
    assert (stated.lambda_concurrency.value, stated.lambda_concurrency.basis) == (3000, "stated")
    people = {quotas.column: capacity(prod, figures(), quotas).people for quotas in (defaults, read, stated)}
    # 7,000 quota tokens a minute each: the Bedrock quota binds in every column
    assert people == pytest.approx(
        {"defaults": 1_000_000 / 7000, "read": 2_000_000 / 7000, "stated": 20_000_000 / 7000}
    )


def test_without_a_reading_the_turn_function_shares_the_pool_and_a_reading_too_small_is_refused() -> None:
    prod = pinned()
    defaults = account_quotas(prod, "defaults")
    assert defaults is not None
    found = limits(prod, figures(), defaults)
    assert not [limit for limit in found if limit.key == "turn_reserved"]
    pool = by_name(found, "Lambda unreserved pool")
    assert pool.value == 1000 and pool.per_speaker == pytest.approx((6.0 + 12.0 + 18.0 + 0.3 + 0.3) / 60)
    small = account_quotas(prod, "read", reading(lambda_concurrency=1000))
    assert small is not None and not small.reserves
    assert "synth refuses" in small.note  # 1,500 reserved would leave less than 100 of 1,000
    unread = account_quotas(prod, "read", reading(lambda_concurrency=None))
    assert unread is not None and not unread.reserves
    assert unread.lambda_concurrency.basis == "default"


def test_the_first_aws_quota_to_bind_is_named_apart_from_the_stages_own_settings() -> None:
    result = capacity(stage(), figures())  # the route throttle (100/s) binds first: a setting
    assert result.ranked[0].key == "route" and result.ranked[0].kind == "setting"
    assert result.first_quota is not None
    assert result.first_quota.key == "bedrock_tpm" and result.first_quota.kind == "quota"
    reserved = capacity(stage(rate_limit=10_000, burst_limit=5_000, turn_reserved=20), figures())
    assert reserved.ranked[0].key == "turn_reserved"  # 20 / 0.5 = 40 people: the stage's own reservation
    assert reserved.first_quota is not None and reserved.first_quota.key == "bedrock_tpm"


def test_requests_in_flight_hold_the_max_tokens_the_request_really_carries() -> None:
    from benchmarks.capacity_model import request_max_tokens

    assert request_max_tokens(PROFILE, 2048, "low", "off") == 2048 + 4096  # Sonnet 5.5 thinks between tools
    assert request_max_tokens("us.anthropic.claude-haiku-5-5", 1024, "low", "off") == 1024
    held = stage(request_max_tokens=6144)
    tokens = by_name(limits(held, figures(stream_seconds=30.0)), "Bedrock tokens per minute")
    assert tokens.per_speaker == pytest.approx(7_000 + 0.5 * 6144)
    # cache reads count while a request is in flight, not once it is settled
    cached = figures(stream_seconds=30.0, bedrock_requests=5, cache_read_tokens=5_000)
    assert tpm_per_speaker(cached, 6144) == pytest.approx(7_000 + 0.5 * (6144 + 1_000))


def test_the_report_prints_three_columns_and_the_binding_aws_quota() -> None:
    out = io.StringIO()
    report_stage(pinned(), figures(), out, target=1000, reading=reading())
    text = out.getvalue()
    assert "== prod: 142 people speaking at once at AWS defaults; 285 on what doctor read; 2,857 on the stated" in text
    for title in ("AWS defaults", "doctor's reading", "stated, unconfirmed"):
        assert title in text
    assert "first AWS quota to bind" in text and "Bedrock tokens/min at 142" in text
    assert "Bedrock tokens/min at 285" in text and "Bedrock tokens/min at 2,857" in text
    unread = io.StringIO()
    report_stage(pinned(account=None), figures(), unread, target=1000)
    assert "no reading" in unread.getvalue()
    assert "account: not pinned (stages.prod.account)" in unread.getvalue()


def test_each_stage_takes_the_figures_measured_with_its_model_and_speculation() -> None:
    from benchmarks.capacity_report import figures_for

    haiku = figures(model="anthropic.claude-haiku-5-5")
    sonnet = figures(model="anthropic.claude-sonnet-5-5")
    sonnet_off = figures(model="anthropic.claude-sonnet-5-5", speculation=False)
    measured = [haiku, sonnet_off, sonnet]
    assert figures_for(stage(), measured) is sonnet
    assert figures_for(stage(speculation=False), measured) is sonnet_off
    assert figures_for(stage(model="anthropic.claude-opus-5-5"), measured) is haiku  # its speculation setting


# ---- long-term memory (AgentCore Memory) --------------------------------------------------------------


def test_a_session_of_n_turns_writes_n_events_and_retrieves_at_its_start_and_per_search() -> None:
    from benchmarks import capacity_memory as memory

    a = memory.MemoryAssumptions(turns_per_search=20, turns_per_write=100)
    used = memory.session_usage(200, a)
    assert used.events == 200  # one CreateEvent per committed turn
    assert used.retrievals == pytest.approx(1 + 200 / 20 + 200 / 100)  # start, searches, writes' checks
    assert used.record_writes == pytest.approx(2)
    assert used.extraction_tokens == pytest.approx(200 * a.event_tokens * 3)  # each strategy reads each event
    no_search = memory.session_usage(200, memory.MemoryAssumptions(turns_per_search=math.inf, turns_per_write=math.inf))
    assert no_search.retrievals == 1


def test_memory_costs_events_by_the_billed_gigabyte_retrievals_and_a_share_of_the_records() -> None:
    from benchmarks import capacity_memory as memory
    from benchmarks.costs import event_billed_bytes

    assert event_billed_bytes(300) == 12_000  # a spoken turn counts as 12 KB
    assert event_billed_bytes(100_000) == 64_000  # and a large event as 64 KB at most
    a = memory.MemoryAssumptions(event_bytes=1_000, event_retention_days=73, active_hours_per_month=20)
    used = memory.hour_usage(10.0, a)  # 10 turns a minute: 600 events, 2 sessions of 30 minutes
    assert (used.events, used.sessions) == (600, 2)
    cost = memory.cost(used, a)
    ingest = 600 * 12_000 / 1e9 * PRICES["agentcore_event_ingest_gb"]
    storage = 600 * 1_000 / 1e9 * PRICES["agentcore_event_storage_gb_month"] * (73 * 24 / 730)
    assert cost["events"] == pytest.approx(ingest + storage)
    assert cost["retrievals"] == pytest.approx((2 + 600 / 20 + 600 / 100) * 0.50 / 1000)
    # 40 sessions a month: 40 summaries and 10 standing records, spread over 20 active hours
    assert a.records_per_person == 50
    assert cost["records"] == pytest.approx(50 / 20 * 0.75 / 1000)
    assert memory.events_at_the_old_price(used) == pytest.approx(600 * 0.25 / 1000)
    hour = cost_per_user_hour(stage(), figures(turns=10.0), a)["AgentCore Memory"]
    assert hour == pytest.approx(sum(cost.values()))


def test_the_memory_quota_that_binds_first_is_named_with_its_source() -> None:
    from benchmarks.capacity_model import memory_capacity, memory_limits

    speaker = figures(turns=6.0)  # 6 committed turns a minute
    found = {limit.key: limit for limit in memory_limits(speaker)}
    assert found["memory_create_event"].per_speaker == pytest.approx(0.1)  # one event a turn, per second
    assert found["memory_create_event"].people == pytest.approx(200 / 0.1)
    assert found["memory_retrieve"].value == 30
    result = memory_capacity(stage(), speaker)
    people = [limit.people for limit in result.ranked]
    assert people == sorted(people) and result.people == people[0]
    first = result.first_quota
    assert first is not None and first.key == "memory_extraction" and first.kind == "quota"
    quota = aws_quotas.quota(first.setting)
    assert quota.code == "L-E3D6644C" and quota.value == 150_000
    assert quota.source_url.startswith("https://docs.aws.amazon.com/bedrock-agentcore/")
    # fewer strategies reading the events move the binding to CreateEvent's rate
    from benchmarks import capacity_memory as memory

    light = memory.MemoryAssumptions(strategies=1, event_tokens=1.0)
    assert memory_capacity(stage(), speaker, light).ranked[0].key == "memory_create_event"


def test_holding_a_target_with_memory_asks_for_the_extraction_quota() -> None:
    from benchmarks.capacity_model import memory_changes_to_hold, memory_limits

    speaker = figures(turns=6.0)
    extraction = next(limit for limit in memory_limits(speaker) if limit.key == "memory_extraction")
    (change,) = memory_changes_to_hold(speaker, 1000)
    assert change.setting == "agentcore_extraction_tpm"
    assert change.needed == math.ceil(1000 * extraction.per_speaker)
    assert "--service-code bedrock-agentcore --quota-code L-E3D6644C" in change.how
    assert not memory_changes_to_hold(speaker, 10)


def test_every_agentcore_memory_quota_is_sourced_and_dated() -> None:
    keys = [key for key in aws_quotas.QUOTAS if key.startswith("agentcore_")]
    assert {"agentcore_create_event_rps", "agentcore_retrieve_rps", "agentcore_list_records_rps"} <= set(keys)
    assert {"agentcore_batch_create_rps", "agentcore_extraction_tpm", "agentcore_memories"} <= set(keys)
    for key in keys:
        quota = aws_quotas.quota(key)
        assert "bedrock-agentcore" in quota.source_url and quota.value is not None
    assert aws_quotas.quota("agentcore_create_event_session_rps").adjustable is False
    assert aws_quotas.AGENTCORE_VERIFIED_ON


def test_the_report_prints_what_memory_costs_and_which_of_its_quotas_binds() -> None:
    from benchmarks.capacity_model import session_holds_event_rate

    out = io.StringIO()
    report = report_stage(pinned(), figures(turns=6.0), out, target=1000, reading=reading())
    text = out.getvalue()
    assert "long-term memory (AgentCore Memory, assumed: a memory.search every 20 turns" in text
    assert "per active user-hour $" in text and "per 30-minute session of 180 turns $" in text
    assert "first to bind: long-term extraction tokens/min at " in text
    assert "L-E3D6644C" in text and "AgentCore Memory $" in text
    assert report.memory_quotas is not None
    assert report.people_with_memory("defaults") == min(report.people("defaults") or 0, report.memory_quotas.people)
    assert session_holds_event_rate(figures(turns=6.0))
    assert not session_holds_event_rate(figures(turns=600.0))  # 10 a second in one session: over 5


def test_a_stage_without_memory_pays_nothing_for_it_and_keeps_events_as_long_as_it_says() -> None:
    from benchmarks.capacity_model import memory_assumptions

    off = io.StringIO()
    report = report_stage(stage(memory=False), figures(turns=6.0), off, target=1000)
    assert report.cost["AgentCore Memory"] == 0 and report.memory_quotas is None and not report.memory_changes
    assert "long-term memory: off" in off.getvalue()
    assert report.people_with_memory("defaults") == report.people("defaults")
    kept = memory_assumptions(stage(memory_event_expiry_days=90))
    assert kept.event_retention_days == 90
    longer = cost_per_user_hour(stage(memory_event_expiry_days=90), figures(turns=6.0))["AgentCore Memory"]
    shorter = cost_per_user_hour(stage(memory_event_expiry_days=7), figures(turns=6.0))["AgentCore Memory"]
    assert longer > shorter  # events stored longer cost more (by the GB-month)
