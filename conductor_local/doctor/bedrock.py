"""``doctor``'s Bedrock checks: the inference profile and the regions it really routes to, each
foundation model's lifecycle and the account's access to it (Marketplace subscription, Anthropic's
use-case form), and one ``Converse`` call built exactly as the turn runner builds its requests."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from botocore.exceptions import ClientError

from conductor_local.doctor.common import (
    CheckResult,
    Target,
    code,
    could_not_check,
    date,
    denied,
    error_text,
    message,
    warning,
)
from shared.wire.model_rules import Inference, ThinkingSetting, request_fields, rules_for

_FOUNDATION_MODEL_ARN = re.compile(r"^arn:aws[a-z-]*:bedrock:([a-z0-9-]*)::foundation-model/(.+)$")
_ACCESS_DENIED = "AccessDeniedException"
MARKETPLACE_ACTIONS = "aws-marketplace:Subscribe, aws-marketplace:ViewSubscriptions"
FIRST_INVOCATION = (
    "Bedrock subscribes the account through AWS Marketplace on the model's first invocation by a caller "
    f"allowed {MARKETPLACE_ACTIONS} (the stage's Lambda roles are not), with a valid payment method on the "
    "account: invoke it once as such a caller (doctor's model invocation check does), wait up to 15 minutes "
    "and run doctor again"
)
USE_CASE_FORM = (
    "submit Anthropic's one-time use case form: Bedrock console → Model catalog → an Anthropic model → submit "
    "use case details, or aws bedrock put-use-case-for-model-access --form-data <base64 JSON>; a form "
    "submitted in the organization's management account covers its member accounts"
)


def model_checks(bedrock: Any, target: Target) -> list[CheckResult]:
    """The profile and its routes, then each foundation model's lifecycle and access, then the
    account's Anthropic use case form when a model is Anthropic's."""
    results, foundation_ids = check_inference_profile(bedrock, target)
    for foundation_id in foundation_ids:
        results.append(check_model_lifecycle(bedrock, target, foundation_id))
        results.extend(check_model_availability(bedrock, target, foundation_id))
    if any(foundation_id.startswith("anthropic.") for foundation_id in foundation_ids):
        results.append(check_use_case(bedrock))
    return results


# --- the inference profile and its routes ----------------------------------------------------------


def check_inference_profile(bedrock: Any, target: Target) -> tuple[list[CheckResult], list[str]]:
    """``GetInferenceProfile`` for a profile id: its status, and the regions its models' ARNs name
    compared with cdk.json. With the foundation model ids behind it (the id itself for a foundation
    model, or when the profile cannot be read)."""
    if not target.is_profile:
        return [], [target.model_id]
    name = "inference profile"
    try:
        profile = bedrock.get_inference_profile(inferenceProfileIdentifier=target.model_id)
    except ClientError as error:
        if code(error) == "ResourceNotFoundException":
            missing = CheckResult(
                name,
                False,
                f"{target.model_id} does not exist in {target.bedrock_region}",
                "use a profile id Bedrock lists there (aws bedrock list-inference-profiles) in cdk.json",
            )
            return [missing], []
        if denied(error):
            return [could_not_check(name, "bedrock:GetInferenceProfile", target.model_id)], [target.foundation_id]
        return [CheckResult(name, False, error_text(error), "see the message")], [target.foundation_id]
    routes = [_FOUNDATION_MODEL_ARN.match(model.get("modelArn", "")) for model in profile.get("models", [])]
    foundation_ids = sorted({match.group(2) for match in routes if match}) or [target.foundation_id]
    regions = sorted({match.group(1) for match in routes if match and match.group(1)})
    status = profile.get("status", "unknown")
    results = [
        CheckResult(
            name,
            status == "ACTIVE",
            f"{target.model_id} is {status}, routes to {', '.join(regions) or 'all commercial regions'}",
            "choose an Active inference profile for bedrock.model_id in cdk.json",
        )
    ]
    if not target.is_global_profile:
        results.append(check_profile_regions(target, regions))
    return results, foundation_ids


def check_profile_regions(target: Target, routed: Sequence[str]) -> CheckResult:
    """The regions the profile routes to (read from Bedrock) against ``bedrock.inference_profile_regions``,
    which the turn runner's IAM grant is built from: a route the grant lacks is denied."""
    name = "profile regions"
    granted = set(target.profile_regions)
    missing = sorted(set(routed) - granted)
    extra = sorted(granted - set(routed))
    exact = f'"inference_profile_regions": {json.dumps(sorted(routed))}'
    if missing:
        return CheckResult(
            name,
            False,
            f"the profile routes to {', '.join(missing)}, which bedrock.inference_profile_regions does not list "
            "(the turn runner's grant would deny requests routed there)",
            f"set {exact} under bedrock in cdk.json and deploy again",
        )
    if extra:
        return warning(
            name,
            f"cdk.json also grants {', '.join(extra)}, where the profile does not route",
            f"harmless; to keep the grant exact set {exact} under bedrock in cdk.json",
        )
    return CheckResult(name, True, f"cdk.json grants exactly the regions the profile routes to ({len(routed)})")


