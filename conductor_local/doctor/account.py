"""``doctor``'s account checks: API Gateway's account-level CloudWatch Logs role, Lambda's concurrency
against what the stage asks to reserve, and the Bedrock quotas of the stage's model (Service Quotas). The
quotas they read go into a ``Readings`` that doctor records in cdk.context.json."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from conductor_local.doctor.common import (
    CheckResult,
    Readings,
    Target,
    code,
    could_not_check,
    denied,
    error_text,
    message,
    warning,
)
from shared.wire.model_rules import base_model_id, claude_version

ROLE_ERROR = "CloudWatch Logs role ARN must be set in account settings to enable logging"
# Lambda keeps this much of the account's concurrency unreserved (all of it below 100).
MIN_UNRESERVED = 100
LAMBDA_DEFAULT_CONCURRENCY = 1000
LAMBDA_CONCURRENCY_QUOTA = "Service Quotas → AWS Lambda → Concurrent executions (L-B99A9384)"


# --- API Gateway: the account's CloudWatch Logs role -----------------------------------------------


def check_cloudwatch_role(apigateway: Any, target: Target) -> CheckResult:
    """``GetAccount`` → ``cloudwatchRoleArn``: WebSocket access logging needs it, one setting per
    account and region; a stage that logs and does not set it fails to deploy without it."""
    name = "API Gateway logging role"
    try:
        role = apigateway.get_account().get("cloudwatchRoleArn")
    except ClientError as error:
        if denied(error):
            return could_not_check(name, "apigateway:GET", f"arn:aws:apigateway:{target.region}::/account")
        return warning(name, f"could not check: {error_text(error)}")
    setting = f'access_logging "{target.access_logging_setting}"' if target.access_logging_setting else ""
    if role:
        detail = f"{role} is the account's CloudWatch Logs role in {target.region}"
        if target.creates_cloudwatch_role:
            return CheckResult(name, True, f"{detail}; deploying {target.stage} points the setting at its own role")
        if target.access_logging:
            return CheckResult(name, True, f"{detail}; {target.stage}'s access logs use it")
        hint = '; "access_logging": "on" would turn them on' if target.access_logging_setting == "auto" else ""
        return CheckResult(name, True, f"{detail}; {target.stage} writes no access logs ({setting}){hint}")
    if target.creates_cloudwatch_role:
        return CheckResult(
            name, True, f"not set in {target.region} yet: {target.stage} sets it (api_gateway_cloudwatch_role: true)"
        )
    if not target.access_logging:
        return CheckResult(
            name,
            True,
            f"not set in {target.region}; {target.stage} writes no access logs"
            + (f" ({setting})" if setting else "")
            + " and deploys without it",
        )
    owners = [stage for stage in target.role_owners if stage != target.stage]
    first = (
        f"deploy {owners[0]} first, which sets it (npx aws-cdk@2 deploy -c stage={owners[0]})"
        if owners
        else f'set "api_gateway_cloudwatch_role": true for {target.stage} in cdk.json (one stage per account and '
        "region owns it)"
    )
    return CheckResult(
        name,
        False,
        f"not set in {target.region}: {target.stage}'s WebSocket access logs"
        + (f" ({setting})" if setting else "")
        + f' need it and the stage does not set it, so its deploy fails with "{ROLE_ERROR}"',
        f"{first}; or set one by hand: aws apigateway update-account --patch-operations "
        "op=replace,path=/cloudwatchRoleArn,value=<ARN of a role apigateway.amazonaws.com may assume, with the "
        "AmazonAPIGatewayPushToCloudWatchLogs policy>"
        + ('; or set "access_logging": "auto" (no access logs until the role is set)' if setting else ""),
    )


# --- Lambda: concurrency ---------------------------------------------------------------------------


def check_lambda_concurrency(
    lambda_client: Any, cloudformation: Any, target: Target, readings: Readings | None = None
) -> CheckResult:
    """``GetAccountSettings``: the account's concurrency (``AccountLimit.ConcurrentExecutions``) against
    what the stage asks to reserve (its deployed functions' reservations already count as taken). Lambda
    refuses a reservation that leaves less than 100 unreserved, and the deploy fails. Synth applies the
    reservation only for a stage that pins its account and has a reading of it (``readings`` collects
    this one, which doctor records), so a stage that pins none deploys without it."""
    name = "Lambda concurrency"
    try:
        limits = lambda_client.get_account_settings()["AccountLimit"]
    except ClientError as error:
        if denied(error):
            return could_not_check(name, "lambda:GetAccountSettings")
        return warning(name, f"could not check: {error_text(error)}")
    limit = int(limits.get("ConcurrentExecutions", 0))
    unreserved = int(limits.get("UnreservedConcurrentExecutions", 0))
    if readings is not None:
        readings.lambda_concurrency, readings.lambda_unreserved = limit, unreserved
    figures = f"ConcurrentExecutions {limit:,}, UnreservedConcurrentExecutions {unreserved:,} in {target.region}"
    wanted = target.reserved_concurrency
    needed = sum(wanted.values())
    asked = ", ".join(f"{count:,} for {function}" for function, count in wanted.items())
    stage = f"{target.stage} asks to reserve {asked}" if wanted else f"{target.stage} reserves none"
    held = _reserved_by_stack(lambda_client, cloudformation, target.stack_name) if needed else 0
    floor = min(MIN_UNRESERVED, limit)
    room = max(unreserved + (held or 0) - floor, 0)
    more = f"request more in {LAMBDA_CONCURRENCY_QUOTA}"
    lower = "or lower lambdas.reserved_concurrency / lambdas.turn_reserved_concurrency in cdk.json (null: none)"
    unpinned = f"{target.stage} pins no account, so synth reserves none of it and the functions share the pool"
    if needed > room:
        detail = f"{figures}; {stage}, but only {room:,} more can be reserved (Lambda keeps {floor:,} unreserved)"
        fix = f"{more}, {lower}"
        if target.account is None:
            return warning(name, f"{detail}; {unpinned}", fix)
        if held is None:  # the stage may already hold its reservations: not known to fail
            return warning(
                name,
                detail + " (what its deployed functions reserve now could not be read: allow "
                "cloudformation:ListStackResources and lambda:GetFunctionConcurrency)",
                fix,
            )
        return CheckResult(
            name, False, detail + "; the deploy would fail (synth refuses the reservation with this reading)", fix
        )
    if needed and target.account is None:
        return warning(
            name,
            f"{figures}; {stage}, but {unpinned}",
            'to reserve, pin the account (the "quota reading" line says which) and commit cdk.context.json',
        )
    planned = target.planned_account_concurrency
    if planned is not None and limit < planned:
        return warning(
            name,
            f"{figures}; {stage}; cdk.json plans lambdas.planned_account_concurrency {planned:,}, which the account "
            "does not have (synth never trusts the plan)",
            more,
        )
    if limit < LAMBDA_DEFAULT_CONCURRENCY:
        return warning(
            name,
            f"{figures}; {stage}: the account's limit is below Lambda's default of {LAMBDA_DEFAULT_CONCURRENCY:,} "
            "(new accounts start lower), and each live turn and each person speaking hold a turn runner "
            "execution",
            more,
        )
    return CheckResult(name, True, f"{figures}; {stage}")


def _reserved_by_stack(lambda_client: Any, cloudformation: Any, stack_name: str) -> int | None:
    """What the stack's deployed functions reserve now (0 when it is not deployed; None when it
    cannot be read)."""
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        functions = [
            resource["PhysicalResourceId"]
            for page in pages
            for resource in page.get("StackResourceSummaries", [])
            if resource.get("ResourceType") == "AWS::Lambda::Function" and resource.get("PhysicalResourceId")
        ]
        return sum(
            int(lambda_client.get_function_concurrency(FunctionName=function).get("ReservedConcurrentExecutions", 0))
            for function in functions
        )
    except ClientError as error:
        if code(error) == "ValidationError" and "does not exist" in message(error):
            return 0
        return None


# --- Bedrock: the model's quotas -------------------------------------------------------------------

# "Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", "Global cross-region model
# inference requests per minute for Anthropic Claude Sonnet 4.5 V1", "On-demand model inference tokens per
# minute for Amazon Nova Lite", ... (Service Quotas has named them several ways over time).
_QUOTA_NAME = re.compile(
    r"^(?P<scope>global cross-region|cross-region|on-demand)\s+(?:invokemodel|model inference|model invocation)\s+"
    r"(?P<metric>tokens|requests) per minute for (?P<model>.+?)\s*$",
    re.IGNORECASE,
)
_CLAUDE_IN_QUOTA = re.compile(
    r"claude\s+(?:(?P<version>\d+(?:\.\d+)?)\s+(?P<family>[a-z]+)|(?P<family2>[a-z]+)\s+(?P<version2>\d+(?:\.\d+)?))"
    r"(?:\s+v(?P<revision>\d+))?$"
)
SCOPE_NAMES = {"on-demand": "On-demand", "cross-region": "Cross-Region", "global cross-region": "Global cross-Region"}


def quota_scope(target: Target) -> str:
    """Which quotas the turn runner's requests count against: a foundation model id's on-demand
    ones, a geographic profile's cross-region ones, a ``global.`` profile's global ones."""
    if target.is_global_profile:
        return "global cross-region"
    return "cross-region" if target.is_profile else "on-demand"


def parse_quota_name(name: str) -> tuple[str, str, str] | None:
    """``(scope, metric, model)`` of a Bedrock per-model per-minute quota's name, None for any other
    (per-day quotas, long-context variants, other services' quotas)."""
    plain = re.sub(r"\s*\([^)]*\)", "", name).strip()
    if "context length" in plain.lower():
        return None
    match = _QUOTA_NAME.match(plain)
    if match is None:
        return None
    return match["scope"].lower(), match["metric"].lower(), match["model"]


def quota_names_model(model: str, foundation_id: str) -> bool:
    """Whether a quota's model ("Anthropic Claude Haiku 5.5", "Anthropic Claude 3.5 Sonnet V2",
    "Amazon Nova Lite") is ``foundation_id``."""
    text = model.lower()
    if (version := claude_version(foundation_id)) is not None:
        match = _CLAUDE_IN_QUOTA.search(text)
        if match is None:
            return False
        family = match["family"] or match["family2"]
        number = float(match["version"] or match["version2"])
        revision = re.search(r"-v(\d+)(?::[a-z0-9]+)*$", foundation_id)
        if match["revision"] and revision and match["revision"] != revision.group(1):
            return False
        return (family, number) == version
    bare_id = re.sub(r"(-v\d+)?(:[a-z0-9]+)*$", "", base_model_id(foundation_id))
    return _key(re.sub(r"\s+v\d+$", "", text)) == _key(bare_id)


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _model_quotas(quotas: Iterable[dict[str, Any]], scope: str, foundation_id: str) -> dict[str, list[dict[str, Any]]]:
    """The quotas of ``scope`` naming ``foundation_id``, by metric (tokens, requests)."""
    found: dict[str, list[dict[str, Any]]] = {"tokens": [], "requests": []}
    for quota in quotas:
        parsed = parse_quota_name(quota.get("QuotaName", ""))
        if parsed and parsed[0] == scope and quota_names_model(parsed[2], foundation_id):
            found[parsed[1]].append(quota)
    return found


def _bedrock_quotas(service_quotas: Any, operation: str) -> list[dict[str, Any]]:
    pages = service_quotas.get_paginator(operation).paginate(ServiceCode="bedrock")
    return [quota for page in pages for quota in page.get("Quotas", [])]


def check_bedrock_quotas(service_quotas: Any, target: Target, readings: Readings | None = None) -> CheckResult:
    """Service Quotas' ``ListServiceQuotas`` (and the AWS defaults for what the account has no
    applied value of): the model's tokens and requests per minute, in the scope its id calls for.
    A quota of 0 throttles every request; a missing tokens-per-minute quota is worth a look. The lowest
    value of each metric goes into ``readings`` (doctor records it)."""
    name = "Bedrock quotas"
    scope, foundation_id = quota_scope(target), target.foundation_id
    try:
        found = _model_quotas(_bedrock_quotas(service_quotas, "list_service_quotas"), scope, foundation_id)
    except ClientError as error:
        if denied(error):
            return could_not_check(name, "servicequotas:ListServiceQuotas")
        return warning(name, f"could not check: {error_text(error)}")
    defaults: set[str] = set()
    if not found["tokens"] or not found["requests"]:
        try:
            default = _model_quotas(
                _bedrock_quotas(service_quotas, "list_aws_default_service_quotas"), scope, foundation_id
            )
        except ClientError:
            default = {"tokens": [], "requests": []}
        for metric, quotas in default.items():
            if not found[metric]:
                found[metric] = quotas
                defaults.update(quota["QuotaName"] for quota in quotas)
    where = target.bedrock_region
    listed = [quota for metric in ("tokens", "requests") for quota in found[metric]]
    figures = [
        f"{quota['QuotaName']} = {_number(quota.get('Value'))}"
        + (" (AWS default)" if quota["QuotaName"] in defaults else "")
        for quota in listed
    ]
    account = _account_values(found)
    if readings is not None:
        readings.bedrock_tokens_per_minute = account.get("tokens")
        readings.bedrock_requests_per_minute = account.get("requests")
    zero = [quota["QuotaName"] for quota in listed if not quota.get("Value")]
    if zero:
        return CheckResult(
            name,
            False,
            f"{where}: {'; '.join(figures)} (at 0 every request is throttled)",
            f"request an increase in Service Quotas → Amazon Bedrock ({target.bedrock_region}) for "
            + ", ".join(f"'{quota}'" for quota in zero)
            + " (new accounts may start at 0)",
        )
    wanted = f"{SCOPE_NAMES[scope]} … tokens per minute for {foundation_id}"
    if not found["tokens"]:
        return warning(
            name,
            f"{where}: no '{wanted}' quota found" + (f" ({'; '.join(figures)})" if figures else ""),
            f"look the model up in Service Quotas → Amazon Bedrock ({target.bedrock_region}); a model new to "
            "Bedrock may not be listed yet",
        )
    if not found["requests"]:
        figures.append("no requests-per-minute quota (Bedrock throttles on tokens)")
    return _against_planned(name, target, f"{where}: {'; '.join(figures)}", account)


# cdk.json's names of the planned quotas (stages.<stage>.bedrock), by the metric of the quota's name.
PLANNED_SETTINGS = {"tokens": "tokens_per_minute", "requests": "requests_per_minute"}


def _account_values(found: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """The account's value of each metric (the lowest where several quotas match)."""
    return {
        metric: int(min(float(quota["Value"]) for quota in quotas))
        for metric, quotas in found.items()
        if quotas and all(isinstance(quota.get("Value"), int | float) for quota in quotas)
    }


def _against_planned(name: str, target: Target, detail: str, account: dict[str, int]) -> CheckResult:
    """The account's quotas against what cdk.json plans: a plan above the account's is a capacity the
    stage does not have (the capacity report's stated figures count on it)."""
    planned = {"tokens": target.bedrock_tokens_per_minute, "requests": target.bedrock_requests_per_minute}
    above = [
        f"bedrock.{PLANNED_SETTINGS[metric]} {value:,} (the account has {account[metric]:,})"
        for metric, value in planned.items()
        if value is not None and metric in account and value > account[metric]
    ]
    if above:
        return warning(
            name,
            f"{detail}; cdk.json plans {', '.join(above)}: quota the account does not have",
            f"request the increase in Service Quotas → Amazon Bedrock ({target.bedrock_region}), or lower the plan "
            f"in stages.{target.stage}.bedrock of cdk.json",
        )
    return CheckResult(name, True, detail)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int | float) else str(value)
