"""``doctor``'s account checks (API Gateway's logging role, Lambda concurrency, Bedrock quotas), each
against the real botocore client with a Stubber: requests and responses are validated against the
installed service models."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from conductor_local.doctor.account import (
    ROLE_ERROR,
    check_bedrock_quotas,
    check_cloudwatch_role,
    check_lambda_concurrency,
    parse_quota_name,
    quota_names_model,
)
from conductor_local.doctor.command import check_stack_and_table
from conductor_local.doctor.common import Readings, Target

REGION = "us-east-1"
PROFILE_ID = "us.anthropic.claude-haiku-5-5"
ROLE = "arn:aws:iam::123456789012:role/VoiceIDEConductor-prod-ApiCloudWatchRole"
STACK = "VoiceIDEConductor-dev"


def target(**changes: Any) -> Target:
    settings: dict[str, Any] = {
        "stage": "dev",
        "stack_name": STACK,
        "region": REGION,
        "model_id": PROFILE_ID,
        "bedrock_region": REGION,
        "profile_regions": ("us-east-1", "us-east-2", "us-west-1", "us-west-2"),
        **changes,
    }
    return Target(**settings)


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


# --- API Gateway's CloudWatch Logs role -------------------------------------------------------------


def role_check(response: dict[str, Any] | None, checked: Target, error: str = "") -> Any:
    apigateway = client("apigateway")
    with Stubber(apigateway) as stub:
        if error:
            stub.add_client_error("get_account", error, "not allowed", 403, {})
        else:
            stub.add_response("get_account", response, {})
        return check_cloudwatch_role(apigateway, checked)


def test_a_set_role_passes() -> None:
    result = role_check({"cloudwatchRoleArn": ROLE}, target())
    assert (
        result.line()
        == f"✓ API Gateway logging role: {ROLE} is the account's CloudWatch Logs role in us-east-1; "
        + ("dev's access logs use it")
    )


def test_a_missing_role_fails_a_stage_that_logs_without_setting_it() -> None:
    result = role_check({}, target(access_logging=True, access_logging_setting="on", role_owners=("prod",)))
    assert not result.ok
    assert result.detail == (
        'not set in us-east-1: dev\'s WebSocket access logs (access_logging "on") need it and the stage does not '
        f'set it, so its deploy fails with "{ROLE_ERROR}"'
    )
    assert result.fix.startswith("deploy prod first, which sets it (npx aws-cdk@2 deploy -c stage=prod)")
    assert "aws apigateway update-account" in result.fix and '"access_logging": "auto"' in result.fix


def test_a_missing_role_with_no_owning_stage_says_to_own_it() -> None:
    result = role_check({}, target(access_logging=True))
    assert not result.ok
    assert result.fix.startswith('set "api_gateway_cloudwatch_role": true for dev in cdk.json')


def test_a_missing_role_passes_a_stage_that_sets_it_or_does_not_log() -> None:
    owner = role_check({}, target(stage="prod", creates_cloudwatch_role=True))
    assert owner.line() == (
        "✓ API Gateway logging role: not set in us-east-1 yet: prod sets it (api_gateway_cloudwatch_role: true)"
    )
    quiet = role_check({}, target(access_logging=False, access_logging_setting="auto"))
    assert quiet.line() == (
        '✓ API Gateway logging role: not set in us-east-1; dev writes no access logs (access_logging "auto") '
        "and deploys without it"
    )


def test_a_set_role_tells_a_quiet_stage_it_could_log() -> None:
    result = role_check({"cloudwatchRoleArn": ROLE}, target(access_logging=False, access_logging_setting="auto"))
    assert result.ok and result.detail.endswith('"access_logging": "on" would turn them on')


def test_the_role_the_caller_may_not_read_is_not_a_failure() -> None:
    result = role_check(None, target(), error="AccessDeniedException")
    assert result.ok and result.warning
    assert result.line() == (
        "! API Gateway logging role: could not check: allow apigateway:GET on arn:aws:apigateway:us-east-1::/account"
    )


# --- Lambda concurrency -------------------------------------------------------------------------------


def account_settings(limit: int, unreserved: int) -> dict[str, Any]:
    return {
        "AccountLimit": {
            "TotalCodeSize": 80_530_636_800,
            "CodeSizeUnzipped": 262_144_000,
            "CodeSizeZipped": 52_428_800,
            "ConcurrentExecutions": limit,
            "UnreservedConcurrentExecutions": unreserved,
        },
        "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
    }


def function_resource(logical_id: str, name: str) -> dict[str, Any]:
    return {
        "LogicalResourceId": logical_id,
        "PhysicalResourceId": name,
        "ResourceType": "AWS::Lambda::Function",
        "LastUpdatedTimestamp": "2026-11-20T10:00:00Z",
        "ResourceStatus": "CREATE_COMPLETE",
    }


def concurrency_check(
    checked: Target, limit: int, unreserved: int, stack: list[Any] | None = None, readings: Readings | None = None
) -> Any:
    """``stack``: the stack's functions as (name, reserved) pairs, or an error code for ListStackResources;
    None: the stack is not deployed."""
    lambda_client, cloudformation = client("lambda"), client("cloudformation")
    with Stubber(lambda_client) as lambda_stub, Stubber(cloudformation) as cfn_stub:
        lambda_stub.add_response("get_account_settings", account_settings(limit, unreserved), {})
        if checked.reserved_concurrency:
            if stack is None:
                cfn_stub.add_client_error(
                    "list_stack_resources", "ValidationError", f"Stack with id {STACK} does not exist", 400
                )
            elif isinstance(stack, str):
                cfn_stub.add_client_error("list_stack_resources", stack, "not allowed", 403)
            else:
                summaries = [function_resource(f"Fn{index}", name) for index, (name, _) in enumerate(stack)]
                cfn_stub.add_response(
                    "list_stack_resources", {"StackResourceSummaries": summaries}, {"StackName": STACK}
                )
                for name, reserved in stack:
                    response = {"ReservedConcurrentExecutions": reserved} if reserved else {}
                    lambda_stub.add_response("get_function_concurrency", response, {"FunctionName": name})
        result = check_lambda_concurrency(lambda_client, cloudformation, checked, readings)
        lambda_stub.assert_no_pending_responses()
        cfn_stub.assert_no_pending_responses()
    return result


ACCOUNT = "123456789012"


def test_room_for_the_stages_reservations_passes_and_is_read() -> None:
    readings = Readings()
    checked = target(account=ACCOUNT, turn_reserved_concurrency=100)
    result = concurrency_check(checked, 1000, 1000, readings=readings)
    assert result.line() == (
        "✓ Lambda concurrency: ConcurrentExecutions 1,000, UnreservedConcurrentExecutions 1,000 in us-east-1; "
        "dev asks to reserve 100 for turn"
    )
    assert (readings.lambda_concurrency, readings.lambda_unreserved) == (1000, 1000)


def test_a_stage_pinning_no_account_is_told_synth_reserves_none_of_it() -> None:
    """prod as shipped: it asks for 1,500 but pins no account, so synth reserves nothing (and deploys)."""
    result = concurrency_check(target(stage="prod", turn_reserved_concurrency=1500), 3000, 3000)
    assert result.ok and result.warning
    assert result.line() == (
        "! Lambda concurrency: ConcurrentExecutions 3,000, UnreservedConcurrentExecutions 3,000 in us-east-1; prod "
        "asks to reserve 1,500 for turn, but prod pins no account, so synth reserves none of it and the functions "
        'share the pool → to reserve, pin the account (the "quota reading" line says which) and commit '
        "cdk.context.json"
    )


def test_a_stage_reserving_nothing_passes() -> None:
    result = concurrency_check(target(), 1000, 1000)
    assert result.ok and not result.warning
    assert result.detail.endswith("dev reserves none")


def test_a_new_accounts_quota_of_50_passes_a_stage_reserving_nothing_with_a_warning() -> None:
    result = concurrency_check(target(), 50, 50)
    assert result.ok and result.warning
    assert "below Lambda's default of 1,000" in result.detail
    assert result.fix == "request more in Service Quotas → AWS Lambda → Concurrent executions (L-B99A9384)"


def test_a_new_accounts_limit_cannot_hold_a_pinned_stages_reservation() -> None:
    result = concurrency_check(target(account=ACCOUNT, turn_reserved_concurrency=10), 10, 10)
    assert not result.ok
    assert result.detail == (
        "ConcurrentExecutions 10, UnreservedConcurrentExecutions 10 in us-east-1; dev asks to reserve 10 for turn, "
        "but only 0 more can be reserved (Lambda keeps 10 unreserved); the deploy would fail (synth refuses the "
        "reservation with this reading)"
    )
    assert "L-B99A9384" in result.fix and "lambdas.turn_reserved_concurrency" in result.fix


def test_too_little_room_for_a_stage_pinning_no_account_is_only_a_warning() -> None:
    """Synth withholds the reservation of a stage pinning no account: its deploy does not fail."""
    result = concurrency_check(target(turn_reserved_concurrency=10), 10, 10)
    assert result.ok and result.warning
    assert result.detail.endswith("dev pins no account, so synth reserves none of it and the functions share the pool")


def test_what_the_deployed_stage_reserves_already_counts_as_its_own() -> None:
    deployed = [("voiceide-dev-Turn-a1b2", 500), ("voiceide-dev-Message-c3d4", 50), ("voiceide-dev-Connect-e5f6", 0)]
    result = concurrency_check(
        target(account=ACCOUNT, turn_reserved_concurrency=500, message_reserved_concurrency=50),
        1000,
        450,
        deployed,
    )
    assert result.ok and not result.warning, result.line()
    assert result.detail.endswith("dev asks to reserve 50 for message, 500 for turn")


def test_too_little_room_when_the_stages_reservations_cannot_be_read_is_a_warning() -> None:
    result = concurrency_check(target(account=ACCOUNT, turn_reserved_concurrency=500), 1000, 450, "AccessDenied")
    assert result.ok and result.warning
    assert "allow cloudformation:ListStackResources and lambda:GetFunctionConcurrency" in result.detail


def test_an_account_below_the_planned_concurrency_is_a_warning() -> None:
    checked = target(account=ACCOUNT, turn_reserved_concurrency=10, planned_account_concurrency=3000)
    result = concurrency_check(checked, 1000, 1000)
    assert result.ok and result.warning
    assert "cdk.json plans lambdas.planned_account_concurrency 3,000, which the account does not have" in result.detail
    assert "L-B99A9384" in result.fix


def test_lambda_settings_the_caller_may_not_read_are_not_a_failure() -> None:
    lambda_client = client("lambda")
    with Stubber(lambda_client) as stub:
        stub.add_client_error("get_account_settings", "AccessDeniedException", "not allowed", 403, {})
        result = check_lambda_concurrency(lambda_client, client("cloudformation"), target())
    assert result.line() == "! Lambda concurrency: could not check: allow lambda:GetAccountSettings"


# --- Bedrock quotas -------------------------------------------------------------------------------------


def quota(name: str, value: float) -> dict[str, Any]:
    return {
        "ServiceCode": "bedrock",
        "ServiceName": "Amazon Bedrock",
        "QuotaCode": "L-1A2B3C4D",
        "QuotaName": name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


UNRELATED = [
    quota("Model invocation max tokens per day for Anthropic Claude Haiku 5.5", 5_760_000_000.0),
    quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Sonnet 5.5", 0.0),
    quota("Batch inference job size (in GB)", 5.0),
]


def quotas_check(
    checked: Target,
    applied: list[dict[str, Any]],
    defaults: list[dict[str, Any]] | None = None,
    readings: Readings | None = None,
) -> Any:
    service_quotas = client("service-quotas")
    with Stubber(service_quotas) as stub:
        stub.add_response("list_service_quotas", {"Quotas": applied}, {"ServiceCode": "bedrock"})
        if defaults is not None:
            stub.add_response("list_aws_default_service_quotas", {"Quotas": defaults}, {"ServiceCode": "bedrock"})
        result = check_bedrock_quotas(service_quotas, checked, readings)
        stub.assert_no_pending_responses()
    return result


def test_a_profiles_cross_region_quotas_are_reported_and_read() -> None:
    applied = [
        *UNRELATED,
        quota("On-demand InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 2_000_000.0),
        quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 4_000_000.0),
        quota("Cross-Region InvokeModel requests per minute for Anthropic Claude Haiku 5.5", 2_000.0),
    ]
    readings = Readings()
    assert quotas_check(target(), applied, readings=readings).line() == (
        "✓ Bedrock quotas: us-east-1: Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5 = "
        "4,000,000; Cross-Region InvokeModel requests per minute for Anthropic Claude Haiku 5.5 = 2,000"
    )
    # The profile's cross-Region quotas, not the on-demand one: what doctor records for the model.
    assert (readings.bedrock_tokens_per_minute, readings.bedrock_requests_per_minute) == (4_000_000, 2_000)


HAIKU_QUOTAS = [
    quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 4_000_000.0),
    quota("Cross-Region InvokeModel requests per minute for Anthropic Claude Haiku 5.5", 2_000.0),
]


def test_quotas_cdk_json_plans_within_the_accounts_pass_without_a_hint() -> None:
    planned = target(bedrock_tokens_per_minute=4_000_000, bedrock_requests_per_minute=1_500)
    result = quotas_check(planned, HAIKU_QUOTAS)
    assert result.ok and not result.warning
    assert "cdk.json" not in result.detail and not result.fix


def test_a_planned_quota_above_the_accounts_is_a_warning() -> None:
    planned = target(bedrock_tokens_per_minute=20_000_000, bedrock_requests_per_minute=2_000)
    result = quotas_check(planned, HAIKU_QUOTAS)
    assert result.ok and result.warning
    assert result.detail.endswith(
        "; cdk.json plans bedrock.tokens_per_minute 20,000,000 (the account has 4,000,000): quota the account "
        "does not have"
    )
    assert result.fix == (
        "request the increase in Service Quotas → Amazon Bedrock (us-east-1), or lower the plan in "
        "stages.dev.bedrock of cdk.json"
    )


def test_a_planned_requests_quota_above_the_accounts_is_a_warning_too() -> None:
    planned = target(bedrock_tokens_per_minute=4_000_000, bedrock_requests_per_minute=15_000)
    result = quotas_check(planned, HAIKU_QUOTAS)
    assert result.warning
    assert "bedrock.requests_per_minute 15,000 (the account has 2,000)" in result.detail
    assert "tokens_per_minute 4,000,000" not in result.detail


def test_a_foundation_model_id_counts_against_on_demand_quotas() -> None:
    applied = [
        quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 4_000_000.0),
        quota("On-demand InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 2_000_000.0),
    ]
    result = quotas_check(target(model_id="anthropic.claude-haiku-5-5", profile_regions=()), applied, defaults=[])
    assert result.ok
    assert "On-demand InvokeModel tokens per minute for Anthropic Claude Haiku 5.5 = 2,000,000" in result.detail
    assert "Cross-Region" not in result.detail


def test_a_global_profile_counts_against_global_quotas() -> None:
    applied = [
        quota("Cross-region model inference tokens per minute for Anthropic Claude Sonnet 4.5 V1", 5_000_000.0),
        quota("Global cross-region model inference tokens per minute for Anthropic Claude Sonnet 4.5 V1", 6_000_000.0),
        quota("Global cross-region model inference requests per minute for Anthropic Claude Sonnet 4.5 V1", 0.0),
        quota("Global cross-region model inference tokens per minute for Anthropic Claude Sonnet 4 V1", 7.0),
    ]
    result = quotas_check(
        target(model_id="global.anthropic.claude-sonnet-4-5-20250929-v1:0", profile_regions=("us-east-1",)), applied
    )
    assert not result.ok  # its requests per minute are 0
    assert result.detail == (
        "us-east-1: Global cross-region model inference tokens per minute for Anthropic Claude Sonnet 4.5 V1 = "
        "6,000,000; Global cross-region model inference requests per minute for Anthropic Claude Sonnet 4.5 V1 = 0 "
        "(at 0 every request is throttled)"
    )
    assert result.fix == (
        "request an increase in Service Quotas → Amazon Bedrock (us-east-1) for 'Global cross-region model "
        "inference requests per minute for Anthropic Claude Sonnet 4.5 V1' (new accounts may start at 0)"
    )


def test_a_zero_token_quota_fails() -> None:
    applied = [quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 0.0)]
    result = quotas_check(target(), applied, defaults=[])
    assert not result.ok
    assert "Haiku 5.5 = 0" in result.detail


def test_a_quota_with_no_applied_value_is_read_from_the_defaults() -> None:
    defaults = [quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 4_000_000.0)]
    result = quotas_check(target(), UNRELATED, defaults=defaults)
    assert result.ok and not result.warning
    assert "Haiku 5.5 = 4,000,000 (AWS default)" in result.detail


def test_a_missing_token_quota_is_a_warning() -> None:
    result = quotas_check(target(), UNRELATED, defaults=[])
    assert result.ok and result.warning
    assert result.line().startswith(
        "! Bedrock quotas: us-east-1: no 'Cross-Region … tokens per minute for anthropic.claude-haiku-5-5' quota found"
    )


def test_quotas_the_caller_may_not_read_are_not_a_failure() -> None:
    service_quotas = client("service-quotas")
    with Stubber(service_quotas) as stub:
        stub.add_client_error("list_service_quotas", "AccessDeniedException", "not allowed", 400)
        result = check_bedrock_quotas(service_quotas, target())
    assert result.line() == "! Bedrock quotas: could not check: allow servicequotas:ListServiceQuotas"


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        (
            "Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5",
            ("cross-region", "tokens", "Anthropic Claude Haiku 5.5"),
        ),
        (
            "On-demand InvokeModel requests per minute for Anthropic Claude 3.5 Sonnet "
            "(doubled for cross-region calls)",
            ("on-demand", "requests", "Anthropic Claude 3.5 Sonnet"),
        ),
        (
            "Global cross-region model inference tokens per minute for Anthropic Claude Sonnet 5",
            ("global cross-region", "tokens", "Anthropic Claude Sonnet 5"),
        ),
        (
            "On-demand model invocation requests per minute for Amazon Nova Lite",
            ("on-demand", "requests", "Amazon Nova Lite"),
        ),
        ("Model invocation max tokens per day for Anthropic Claude Haiku 5.5", None),
        ("Cross-region model inference tokens per minute for Anthropic Claude Sonnet 4 V1 1M Context Length", None),
    ],
)
def test_quota_names_are_read(name: str, parsed: tuple[str, str, str] | None) -> None:
    assert parse_quota_name(name) == parsed


@pytest.mark.parametrize(
    ("model", "foundation_id", "names_it"),
    [
        ("Anthropic Claude Haiku 5.5", "anthropic.claude-haiku-5-5", True),
        ("Anthropic Claude Sonnet 5.5", "anthropic.claude-haiku-5-5", False),
        ("Anthropic Claude Sonnet 4 V1", "anthropic.claude-sonnet-4-5-20250929-v1:0", False),
        ("Anthropic Claude Sonnet 4.5 V1", "anthropic.claude-sonnet-4-5-20250929-v1:0", True),
        ("Anthropic Claude 3.5 Sonnet V2", "anthropic.claude-3-5-sonnet-20241022-v2:0", True),
        ("Anthropic Claude 3.5 Sonnet V2", "anthropic.claude-3-5-sonnet-20240620-v1:0", False),
        ("Amazon Nova Lite", "amazon.nova-lite-v1:0", True),
        ("Amazon Nova Lite", "amazon.nova-2-lite-v1:0", False),
        ("Meta Llama 3.1 70B Instruct", "meta.llama3-1-70b-instruct-v1:0", True),
    ],
)
def test_a_quota_names_its_model_exactly(model: str, foundation_id: str, names_it: bool) -> None:
    assert quota_names_model(model, foundation_id) is names_it


# --- the stack and its table ----------------------------------------------------------------------------


def test_a_stack_the_caller_may_not_read_leaves_stack_and_table_unchecked() -> None:
    cloudformation, dynamodb = client("cloudformation"), client("dynamodb")
    with Stubber(cloudformation) as stub:
        stub.add_client_error("describe_stacks", "AccessDenied", "not allowed", 403, {"StackName": STACK})
        results = check_stack_and_table(cloudformation, dynamodb, target())
    assert [result.line() for result in results] == [
        f"! stack: could not check: allow cloudformation:DescribeStacks on {STACK}",
        "! table: could not check: allow cloudformation:DescribeStacks (the table's name is a stack output)",
    ]
    assert all(result.ok for result in results)