# --- each foundation model: lifecycle and access ---------------------------------------------------


def check_model_lifecycle(bedrock: Any, target: Target, foundation_id: str) -> CheckResult:
    """``GetFoundationModel``: ACTIVE passes, LEGACY fails with its dates."""
    name = "model lifecycle"
    try:
        details = bedrock.get_foundation_model(modelIdentifier=foundation_id)["modelDetails"]
    except ClientError as error:
        if code(error) == "ResourceNotFoundException":
            return CheckResult(
                name,
                False,
                f"{foundation_id} is not offered in {target.bedrock_region} (end of life, or never there)",
                "move bedrock.model_id in cdk.json to an Active model (docs/deploying.md, Models)",
            )
        if denied(error):
            return could_not_check(name, "bedrock:GetFoundationModel", foundation_id)
        return CheckResult(name, False, error_text(error), "see the message")
    lifecycle = details.get("modelLifecycle", {})
    status = lifecycle.get("status", "unknown")
    if status == "ACTIVE":
        return CheckResult(name, True, f"{foundation_id} is ACTIVE")
    dates = [
        f"{label} {date(lifecycle[key])}"
        for key, label in (("legacyTime", "legacy since"), ("endOfLifeTime", "end of life"))
        if key in lifecycle
    ]
    return CheckResult(
        name,
        False,
        f"{foundation_id} is {status}" + (f" ({', '.join(dates)})" if dates else ""),
        "move bedrock.model_id in cdk.json to an Active model and deploy (docs/deploying.md, Models)",
    )


def check_model_availability(bedrock: Any, target: Target, foundation_id: str) -> list[CheckResult]:
    """``GetFoundationModelAvailability``: whether the account may use the model in the Bedrock
    region, field by field as Bedrock names them; one line when all is well, one per problem."""
    name = "model access"
    try:
        found = bedrock.get_foundation_model_availability(modelId=foundation_id)
    except ClientError as error:
        if denied(error):
            return [could_not_check(name, "bedrock:GetFoundationModelAvailability", foundation_id)]
        if code(error) == "ResourceNotFoundException":
            return [
                CheckResult(
                    name,
                    False,
                    f"Bedrock knows no {foundation_id} in {target.bedrock_region}",
                    "move bedrock.model_id in cdk.json to a model offered there (docs/deploying.md, Models)",
                )
            ]
        return [warning(name, f"could not check: {error_text(error)}")]
    where = f"{foundation_id} in {target.bedrock_region}"
    region = found.get("regionAvailability", "unknown")
    authorization = found.get("authorizationStatus", "unknown")
    entitlement = found.get("entitlementAvailability", "unknown")
    agreement = found.get("agreementAvailability", {})
    agreement_status = agreement.get("status", "unknown")
    results: list[CheckResult] = []
    if region != "AVAILABLE":
        results.append(
            CheckResult(
                name,
                False,
                f"{where}: regionAvailability {region} (the model is not offered in this region)",
                "use a region or inference profile that offers it (bedrock.region, bedrock.model_id in cdk.json)",
            )
        )
    if authorization != "AUTHORIZED":
        results.append(
            CheckResult(
                name,
                False,
                f"{where}: authorizationStatus {authorization} (this account may not use the model)",
                "look for an IAM policy or service control policy denying bedrock:InvokeModel* on it"
                + ("; for an Anthropic model, " + USE_CASE_FORM if foundation_id.startswith("anthropic.") else ""),
            )
        )
    if entitlement != "AVAILABLE" or agreement_status == "NOT_AVAILABLE":
        results.append(
            CheckResult(
                name,
                False,
                f"{where}: entitlementAvailability {entitlement}, agreementAvailability {agreement_status} "
                "(no AWS Marketplace subscription to the model yet)",
                FIRST_INVOCATION,
            )
        )
    if agreement_status == "PENDING":
        results.append(
            warning(
                name,
                f"{where}: agreementAvailability PENDING (the Marketplace subscription is being set up, up to "
                "15 minutes; invocations may be refused meanwhile)",
                "run doctor again in a few minutes",
            )
        )
    elif agreement_status == "ERROR":
        reason = agreement.get("errorMessage") or "no reason given"
        results.append(
            CheckResult(
                name,
                False,
                f"{where}: agreementAvailability ERROR ({reason})",
                "the Marketplace subscription failed: check the account's payment method (Billing and Cost "
                f"Management → Payment preferences) and that the first caller is allowed {MARKETPLACE_ACTIONS}, "
                "then invoke the model once more",
            )
        )
    if results:
        return results
    return [
        CheckResult(
            name,
            True,
            f"{where}: regionAvailability {region}, authorizationStatus {authorization}, "
            f"entitlementAvailability {entitlement}, agreementAvailability {agreement_status}",
        )
    ]


