"""``doctor``'s Bedrock checks, each against the real botocore client with a Stubber: requests and
responses are validated against the installed service models, errors are Bedrock's codes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from conductor_local.doctor.bedrock import (
    check_converse,
    check_inference_profile,
    check_model_availability,
    check_use_case,
    model_checks,
    probe_request,
)
from conductor_local.doctor.common import CheckResult, Target
from shared.wire.model_rules import Inference, request_fields, rules_for

REGION = "us-east-1"
PROFILE_ID = "us.anthropic.claude-haiku-5-5"
FOUNDATION_ID = "anthropic.claude-haiku-5-5"
ROUTES = ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
DENIED = "User: arn:aws:iam::123456789012:user/dev is not authorized to perform: {action}"


def target(**changes: Any) -> Target:
    settings: dict[str, Any] = {
        "stage": "dev",
        "stack_name": "VoiceIDEConductor-dev",
        "region": REGION,
        "model_id": PROFILE_ID,
        "bedrock_region": REGION,
        "profile_regions": ROUTES,
        **changes,
    }
    return Target(**settings)


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def bedrock() -> Iterator[tuple[Any, Stubber]]:
    bedrock = client("bedrock")
    with Stubber(bedrock) as stub:
        yield bedrock, stub
        stub.assert_no_pending_responses()


def profile(regions: tuple[str, ...], status: str = "ACTIVE") -> dict[str, Any]:
    return {
        "inferenceProfileName": "US Anthropic Claude Haiku 5.5",
        "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:123456789012:inference-profile/{PROFILE_ID}",
        "inferenceProfileId": PROFILE_ID,
        "models": [{"modelArn": f"arn:aws:bedrock:{region}::foundation-model/{FOUNDATION_ID}"} for region in regions],
        "status": status,
        "type": "SYSTEM_DEFINED",
    }


def availability(**fields: Any) -> dict[str, Any]:
    return {
        "modelId": FOUNDATION_ID,
        "agreementAvailability": {"status": "AVAILABLE"},
        "authorizationStatus": "AUTHORIZED",
        "entitlementAvailability": "AVAILABLE",
        "regionAvailability": "AVAILABLE",
        **fields,
    }


def lines(results: list[CheckResult]) -> list[str]:
    return [result.line() for result in results]


# --- the regions the profile really routes to ------------------------------------------------------


def test_profile_regions_matching_cdk_json_pass(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    stub.add_response("get_inference_profile", profile(ROUTES), {"inferenceProfileIdentifier": PROFILE_ID})
    results, foundation_ids = check_inference_profile(client_, target())
    assert foundation_ids == [FOUNDATION_ID]
    assert lines(results) == [
        f"✓ inference profile: {PROFILE_ID} is ACTIVE, routes to us-east-1, us-east-2, us-west-1, us-west-2",
        "✓ profile regions: cdk.json grants exactly the regions the profile routes to (4)",
    ]


def test_a_route_missing_from_cdk_json_fails_with_the_list_to_put_there(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    stub.add_response("get_inference_profile", profile(ROUTES), {"inferenceProfileIdentifier": PROFILE_ID})
    results, _ = check_inference_profile(client_, target(profile_regions=("us-east-1", "us-west-2", "ca-central-1")))
    regions = results[1]
    assert not regions.ok
    assert regions.line() == (
        "✗ profile regions: the profile routes to us-east-2, us-west-1, which bedrock.inference_profile_regions "
        "does not list (the turn runner's grant would deny requests routed there) → set "
        '"inference_profile_regions": ["us-east-1", "us-east-2", "us-west-1", "us-west-2"] under bedrock in '
        "cdk.json and deploy again"
    )


def test_a_region_the_profile_does_not_route_to_is_a_warning(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    routes = ("us-east-1", "us-east-2", "us-west-2")
    stub.add_response("get_inference_profile", profile(routes), {"inferenceProfileIdentifier": PROFILE_ID})
    results, _ = check_inference_profile(client_, target())
    regions = results[1]
    assert regions.ok and regions.warning
    assert regions.line() == (
        "! profile regions: cdk.json also grants us-west-1, where the profile does not route → harmless; to keep "
        'the grant exact set "inference_profile_regions": ["us-east-1", "us-east-2", "us-west-2"] under bedrock '
        "in cdk.json"
    )


def test_an_unreadable_profile_is_not_a_failure(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    stub.add_client_error(
        "get_inference_profile",
        "AccessDeniedException",
        DENIED.format(action="bedrock:GetInferenceProfile"),
        403,
        {"inferenceProfileIdentifier": PROFILE_ID},
    )
    results, foundation_ids = check_inference_profile(client_, target())
    assert lines(results) == [
        f"! inference profile: could not check: allow bedrock:GetInferenceProfile on {PROFILE_ID}"
    ]
    assert results[0].ok
    assert foundation_ids == [FOUNDATION_ID]  # the model behind the id is still checked


# --- model access -----------------------------------------------------------------------------------


def test_an_available_model_is_one_line(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    stub.add_response("get_foundation_model_availability", availability(), {"modelId": FOUNDATION_ID})
    assert lines(check_model_availability(client_, target(), FOUNDATION_ID)) == [
        f"✓ model access: {FOUNDATION_ID} in us-east-1: regionAvailability AVAILABLE, authorizationStatus "
        "AUTHORIZED, entitlementAvailability AVAILABLE, agreementAvailability AVAILABLE"
    ]


def test_no_marketplace_subscription_says_who_must_invoke_first(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    response = availability(entitlementAvailability="NOT_AVAILABLE", agreementAvailability={"status": "NOT_AVAILABLE"})
    stub.add_response("get_foundation_model_availability", response, {"modelId": FOUNDATION_ID})
    (result,) = check_model_availability(client_, target(), FOUNDATION_ID)
    assert not result.ok
    assert result.detail == (
        f"{FOUNDATION_ID} in us-east-1: entitlementAvailability NOT_AVAILABLE, agreementAvailability NOT_AVAILABLE "
        "(no AWS Marketplace subscription to the model yet)"
    )
    assert "aws-marketplace:Subscribe, aws-marketplace:ViewSubscriptions" in result.fix
    assert "valid payment method" in result.fix


def test_a_pending_agreement_is_a_warning(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    response = availability(agreementAvailability={"status": "PENDING"})
    stub.add_response("get_foundation_model_availability", response, {"modelId": FOUNDATION_ID})
    (result,) = check_model_availability(client_, target(), FOUNDATION_ID)
    assert result.ok and result.warning
    assert "agreementAvailability PENDING" in result.line()


def test_a_failed_agreement_points_at_the_payment_method(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    response = availability(
        agreementAvailability={"status": "ERROR", "errorMessage": "The payment instrument is not valid."}
    )
    stub.add_response("get_foundation_model_availability", response, {"modelId": FOUNDATION_ID})
    (result,) = check_model_availability(client_, target(), FOUNDATION_ID)
    assert not result.ok
    assert "agreementAvailability ERROR (The payment instrument is not valid.)" in result.detail
    assert "Payment preferences" in result.fix


def test_an_unauthorized_or_unavailable_model_fails_field_by_field(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    response = availability(authorizationStatus="NOT_AUTHORIZED", regionAvailability="NOT_AVAILABLE")
    stub.add_response("get_foundation_model_availability", response, {"modelId": FOUNDATION_ID})
    results = check_model_availability(client_, target(), FOUNDATION_ID)
    assert [result.ok for result in results] == [False, False]
    assert "regionAvailability NOT_AVAILABLE" in results[0].detail
    assert "authorizationStatus NOT_AUTHORIZED" in results[1].detail
    assert "service control policy" in results[1].fix and "use case form" in results[1].fix


def test_availability_the_caller_may_not_read_is_not_a_failure(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    stub.add_client_error(
        "get_foundation_model_availability",
        "AccessDeniedException",
        DENIED.format(action="bedrock:GetFoundationModelAvailability"),
        403,
        {"modelId": FOUNDATION_ID},
    )
    (result,) = check_model_availability(client_, target(), FOUNDATION_ID)
    assert result.ok and result.warning
    assert result.line() == (
        f"! model access: could not check: allow bedrock:GetFoundationModelAvailability on {FOUNDATION_ID}"
    )


def test_the_use_case_form(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    stub.add_response("get_use_case_for_model_access", {"formData": b'{"companyName": "Example"}'}, {})
    stub.add_client_error("get_use_case_for_model_access", "ResourceNotFoundException", "Not found", 404, {})
    stub.add_client_error("get_use_case_for_model_access", "AccessDeniedException", "Denied", 403, {})
    assert check_use_case(client_).line() == (
        "✓ Anthropic use case: the account's use case form for Anthropic models is submitted"
    )
    missing = check_use_case(client_)
    assert missing.ok and missing.warning  # the organization's form may cover the account
    assert missing.detail == "no use case form submitted in this account"
    assert "put-use-case-for-model-access" in missing.fix and "management account" in missing.fix
    assert check_use_case(client_).line() == (
        "! Anthropic use case: could not check: allow bedrock:GetUseCaseForModelAccess"
    )


def test_a_foundation_model_of_another_provider_skips_the_use_case(bedrock: tuple[Any, Stubber]) -> None:
    client_, stub = bedrock
    nova = "amazon.nova-lite-v1:0"
    details = {
        "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{nova}",
        "modelId": nova,
        "modelLifecycle": {"status": "ACTIVE"},
    }
    stub.add_response("get_foundation_model", {"modelDetails": details}, {"modelIdentifier": nova})
    stub.add_response("get_foundation_model_availability", {**availability(), "modelId": nova}, {"modelId": nova})
    results = model_checks(client_, target(model_id=nova, profile_regions=()))
    assert [result.name for result in results] == ["model lifecycle", "model access"]
    assert all(result.ok and not result.warning for result in results)


# --- the probe sends what the turn runner sends ------------------------------------------------------


@pytest.mark.parametrize("model_id", [PROFILE_ID, "us.anthropic.claude-sonnet-5-5", "amazon.nova-lite-v1:0"])
def test_the_probe_is_the_turn_runners_request_for_one_token(model_id: str) -> None:
    fields = probe_request(target(model_id=model_id))
    assert fields == request_fields(rules_for(model_id), Inference(max_tokens=1, effort="low", thinking="off"))
    if not rules_for(model_id).sampling:
        assert "temperature" not in fields["inferenceConfig"]  # Bedrock refuses it with a 400


def test_the_stages_effort_and_thinking_reach_the_probe() -> None:
    fields = probe_request(target(effort="medium", thinking="adaptive"))
    assert fields == request_fields(
        rules_for(PROFILE_ID), Inference(max_tokens=1, effort="medium", thinking="adaptive")
    )


def test_converse_sends_exactly_the_probe() -> None:
    runtime = client("bedrock-runtime")
    checked = target()
    reply = {
        "output": {"message": {"role": "assistant", "content": [{"text": "OK"}]}},
        "stopReason": "max_tokens",
        "usage": {"inputTokens": 11, "outputTokens": 1, "totalTokens": 12},
        "metrics": {"latencyMs": 180},
    }
    expected = {
        "modelId": PROFILE_ID,
        "messages": [{"role": "user", "content": [{"text": "Reply with OK."}]}],
        **probe_request(checked),
    }
    with Stubber(runtime) as stub:
        stub.add_response("converse", reply, expected)
        stub.add_client_error("converse", "ValidationException", "temperature is deprecated for this model.", 400)
        assert check_converse(runtime, checked).ok
        refused = check_converse(runtime, checked)
    assert not refused.ok
    assert "shared/wire/model_rules.py" in refused.fix
