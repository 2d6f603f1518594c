"""``voiceide-conductor doctor``: checks that a stage can work in an AWS account, before or after
``cdk deploy``, with the operator's AWS credentials.

One line per check, and for a failed one what to do:

* the account: API Gateway's CloudWatch Logs role (``doctor_account``);
* Bedrock (``doctor_bedrock``): the inference profile and the regions it really routes to against
  cdk.json, each foundation model's lifecycle and the account's access to it (Marketplace
  subscription, Anthropic's use case form), one ``Converse`` call of one token sent as the turn
  runner sends it;
* quotas (``doctor_account``): the model's Bedrock tokens/requests per minute, Lambda's concurrency
  against what the stage asks to reserve;
* the stage's CloudFormation stack and WebSocket API, and its DynamoDB table;
* the quota reading: the quotas read, with the account (``GetCallerIdentity``), region and date, recorded
  in cdk.context.json (infra/quota_readings.py), where synth and ``make capacity`` find them. Synth
  trusts a reading only for a stage that pins that account.

A read doctor is not allowed to make says so ("could not check: allow …") without failing the run.
Exit code 0 only when no check failed (a warning, marked ``!``, passes).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from boto3 import Session
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from conductor_local.doctor.account import check_bedrock_quotas, check_cloudwatch_role, check_lambda_concurrency
from conductor_local.doctor.bedrock import check_converse, model_checks
from conductor_local.doctor.common import (
    CLIENT_CONFIG,
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

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2

CREDENTIALS_HELP = (
    "set AWS_PROFILE=<profile> (after `aws configure` or `aws sso login`), or AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary credentials)"
)
# Stacks in these states have outputs that describe what is deployed.
USABLE_STACK_STATES = frozenset(
    {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE", "IMPORT_ROLLBACK_COMPLETE"}
)


class CannotRun(Exception):
    """The doctor cannot check anything (no credentials, no such stage): one line says why."""


def credentialed_session(session: Session | None = None) -> Session:
    """``session`` (or a new default one) once AWS credentials resolve through botocore's whole
    provider chain; otherwise one line says what is missing."""
    try:
        session = session or Session()
        credentials = session.get_credentials()
    except BotoCoreError as error:  # a named profile that does not exist, a broken config file, ...
        raise CannotRun(f"AWS credentials could not be loaded ({error}): {CREDENTIALS_HELP}") from error
    if credentials is None:
        raise CannotRun(f"no AWS credentials found: {CREDENTIALS_HELP}")
    return session


def run(
    target: Target,
    session: Session | None,
    out: TextIO,
    *,
    context_file: Path | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Run every check against ``target`` and print one line each; the exit code. With ``context_file``
    the quotas read are recorded there (the "quota reading" line)."""
    session = credentialed_session(session)
    print(
        f"voiceide-conductor doctor: stage {target.stage} ({target.region}), stack {target.stack_name}, "
        f"model {target.model_id} ({target.bedrock_region})",
        file=out,
        flush=True,
    )

    def client(service: str, region: str = target.region) -> Any:
        return session.client(service, region_name=region, config=CLIENT_CONFIG)

    bedrock = client("bedrock", target.bedrock_region)
    cloudformation = client("cloudformation")
    readings = Readings()
    checks: list[Callable[[], Iterable[CheckResult]]] = [
        lambda: [check_cloudwatch_role(client("apigateway"), target)],
        lambda: model_checks(bedrock, target),
        lambda: [check_converse(client("bedrock-runtime", target.bedrock_region), target)],
        lambda: [check_bedrock_quotas(client("service-quotas", target.bedrock_region), target, readings)],
        lambda: [check_lambda_concurrency(client("lambda"), cloudformation, target, readings)],
        lambda: check_stack_and_table(cloudformation, client("dynamodb"), target),
    ]
    if context_file is not None:
        checks.append(lambda: [record_readings(client("sts"), target, readings, context_file, now())])
    ok = True
    for check in checks:
        for result in _guarded(check):
            ok = ok and result.ok
            print(result.line(), file=out, flush=True)
    return EXIT_OK if ok else EXIT_FAILED


def _guarded(check: Callable[[], Iterable[CheckResult]]) -> list[CheckResult]:
    """A check's results; an AWS error nobody anticipated becomes a failed line, never a traceback."""
    try:
        return list(check())
    except NoCredentialsError as error:
        raise CannotRun(f"no AWS credentials found: {CREDENTIALS_HELP}") from error
    except ClientError as error:
        return [CheckResult("AWS", False, error_text(error), "check the credentials and the caller's permissions")]
    except BotoCoreError as error:
        return [CheckResult("AWS", False, str(error), "check the network and the region")]


# --- the quota reading ---------------------------------------------------------------------------------


