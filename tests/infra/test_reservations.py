"""Reserved concurrency only where a recorded quota reading proves it (infra/reservations.py), the readings
file doctor writes (infra/quota_readings.py), and setting overrides from the command line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infra.config import StageConfig, StageConfigError, apply_overrides, read_cdk_json_context, select_stage
from infra.quota_readings import BedrockReading, QuotaReading, load_context, reading_for, reading_key, record
from infra.reservations import Reservations, reservations

ACCOUNT = "123456789012"
REGION = "us-east-1"


def prod(**changes: Any) -> StageConfig:
    settings = copy.deepcopy(read_cdk_json_context()["stages"]["prod"])
    lambdas = changes.pop("lambdas", {})
    settings["lambdas"].update(lambdas)
    settings.update(changes)
    return select_stage({"prod": settings}, "prod")


def readings(quota: int | None, account: str = ACCOUNT, region: str = REGION) -> dict[str, Any]:
    reading = QuotaReading(account, region, "2026-11-28T12:00:00Z", lambda_concurrency=quota, lambda_unreserved=quota)
    return {reading_key(account, region): reading.to_json()}


# --- the readings file --------------------------------------------------------------------------------


def test_record_merges_one_key_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    assert load_context(path) == {}  # absent: empty
    path.write_text(json.dumps({"availability-zones:account=1:region=x": ["x-1a"]}))
    first = QuotaReading(ACCOUNT, REGION, "2026-11-01T00:00:00Z", 10, 10, {"m.x": BedrockReading(5, None)})
    record(path, first)
    record(path, QuotaReading("999999999999", REGION, "2026-11-02T00:00:00Z", 1000, 900))
    again = QuotaReading(ACCOUNT, REGION, "2026-11-28T12:00:00Z", 1000, 1000)
    record(path, again)
    context = load_context(path)
    assert sorted(context) == [
        "availability-zones:account=1:region=x",
        reading_key(ACCOUNT, REGION),
        reading_key("999999999999", REGION),
    ]
    assert reading_for(context, ACCOUNT, REGION) == again  # replaced, bedrock of the earlier one gone
    assert context[reading_key(ACCOUNT, REGION)] == {
        "account": ACCOUNT,
        "region": REGION,
        "read_at": "2026-11-28T12:00:00Z",
        "lambda": {"concurrent_executions": 1000, "unreserved_concurrent_executions": 1000},
    }
    assert path.read_text() == json.dumps(context, indent=2, sort_keys=True) + "\n"


def test_a_reading_covers_only_its_own_pinned_account_and_region() -> None:
    context = readings(1000)
    assert reading_for(context, None, REGION) is None  # nothing pinned: nothing trusted
    assert reading_for(context, "999999999999", REGION) is None
    assert reading_for(context, ACCOUNT, "us-west-2") is None
    found = reading_for(context, ACCOUNT, REGION)
    assert found is not None and found.lambda_concurrency == 1000
    # A value given with -c arrives as a string.
    assert reading_for({key: json.dumps(value) for key, value in context.items()}, ACCOUNT, REGION) == found
    # A stored reading whose body names another account is not this account's.
    mislabelled = {reading_key(ACCOUNT, REGION): {**context[reading_key(ACCOUNT, REGION)], "account": "1"}}
    assert reading_for(mislabelled, ACCOUNT, REGION) is None


# --- what synth reserves ------------------------------------------------------------------------------


def test_prod_as_shipped_reserves_nothing_and_says_why() -> None:
    config = prod()
    assert config.lambdas.turn_reserved_concurrency == 1500 and config.account is None
    found = reservations(config, readings(3000))  # a reading of some account proves nothing for prod
    assert (found.turn, found.message) == (None, None)
    assert found.withheld == (
        "stage 'prod' pins no account (stages.prod.account), so no quota reading covers it: it reserves none of "
        "the 1,500 executions lambdas asks for (the functions share the account's unreserved pool)"
    )


def test_a_pinned_account_without_a_reading_reserves_nothing() -> None:
    found = reservations(prod(account=ACCOUNT), {})
    assert (found.turn, found.message) == (None, None)
    assert "no Lambda quota reading for account 123456789012 in us-east-1" in found.withheld
    assert "run `voiceide-conductor doctor --stage prod`" in found.withheld
    # A reading of Bedrock alone says nothing of Lambda.
    bedrock_only = QuotaReading(ACCOUNT, REGION, "2026-11-28T12:00:00Z", bedrock={"m.x": BedrockReading(5, 5)})
    assert reservations(prod(account=ACCOUNT), {reading_key(ACCOUNT, REGION): bedrock_only.to_json()}).turn is None


def test_a_reading_that_holds_the_reservation_applies_it() -> None:
    found = reservations(prod(account=ACCOUNT), readings(1600))  # 1,500 leaves exactly 100
    assert found == Reservations(turn=1500, message=None)
    both = prod(account=ACCOUNT, lambdas={"reserved_concurrency": 20})
    assert reservations(both, readings(1620)) == Reservations(turn=1500, message=20)


@pytest.mark.parametrize(
    ("lambdas", "quota", "line"),
    [
        (
            {},
            1000,
            "stages.prod.lambdas.turn_reserved_concurrency (1,500) must leave 100 of account 123456789012's Lambda "
            "quota in us-east-1 unreserved (1,000, read 2026-11-28T12:00:00Z): at most 900; lower it, or raise the "
            "quota (Service Quotas, L-B99A9384) and run `voiceide-conductor doctor --stage prod` again",
        ),
        (
            {"reserved_concurrency": 20},
            1600,
            "stages.prod.lambdas.turn_reserved_concurrency + reserved_concurrency (1,500 + 20) must leave 100",
        ),
    ],
)
def test_a_reading_too_small_fails_synth_with_one_line_naming_the_setting(
    lambdas: dict[str, Any], quota: int, line: str
) -> None:
    with pytest.raises(StageConfigError) as error:
        reservations(prod(account=ACCOUNT, lambdas=lambdas), readings(quota))
    assert "\n" not in str(error.value)
    assert str(error.value).startswith(line)


def test_a_new_accounts_quota_of_50_holds_no_reservation() -> None:
    with pytest.raises(StageConfigError, match=r"\(50, read .*\): at most 0"):
        reservations(prod(account=ACCOUNT, lambdas={"turn_reserved_concurrency": 1}), readings(50))


def test_a_stage_that_wants_no_reservation_needs_no_reading() -> None:
    config = prod(lambdas={"turn_reserved_concurrency": None})
    assert reservations(config, {}) == Reservations()


# --- overriding one setting from the command line -----------------------------------------------------


def test_overrides_set_one_setting_of_one_stage() -> None:
    stages = read_cdk_json_context()["stages"]
    context = {
        "stage": "prod",
        "stages.prod.alarm_email": "oncall@example.com",
        "stages.prod.cognito.ses_from_email": "no-reply@example.com",
        "stages.prod.account": ACCOUNT,
        "stages.prod.lambdas.turn_reserved_concurrency": "200",
        "stages.prod.alarm_topic_arn": "null",
        "stages.prod.bedrock.inference_profile_regions": '["us-east-1", "us-west-2"]',
        "stages.prod.capacity.warm_read_units_per_second": "15000",
    }
    merged = apply_overrides(stages, context)
    assert stages["prod"]["alarm_email"] is None  # cdk.json's own values are left alone
    config = select_stage(merged, "prod")
    assert (config.alarm_email, config.cognito.ses_from_email) == ("oncall@example.com", "no-reply@example.com")
    assert config.cognito.mfa == "required"  # the rest of the group stays
    assert (config.account, config.lambdas.turn_reserved_concurrency, config.alarm_topic_arn) == (ACCOUNT, 200, None)
    assert config.bedrock.inference_profile_regions == ("us-east-1", "us-west-2")
    assert config.capacity.warm_read_units_per_second == 15000
    assert merged["dev"] == stages["dev"]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("stages.qa.alarm_email", "names no stage of cdk.json (known: dev, prod)"),
        ("stages.prod", "write -c stages.<stage>.<setting>=<value>"),
        ("stages.prod.alarm_email.address", "'alarm_email' is not a group of settings"),
    ],
)
def test_an_override_that_names_nothing_fails_clearly(key: str, message: str) -> None:
    stages = read_cdk_json_context()["stages"]
    stages["prod"]["alarm_email"] = "oncall@example.com"
    with pytest.raises(StageConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        apply_overrides(stages, {key: "x"})