def check_use_case(bedrock: Any) -> CheckResult:
    """``GetUseCaseForModelAccess``: Anthropic's one-time use case form of this account. Not found is
    a warning, not a failure: a form submitted in the organization's management account covers the
    account too, and the model invocation check says whether the model answers."""
    name = "Anthropic use case"
    try:
        bedrock.get_use_case_for_model_access()
    except ClientError as error:
        if denied(error):
            return could_not_check(name, "bedrock:GetUseCaseForModelAccess")
        if code(error) == "ResourceNotFoundException":
            return warning(name, "no use case form submitted in this account", USE_CASE_FORM)
        return warning(name, f"could not check: {error_text(error)}")
    return CheckResult(name, True, "the account's use case form for Anthropic models is submitted")


# --- one token, as the turn runner asks ------------------------------------------------------------


def probe_request(target: Target) -> dict[str, Any]:
    """What the turn runner sends the model, minus the conversation, for one output token:
    ``inferenceConfig`` and, where the model has them, its thinking and effort fields."""
    inference = Inference(max_tokens=1, effort=target.effort, thinking=cast(ThinkingSetting, target.thinking))
    return request_fields(rules_for(target.model_id), inference)


def check_converse(runtime: Any, target: Target) -> CheckResult:
    """One ``Converse`` call with the fields the turn runner sends (``probe_request``)."""
    name = "model invocation"
    fields = probe_request(target)
    try:
        runtime.converse(
            modelId=target.model_id,
            messages=[{"role": "user", "content": [{"text": "Reply with OK."}]}],
            **fields,
        )
    except ClientError as error:
        return CheckResult(name, False, error_text(error), _converse_fix(error, target))
    return CheckResult(
        name, True, f"Converse with {target.model_id} answered ({_described(fields)}, as the turn runner sends)"
    )


def _described(fields: dict[str, Any]) -> str:
    sent = [f"maxTokens {fields['inferenceConfig']['maxTokens']}"]
    if thinking := fields.get("additionalModelRequestFields", {}).get("thinking"):
        sent.append(f"thinking {thinking.get('type')}")
    if effort := fields.get("outputConfig", {}).get("effort"):
        sent.append(f"effort {effort}")
    return ", ".join(sent)


def _converse_fix(error: ClientError, target: Target) -> str:
    error_code, text = code(error), message(error).lower()
    if error_code == _ACCESS_DENIED and "use case" in text:
        return USE_CASE_FORM + ", then run doctor again"
    if error_code == _ACCESS_DENIED and "marketplace" in text:
        return (
            f"the first use of the model subscribes the account through AWS Marketplace: allow the caller "
            f"{MARKETPLACE_ACTIONS} and aws-marketplace:Unsubscribe (or have an administrator invoke the model "
            "once), then run doctor again"
        )
    if error_code == _ACCESS_DENIED and ("model access" in text or "access to the model" in text):
        return (
            "the account cannot use the model yet: see the model access lines above (Marketplace subscription "
            "on first invocation, Anthropic's use case form, a valid payment method)"
        )
    if error_code == _ACCESS_DENIED:
        regions = ", ".join(target.profile_regions) or target.bedrock_region
        return f"allow the caller bedrock:InvokeModel on {target.model_id} and its foundation model in {regions}"
    if error_code == "ResourceNotFoundException" or (error_code == "ValidationException" and "end of its life" in text):
        return "move bedrock.model_id in cdk.json to an Active model and deploy (docs/deploying.md, Models)"
    if error_code == "ValidationException":
        return (
            "the turn runner sends the same fields, so every turn would fail too: the model's row in "
            "shared/wire/model_rules.py must match what Bedrock accepts"
        )
    if error_code == "ThrottlingException":
        return "the account's Bedrock quota for this model is exhausted right now: try again, or request more"
    return "see the message: the deployed turn runner would get the same answer"