def record_readings(sts: Any, target: Target, readings: Readings, context_file: Path, at: datetime) -> CheckResult:
    """Record what the quota checks read, for the caller's account (``GetCallerIdentity``), in
    ``context_file``: one reading per account and region (the stage's; the model's Bedrock region
    where it differs), replacing an earlier one. Synth trusts it only for a stage pinning that account."""
    name = "quota reading"
    if not readings.lambda_read and not readings.bedrock_read:
        return warning(name, "no quota was read (see the lines above): nothing recorded")
    try:
        account = str(sts.get_caller_identity()["Account"])
    except ClientError as error:
        if denied(error):
            return could_not_check(name, "sts:GetCallerIdentity")
        return warning(name, f"not recorded: {error_text(error)}")
    quotas = _infra("infra.quota_readings")
    read_at = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    recorded = quota_readings(quotas, account, target, readings, read_at)
    for reading in recorded:
        quotas.record(context_file, reading)
    what = "; ".join(_described(reading) for reading in recorded)
    detail = f"recorded for account {account} ({read_at}) in {context_file.name}: {what}"
    if target.account is None:
        return warning(
            name,
            f"{detail}; {target.stage} pins no account, so synth trusts none of it",
            f'put "account": "{account}" in stages.{target.stage} of cdk.json and commit {context_file.name}',
        )
    if target.account != account:
        return warning(
            name,
            f"{detail}; {target.stage} pins account {target.account}, not this one",
            f"run doctor with credentials of account {target.account}",
        )
    return CheckResult(name, True, f"{detail}; synth trusts it for {target.stage} (commit {context_file.name})")


def quota_readings(quotas: ModuleType, account: str, target: Target, readings: Readings, read_at: str) -> list[Any]:
    """The ``QuotaReading``s to record: Lambda's in the stage's region, Bedrock's (keyed by the stage's
    ``bedrock.model_id``) in the model's region, one reading where both are the same region."""
    bedrock = (
        {
            target.model_id: quotas.BedrockReading(
                tokens_per_minute=readings.bedrock_tokens_per_minute,
                requests_per_minute=readings.bedrock_requests_per_minute,
            )
        }
        if readings.bedrock_read
        else {}
    )
    lambda_part = {"lambda_concurrency": readings.lambda_concurrency, "lambda_unreserved": readings.lambda_unreserved}
    if target.bedrock_region == target.region:
        return [quotas.QuotaReading(account, target.region, read_at, **lambda_part, bedrock=bedrock)]
    found = []
    if readings.lambda_read:
        found.append(quotas.QuotaReading(account, target.region, read_at, **lambda_part))
    if bedrock:
        found.append(quotas.QuotaReading(account, target.bedrock_region, read_at, bedrock=bedrock))
    return found


def _described(reading: Any) -> str:
    parts = []
    if reading.lambda_concurrency is not None:
        parts.append(
            f"Lambda concurrency {reading.lambda_concurrency:,} ({reading.lambda_unreserved or 0:,} unreserved)"
        )
    for model, quota in reading.bedrock.items():
        figures = [
            f"{value:,} {unit}/min"
            for value, unit in ((quota.tokens_per_minute, "tokens"), (quota.requests_per_minute, "requests"))
            if value is not None
        ]
        parts.append(f"Bedrock {model} {', '.join(figures)}")
    return f"{reading.region}: {', '.join(parts)}"


# --- CloudFormation and DynamoDB -------------------------------------------------------------------


def check_stack_and_table(cloudformation: Any, dynamodb: Any, target: Target) -> list[CheckResult]:
    """The stack, then the table its ``TableName`` output names (unknown when the stack cannot be read)."""
    outputs: dict[str, str] = {}
    stack = check_stack(cloudformation, target, outputs)
    if stack.warning:
        return [stack, could_not_check("table", "cloudformation:DescribeStacks (the table's name is a stack output)")]
    return [stack, check_table(dynamodb, target, outputs.get("TableName"))]


def check_stack(cloudformation: Any, target: Target, outputs: dict[str, str]) -> CheckResult:
    """The stage's stack is deployed and usable; its outputs go into ``outputs``."""
    name = "stack"
    deploy = f"deploy it: npx aws-cdk@2 deploy -c stage={target.stage}"
    try:
        stack = cloudformation.describe_stacks(StackName=target.stack_name)["Stacks"][0]
    except ClientError as error:
        if code(error) == "ValidationError" and "does not exist" in message(error):
            return CheckResult(name, False, f"{target.stack_name} is not deployed in {target.region}", deploy)
        if denied(error):
            return could_not_check(name, "cloudformation:DescribeStacks", target.stack_name)
        return CheckResult(name, False, error_text(error), "see the message")
    outputs.update({item["OutputKey"]: item["OutputValue"] for item in stack.get("Outputs", [])})
    status = stack["StackStatus"]
    if status not in USABLE_STACK_STATES:
        return CheckResult(
            name,
            False,
            f"{target.stack_name} is {status}",
            f"see its events in the CloudFormation console, then {deploy}",
        )
    url = outputs.get("WebSocketUrl")
    if not url:
        return CheckResult(name, False, f"{target.stack_name} ({status}) has no WebSocketUrl output", deploy)
    return CheckResult(name, True, f"{target.stack_name} is {status}, the app connects to {url}")


