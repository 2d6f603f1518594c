"""The model rules: which family an id belongs to, and what a request to it may carry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.core import inline_reasoning
from shared.wire.model_rules import (
    EFFORTS,
    THINKING_HEADROOM,
    Inference,
    base_model_id,
    effort_for,
    request_fields,
    rules_for,
    thinks,
)

SAMPLING = ("temperature", "topP")


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("us.anthropic.claude-haiku-5-5", "Claude Haiku 5.5"),
        ("anthropic.claude-haiku-5-5", "Claude Haiku 5.5"),
        ("global.anthropic.claude-sonnet-5-5", "Claude Sonnet 5.5"),
        ("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "Claude Sonnet 4"),
        ("anthropic.claude-sonnet-4-6", "Claude Sonnet 4.6"),
        ("anthropic.claude-opus-4-6-v1", "Claude Opus 4.6"),
        ("anthropic.claude-opus-4-7", "Claude Opus 4.7"),
        ("anthropic.claude-opus-5-5", "Claude Opus 5.5"),
        ("anthropic.claude-fable-5-1", "Claude Fable 5"),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", "Claude Sonnet 3.7"),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "Claude Haiku 3.5"),
        ("anthropic.claude-3-haiku-20240307-v1:0", "Claude 3"),
        ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-haiku-5-5", "Claude Haiku 5.5"),
        ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-4-7", "Claude Opus 4.7"),
        ("us.amazon.nova-micro-v1:0", "Amazon Nova Micro"),
        ("amazon.nova-2-lite-v1:0", "Amazon Nova 2"),
        ("meta.llama3-8b-instruct-v1:0", "other"),
        ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", "other"),
    ],
)
def test_each_id_reads_as_its_family(model_id: str, family: str) -> None:
    assert rules_for(model_id).family == family


def test_a_claude_newer_than_the_table_is_its_familys_newest_and_a_new_family_thinks_adaptively() -> None:
    assert rules_for("us.anthropic.claude-haiku-6-1").family == "Claude Haiku 5.5"
    assert rules_for("anthropic.claude-sonnet-7").family == "Claude Sonnet 5.5"
    newer = rules_for("anthropic.claude-sonata-6")
    assert (newer.sampling, newer.thinking, newer.off) == (False, "adaptive", None)
    assert "temperature" not in request_fields(newer, Inference(max_tokens=512, temperature=0.3))["inferenceConfig"]


def test_profile_ids_and_arns_map_to_their_foundation_model() -> None:
    assert base_model_id("us.anthropic.claude-haiku-5-5") == "anthropic.claude-haiku-5-5"
    assert base_model_id("apac.amazon.nova-pro-v1:0") == "amazon.nova-pro-v1:0"
    arn = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-5-5"
    assert base_model_id(arn) == "anthropic.claude-sonnet-5-5"


@pytest.mark.parametrize(
    ("model_id", "thinking"),
    [
        ("us.anthropic.claude-haiku-5-5", {"type": "disabled"}),
        ("us.anthropic.claude-sonnet-5-5", {"type": "between_tools"}),
        ("anthropic.claude-sonnet-5", {"type": "disabled"}),
        ("anthropic.claude-opus-4-7", None),  # off unless asked; "disabled" is refused
        ("anthropic.claude-opus-5-5", {"type": "adaptive"}),  # cannot stop thinking
        ("anthropic.claude-fable-5", {"type": "adaptive"}),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", None),
        ("us.amazon.nova-lite-v1:0", None),
    ],
)
def test_thinking_off_is_sent_as_each_model_turns_it_off(model_id: str, thinking: dict[str, str] | None) -> None:
    fields = request_fields(rules_for(model_id), Inference(max_tokens=1024, effort="low", thinking="off"))
    assert fields.get("additionalModelRequestFields", {}).get("thinking") == thinking


@pytest.mark.parametrize(
    "model_id",
    [
        "us.anthropic.claude-haiku-5-5",
        "us.anthropic.claude-sonnet-5-5",
        "anthropic.claude-opus-4-7",
        "anthropic.claude-opus-5-5",
        "anthropic.claude-fable-5-1",
        "anthropic.claude-mythos-5",
    ],
)
def test_no_sampling_parameter_reaches_a_model_that_refuses_them(model_id: str) -> None:
    for thinking in ("off", "adaptive"):
        fields = request_fields(rules_for(model_id), Inference(max_tokens=1024, thinking=thinking, temperature=0.3))
        assert not set(SAMPLING) & set(fields["inferenceConfig"])
        assert not {"temperature", "top_p", "top_k"} & set(fields.get("additionalModelRequestFields", {}))


def test_older_models_keep_their_temperature_but_never_while_thinking() -> None:
    rules = rules_for("anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert request_fields(rules, Inference(max_tokens=512, temperature=0.3))["inferenceConfig"]["temperature"] == 0.3
    thinking = request_fields(rules, Inference(max_tokens=512, thinking="adaptive", temperature=0.3))
    assert "temperature" not in thinking["inferenceConfig"]
    assert thinking["additionalModelRequestFields"]["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert thinking["inferenceConfig"]["maxTokens"] == 512 + 1024  # the answer keeps its own room
    assert request_fields(rules_for("us.amazon.nova-pro-v1:0"), Inference(max_tokens=9, temperature=0))[
        "inferenceConfig"
    ] == {"maxTokens": 9, "temperature": 0}


def test_a_thinking_request_gets_room_for_thinking_on_top_of_the_answer() -> None:
    rules = rules_for("us.anthropic.claude-haiku-5-5")
    off = request_fields(rules, Inference(max_tokens=1024, effort="low"))
    on = request_fields(rules, Inference(max_tokens=1024, effort="medium", thinking="adaptive"))
    assert off["inferenceConfig"]["maxTokens"] == 1024
    assert on["inferenceConfig"]["maxTokens"] == 1024 + THINKING_HEADROOM["medium"]
    assert on["outputConfig"] == {"effort": "medium"}
    huge = request_fields(rules, Inference(max_tokens=127_000, effort="max", thinking="adaptive"))
    assert huge["inferenceConfig"]["maxTokens"] == rules.max_output_tokens


def test_effort_is_capped_where_thinking_is_off_and_clamped_to_the_models_levels() -> None:
    haiku = rules_for("us.anthropic.claude-haiku-5-5")
    assert request_fields(haiku, Inference(max_tokens=64, effort="max"))["outputConfig"] == {"effort": "high"}
    assert request_fields(haiku, Inference(max_tokens=64, effort="max", thinking="adaptive"))["outputConfig"] == {
        "effort": "max"
    }
    sonnet46 = rules_for("anthropic.claude-sonnet-4-6")
    assert effort_for(sonnet46, "xhigh") == "high"
    assert "outputConfig" not in request_fields(rules_for("anthropic.claude-haiku-4-5-20251001-v1:0"), Inference(64))


@given(
    model=st.sampled_from(
        [
            "us.anthropic.claude-haiku-5-5",
            "us.anthropic.claude-sonnet-5-5",
            "anthropic.claude-opus-4-7",
            "anthropic.claude-opus-5-5",
            "anthropic.claude-sonnet-4-6",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-3-haiku-20240307-v1:0",
            "us.amazon.nova-micro-v1:0",
        ]
    ),
    effort=st.sampled_from(EFFORTS),
    thinking=st.sampled_from(["off", "adaptive"]),
    max_tokens=st.integers(1, 200_000),
    temperature=st.none() | st.floats(0, 1),
)
def test_every_request_fits_the_models_rules(
    model: str, effort: str, thinking: str, max_tokens: int, temperature: float | None
) -> None:
    rules = rules_for(model)
    inference = Inference(max_tokens=max_tokens, effort=effort, thinking=thinking, temperature=temperature)  # type: ignore[arg-type]
    fields = request_fields(rules, inference)
    config = fields["inferenceConfig"]
    assert 1 <= config["maxTokens"] <= rules.max_output_tokens
    if "temperature" in config:
        assert rules.sampling and not thinks(rules, inference)
    sent_effort = fields.get("outputConfig", {}).get("effort")
    assert (sent_effort is None) == (not rules.efforts)
    if sent_effort is not None:
        assert sent_effort in rules.efforts
    kind = fields.get("additionalModelRequestFields", {}).get("thinking", {}).get("type")
    if kind in ("disabled", "between_tools"):
        assert kind == rules.off
        if rules.off_effort_cap:
            assert EFFORTS.index(sent_effort) <= EFFORTS.index(rules.off_effort_cap)
    if kind == "enabled":
        budget = fields["additionalModelRequestFields"]["thinking"]["budget_tokens"]
        assert rules.thinking == "budget"
        assert 1024 <= budget < config["maxTokens"]


def test_the_inline_reasoning_the_core_hides_is_the_tag_the_table_names() -> None:
    tag = rules_for("us.amazon.nova-micro-v1:0").inline_reasoning_tag
    assert (f"<{tag}>", f"</{tag}>") == (inline_reasoning.OPEN, inline_reasoning.CLOSE)
    assert rules_for("amazon.nova-2-lite-v1:0").inline_reasoning_tag is None  # Nova 2 reasons in blocks


def test_sonnet_thinking_between_tools_gets_room_for_it_though_it_does_not_think_before_answering() -> None:
    rules = rules_for("us.anthropic.claude-sonnet-5-5")
    fields = request_fields(rules, Inference(max_tokens=2048, effort="low"))
    assert fields["additionalModelRequestFields"]["thinking"] == {"type": "between_tools"}
    assert not thinks(rules, Inference(max_tokens=2048, effort="low"))
    assert fields["inferenceConfig"]["maxTokens"] == 2048 + THINKING_HEADROOM["low"]
