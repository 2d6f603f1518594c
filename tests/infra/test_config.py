"""Stage settings: cdk.json parses, bad settings and unknown stages fail with clear messages."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra.config import (
    DEFAULT_STAGE,
    MIN_UNRESERVED_CONCURRENCY,
    StageConfigError,
    UnknownStageError,
    is_true,
    read_cdk_json_context,
    select_stage,
)


@pytest.fixture
def stages() -> dict[str, Any]:
    return copy.deepcopy(read_cdk_json_context()["stages"])


def test_cdk_json_defines_dev_and_prod_and_every_stage_is_valid(stages: dict[str, Any]) -> None:
    assert {"dev", "prod"} <= set(stages)
    for name in stages:
        assert select_stage(stages, name).name == name


def test_default_stage_is_dev(stages: dict[str, Any]) -> None:
    assert DEFAULT_STAGE == "dev"
    assert select_stage(stages, None).name == "dev"


def test_dev_and_prod_differ_where_they_should(stages: dict[str, Any]) -> None:
    dev, prod = select_stage(stages, "dev"), select_stage(stages, "prod")
    assert (dev.removal_policy, prod.removal_policy) == ("destroy", "retain")
    assert (dev.auth, prod.auth) == ("cognito", "cognito")  # every deployed stage signs in
    assert dev.authorizer and prod.authorizer
    assert dev.bedrock.is_inference_profile and prod.bedrock.is_inference_profile
    assert dev.bedrock.model_id != prod.bedrock.model_id  # dev: the fast cheap model, prod: a stronger one
    assert prod.lambdas.turn_reserve_ms < prod.lambdas.turn_timeout_seconds * 1000


def test_unknown_stage_lists_the_known_ones(stages: dict[str, Any]) -> None:
    with pytest.raises(UnknownStageError) as error:
        select_stage(stages, "qa")
    assert str(error.value) == "Unknown stage 'qa'. Known stages: dev, prod. Choose one with -c stage=<name>."


def test_stages_may_arrive_as_a_json_string(stages: dict[str, Any]) -> None:
    assert select_stage(json.dumps(stages), "prod").name == "prod"


@pytest.mark.parametrize("raw", [None, {}, "[1, 2]", "not json", 3])
def test_missing_or_malformed_stages_context(raw: Any) -> None:
    with pytest.raises(StageConfigError, match="stages"):
        select_stage(raw, "dev")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("lambdas", "turn_reserve_ms"), 295_000, "must leave at least 10 s"),
        (("lambdas", "turn_timeout_seconds"), 901, "less than or equal to 900"),
        (("lambdas", "message_timeout_seconds"), 30, "less than or equal to 29"),
        (("lambdas", "handler_timeout_seconds"), 30, "less than or equal to 29"),
        (("log_retention_days",), 10, "log_retention_days must be one of"),
        (("removal_policy",), "snapshot", "'retain' or 'destroy'"),
        (("region",), "moon-base-1", "String should match pattern"),
        (("alarm_email",), "not-an-address", "String should match pattern"),
        (("bedrock", "inference_profile_regions"), [], "list the regions it routes to"),
        (("bedrock", "model_id"), "anthropic.claude-haiku-5-5", "only applies to inference profile ids"),
        (("throttle", "rate_limit"), 0, "greater than 0"),
        (("unexpected_key",), True, "Extra inputs are not permitted"),
        (("bedrock", "effort"), "extreme", "'low', 'medium', 'high', 'xhigh' or 'max'"),
        (("bedrock", "thinking"), "enabled", "'off' or 'adaptive'"),
        (("access_logging",), "yes", "'auto', 'on' or 'off'"),
        (("lambdas", "turn_reserved_concurrency"), 0, "greater than or equal to 1"),
        (("lambdas", "account_concurrency"), 1000, "lambdas.account_concurrency was removed"),
        (("cognito", "threat_protection"), "audit", 'threat_protection "audit" needs feature_plan "plus"'),
        (("cognito", "ses_from_name"), "VoiceIDE", "need ses_from_email"),
        (("cognito", "ses_from_email"), "not-an-address", "String should match pattern"),
        (("capacity",), {"index_warm_write_units_per_second": 100}, "greater than or equal to 4000"),
        (("auth",), "none", "auth 'none' is for the local stack only (voiceide-conductor local)"),
        (("alarms", "output_tokens_per_hour"), 200_000, "replaced by alarms.bedrock_usd_per_hour"),
        (("alarms", "bedrock_usd_per_hour"), 0, "greater than 0"),
        (("bedrock", "prices"), None, "bedrock.prices is missing"),
        (("bedrock", "prices"), {"input": 1, "output": 5}, "Field required"),
        (("alarm_topic_arn",), "alarms", "String should match pattern"),
        (("sessions", "ended_retention_days"), 0, "greater than or equal to 1"),
        (("sessions", "ended_retention_days"), "a week", "valid integer"),
        (("sessions", "retention"), 3, "Extra inputs are not permitted"),
    ],
)
def test_invalid_settings_name_the_stage_and_field(
    stages: dict[str, Any], path: tuple[str, ...], value: Any, message: str
) -> None:
    settings = stages["dev"]
    for key in path[:-1]:
        settings = settings[key]
    settings[path[-1]] = value
    with pytest.raises(StageConfigError) as error:
        select_stage(stages, "dev")
    assert "stage 'dev' has invalid settings" in str(error.value)
    assert message in str(error.value)


def test_invalid_stage_name(stages: dict[str, Any]) -> None:
    stages["Bad_Name"] = stages["dev"]
    with pytest.raises(StageConfigError, match="stage names are"):
        select_stage(stages, "Bad_Name")


def test_inference_profile_ids_map_to_foundation_models(stages: dict[str, Any]) -> None:
    for name in ("dev", "prod"):
        bedrock = select_stage(stages, name).bedrock
        assert bedrock.profile_geography == "us"
        assert bedrock.foundation_model_id == bedrock.model_id.removeprefix("us.")
    stages["dev"]["bedrock"] = {"model_id": "anthropic.claude-haiku-5-5", "prices": stages["dev"]["bedrock"]["prices"]}
    dev = select_stage(stages, "dev")
    assert dev.bedrock.profile_geography is None
    assert dev.bedrock.foundation_model_id == dev.bedrock.model_id
    assert dev.bedrock_region == dev.region


# Claude models Amazon Bedrock lists as Active, checked on MODELS_CHECKED_ON (docs/deploying.md, Models). A model
# change in cdk.json or in the code default must come with a new check of the lifecycle pages here.
MODELS_CHECKED_ON = "2026-11-23"
ACTIVE_MODEL_IDS = frozenset(
    {
        "us.anthropic.claude-haiku-5-5",  # Claude Haiku 5.5: launched 2026-10-07, EOL no sooner than 2027-10-07
        "us.anthropic.claude-sonnet-5-5",  # Claude Sonnet 5.5: launched 2026-09-28
    }
)
# Legacy or past end of life on Amazon Bedrock by MODELS_CHECKED_ON: never configure these again.
RETIRED_MODEL_IDS = frozenset(
    {
        "anthropic.claude-3-haiku-20240307-v1:0",  # Legacy, EOL 2026-09-10
        "us.anthropic.claude-3-5-haiku-20241022-v1:0",  # Legacy, EOL 2026-06-19
        "us.anthropic.claude-sonnet-4-20250514-v1:0",  # Legacy (Claude Sonnet 4)
    }
)


def test_every_stage_uses_a_model_known_active(stages: dict[str, Any]) -> None:
    for name in stages:
        model_id = select_stage(stages, name).bedrock.model_id
        assert model_id in ACTIVE_MODEL_IDS, f"stage {name!r}: {model_id} was not checked Active ({MODELS_CHECKED_ON})"
        assert model_id not in RETIRED_MODEL_IDS


def test_the_code_default_model_is_known_active() -> None:
    from shared.flows.config import Settings

    assert Settings().model_id in ACTIVE_MODEL_IDS, f"shared/flows/config.py: {Settings().model_id} is not known Active"


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), ("true", True), ("1", True), ("false", False), (False, False), ("", False)]
)
def test_context_flags(value: Any, expected: bool) -> None:
    assert is_true(value) is expected


def test_one_stage_per_account_and_region_owns_the_api_gateway_logging_role(stages: dict[str, Any]) -> None:
    """API Gateway's CloudWatch Logs role is one setting per account and region: a stage sets it only
    when told to, and in cdk.json prod owns it while dev relies on it."""
    without = {key: value for key, value in stages["dev"].items() if key != "api_gateway_cloudwatch_role"}
    assert select_stage({"dev": without}, "dev").api_gateway_cloudwatch_role is False
    configs = [select_stage(stages, name) for name in stages]
    assert {c.name: c.api_gateway_cloudwatch_role for c in configs if c.name in ("dev", "prod")} == {
        "dev": False,
        "prod": True,
    }
    owners: dict[tuple[str | None, str], list[str]] = {}
    for config in configs:
        owners.setdefault((config.account, config.region), [])
        if config.api_gateway_cloudwatch_role:
            owners[(config.account, config.region)].append(config.name)
    assert all(len(names) == 1 for names in owners.values()), owners


def test_both_stages_say_how_the_model_thinks(stages: dict[str, Any]) -> None:
    for name in ("dev", "prod"):
        assert {"effort", "thinking"} <= set(stages[name]["bedrock"]), f"{name}: set effort and thinking explicitly"
        bedrock = select_stage(stages, name).bedrock
        assert (bedrock.effort, bedrock.thinking) == ("low", "off")
    del stages["dev"]["bedrock"]["effort"], stages["dev"]["bedrock"]["thinking"]
    defaults = select_stage(stages, "dev").bedrock
    assert (defaults.effort, defaults.thinking) == ("low", "off")


def test_a_stated_account_quota_is_only_a_plan(stages: dict[str, Any]) -> None:
    """New accounts start at 10 or 50 concurrent executions: a quota written in cdk.json proves nothing
    (synth trusts only a reading, infra/reservations.py). prod keeps its wish and its plan, and pins no
    account; the old setting that made synth reserve is refused with what replaced it."""
    dev, prod = select_stage(stages, "dev"), select_stage(stages, "prod")
    assert dev.lambdas.reserved == 0 and dev.account is None
    assert (prod.lambdas.turn_reserved_concurrency, prod.lambdas.planned_account_concurrency) == (1500, 3000)
    assert prod.account is None
    assert prod.lambdas.reserved <= 3000 - MIN_UNRESERVED_CONCURRENCY
    stages["prod"]["lambdas"]["account_concurrency"] = 3000
    with pytest.raises(StageConfigError) as error:
        select_stage(stages, "prod")
    [line] = [line for line in str(error.value).splitlines() if "account_concurrency" in line]
    assert "lambdas.account_concurrency was removed: a stated quota never makes synth reserve" in line
    assert "lambdas.planned_account_concurrency" in line
    # A reservation needs no stated quota to be read (doctor, the capacity model read every stage).
    del stages["prod"]["lambdas"]["account_concurrency"], stages["prod"]["lambdas"]["planned_account_concurrency"]
    assert select_stage(stages, "prod").lambdas.reserved == 1500


def test_prods_per_person_ceiling_and_expected_load_alarm(stages: dict[str, Any]) -> None:
    """prod caps what one person spends a day, and alarms at its expected load below the spend guard."""
    prod = select_stage(stages, "prod")
    assert prod.daily_budget_usd > 0
    expected = prod.alarms.bedrock_usd_per_hour_expected
    assert expected is not None and expected < prod.alarms.bedrock_usd_per_hour
    stages["prod"]["alarms"]["bedrock_usd_per_hour_expected"] = prod.alarms.bedrock_usd_per_hour
    with pytest.raises(StageConfigError, match=r"bedrock_usd_per_hour_expected \(3000\) must be below"):
        select_stage(stages, "prod")


def test_warm_throughput_below_the_on_demand_start_is_refused(stages: dict[str, Any]) -> None:
    stages["prod"]["capacity"] = {"warm_write_units_per_second": 3000}
    with pytest.raises(StageConfigError, match="warm_write_units_per_second"):
        select_stage(stages, "prod")


def test_every_stage_names_its_models_prices_and_a_spend_ceiling_in_dollars(stages: dict[str, Any]) -> None:
    for name in ("dev", "prod"):
        config = select_stage(stages, name)
        prices = config.bedrock.prices
        assert prices is not None and prices.output > prices.input > prices.cache_read
        assert config.alarms.bedrock_usd_per_hour > 0
    assert (
        select_stage(stages, "dev").alarms.bedrock_usd_per_hour
        < select_stage(stages, "prod").alarms.bedrock_usd_per_hour
    )


def test_a_stage_names_who_hears_its_alarms(stages: dict[str, Any]) -> None:
    # cdk.json names nobody for prod: the deploying operator does (synth refuses prod without, test_stage_checks).
    assert select_stage(stages, "prod").alarm_listeners == ()
    stages["prod"]["alarm_topic_arn"] = "arn:aws:sns:us-east-1:123456789012:oncall"
    stages["prod"]["alarm_email"] = "oncall@example.com"
    assert select_stage(stages, "prod").alarm_listeners == (
        "oncall@example.com",
        "arn:aws:sns:us-east-1:123456789012:oncall",
    )


def test_access_logs_only_where_the_account_role_is_known_to_be_set(stages: dict[str, Any]) -> None:
    """API Gateway refuses a logging stage in a region whose account has no CloudWatch Logs role."""
    assert select_stage(stages, "dev").access_logs is False  # auto, and dev does not set the role
    assert select_stage(stages, "prod").access_logs is True  # auto, and prod sets it
    del stages["dev"]["access_logging"]
    assert select_stage(stages, "dev").access_logging == "auto"
    for setting, owner, expected in (("on", False, True), ("off", True, False), ("auto", True, True)):
        stages["dev"].update(access_logging=setting, api_gateway_cloudwatch_role=owner)
        assert select_stage(stages, "dev").access_logs is expected, (setting, owner)


def test_ended_sessions_are_kept_per_stage(stages: dict[str, Any]) -> None:
    """sessions.ended_retention_days: dev 2, prod 30 (CONDUCTOR_ENDED_RETENTION_SECONDS); 30 when left out."""
    dev, prod = select_stage(stages, "dev"), select_stage(stages, "prod")
    assert (dev.sessions.ended_retention_days, prod.sessions.ended_retention_days) == (2, 30)
    assert dev.sessions.ended_retention_seconds == 2 * 86_400
    del stages["dev"]["sessions"]
    assert select_stage(stages, "dev").sessions.ended_retention_days == 30
    stages["dev"]["sessions"] = {"ended_retention_days": 1}
    assert select_stage(stages, "dev").sessions.ended_retention_seconds == 86_400


def test_the_sessions_api_is_served_where_api_gateway_can_check_sign_in(stages: dict[str, Any]) -> None:
    assert select_stage(stages, "dev").sessions_api  # cognito: the JWT authorizer
    assert select_stage(stages, "prod").sessions_api
    signed = {key: value for key, value in stages["prod"].items() if key != "cognito"}
    signed.update(auth="dev-signed-token", removal_policy="destroy")
    assert not select_stage({"ci": signed}, "ci").sessions_api  # HMAC tokens: no authorizer could check them


def test_http_access_logs_need_no_account_role(stages: dict[str, Any]) -> None:
    """The sessions API's stage logs unless access_logging is "off": an HTTP API's logs are delivered
    without API Gateway's account-level CloudWatch Logs role."""
    for setting, owner, expected in (
        ("auto", False, True),
        ("auto", True, True),
        ("on", False, True),
        ("off", True, False),
    ):
        stages["dev"].update(access_logging=setting, api_gateway_cloudwatch_role=owner)
        assert select_stage(stages, "dev").http_access_logs is expected, (setting, owner)