def check_table(dynamodb: Any, target: Target, table_name: str | None) -> CheckResult:
    name = "table"
    if not table_name:
        return CheckResult(
            name,
            False,
            "unknown: the stack has no TableName output",
            f"deploy it: npx aws-cdk@2 deploy -c stage={target.stage}",
        )
    try:
        table = dynamodb.describe_table(TableName=table_name)["Table"]
    except ClientError as error:
        if code(error) == "ResourceNotFoundException":
            return CheckResult(
                name,
                False,
                f"{table_name} does not exist in {target.region}",
                f"deploy the stack again (npx aws-cdk@2 deploy -c stage={target.stage}); a retained table "
                "deleted by hand must be restored from its point-in-time backup",
            )
        if denied(error):
            return could_not_check(name, "dynamodb:DescribeTable", table_name)
        return CheckResult(name, False, error_text(error), "see the message")
    status = table["TableStatus"]
    if status != "ACTIVE":
        return CheckResult(name, False, f"{table_name} is {status}", "wait until it is ACTIVE and run doctor again")
    return CheckResult(name, True, f"{table_name} is ACTIVE")


def load_target(stage: str | None, region: str | None) -> Target:
    """The stage's settings from cdk.json (through ``infra.config``); ``region`` overrides the stage's."""
    config_module = _infra("infra.config")
    stages = config_module.read_cdk_json_context().get("stages")
    try:
        config = config_module.select_stage(stages, stage)
    except config_module.StageConfigError as error:
        raise CannotRun(str(error).replace("-c stage=", "--stage ")) from error
    region = region or config.region
    bedrock, lambdas = config.bedrock, config.lambdas
    return Target(
        stage=config.name,
        stack_name=config.stack_name,
        region=region,
        model_id=bedrock.model_id,
        bedrock_region=bedrock.region or region,
        profile_regions=tuple(bedrock.inference_profile_regions),
        # Settings newer than some checkouts' infra/config.py: their defaults until it has them.
        effort=getattr(bedrock, "effort", "low"),
        thinking=getattr(bedrock, "thinking", "off"),
        creates_cloudwatch_role=config.api_gateway_cloudwatch_role,
        access_logging=getattr(config, "access_logs", True),
        access_logging_setting=getattr(config, "access_logging", ""),
        role_owners=_role_owners(config_module, stages, region, config.account),
        account=config.account,
        message_reserved_concurrency=lambdas.reserved_concurrency,
        turn_reserved_concurrency=getattr(lambdas, "turn_reserved_concurrency", None),
        planned_account_concurrency=getattr(lambdas, "planned_account_concurrency", None),
        bedrock_tokens_per_minute=getattr(bedrock, "tokens_per_minute", None),
        bedrock_requests_per_minute=getattr(bedrock, "requests_per_minute", None),
    )


def _role_owners(config_module: ModuleType, stages: Any, region: str, account: str | None) -> tuple[str, ...]:
    """The stages of cdk.json that set API Gateway's CloudWatch Logs role in ``region`` (and the
    same account, where both name one)."""
    owners = []
    for name in sorted(stages or {}):
        try:
            other = config_module.select_stage(stages, name)
        except config_module.StageConfigError:
            continue
        same_account = account is None or other.account is None or other.account == account
        if other.api_gateway_cloudwatch_role and other.region == region and same_account:
            owners.append(other.name)
    return tuple(owners)


def _infra(module: str) -> ModuleType:
    """``infra.config`` (which reads cdk.json) or ``infra.quota_readings``. The console script runs outside
    the checkout, where ``infra`` (not an installed package) is found next to this package in an editable
    install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2]
        if not (checkout / "infra" / "config.py").is_file():
            raise CannotRun(
                "the stage settings live in cdk.json: run doctor from a checkout of the conductor"
            ) from None
        sys.path.append(str(checkout))
        return importlib.import_module(module)


def main(
    stage: str | None,
    region: str | None,
    session: Session | None = None,
    out: TextIO | None = None,
    context_file: Path | None = None,
) -> int:
    """Check ``stage`` (cdk.json) and record the quotas read in the checkout's cdk.context.json (or
    ``context_file``); no credentials or an unusable stage print one line and exit 2."""
    out = sys.stdout if out is None else out
    try:
        target = load_target(stage, region)
        context_file = context_file or _infra("infra.quota_readings").CDK_CONTEXT_JSON
        return run(target, session, out, context_file=context_file)
    except CannotRun as reason:
        print(f"voiceide-conductor doctor: {reason}", file=sys.stderr, flush=True)
        return EXIT_CANNOT_RUN
