"""``voiceide-conductor doctor``: checks a deployed stage with the operator's AWS credentials.

One line per check: the configured model's Bedrock lifecycle (and, for a cross-region inference
profile, the foundation model and regions behind it), a one-token ``Converse`` call with it, the
stage's CloudFormation stack and its WebSocket API, and the stage's DynamoDB table. A failed check
says what to do. Exit code 0 only when every check passed.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from boto3 import Session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from shared.config import Settings

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
_FOUNDATION_MODEL_ARN = re.compile(r"^arn:aws[a-z-]*:bedrock:([a-z0-9-]*)::foundation-model/(.+)$")
_CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard", "total_max_attempts": 2})
_ACCESS_DENIED = "AccessDeniedException"


@dataclass(frozen=True)
class Target:
    """What the doctor looks at: one stage's deployment, as configured in cdk.json."""

    stage: str
    stack_name: str
    region: str
    model_id: str
    bedrock_region: str
    profile_regions: tuple[str, ...] = ()

    @property
    def is_profile(self) -> bool:
        return bool(self.profile_regions)

    @property
    def is_global_profile(self) -> bool:
        return self.model_id.startswith("global.")


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        if self.ok:
            return f"✓ {self.name}: {self.detail}"
        return f"✗ {self.name}: {self.detail}" + (f" → {self.fix}" if self.fix else "")


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


def run(target: Target, session: Session | None, out: TextIO) -> int:
    """Run every check against ``target`` and print one line each; the exit code."""
    session = credentialed_session(session)
    print(
        f"voiceide-conductor doctor: stage {target.stage} ({target.region}), stack {target.stack_name}, "
        f"model {target.model_id} ({target.bedrock_region})",
        file=out,
        flush=True,
    )
    bedrock = session.client("bedrock", region_name=target.bedrock_region, config=_CLIENT_CONFIG)
    runtime = session.client("bedrock-runtime", region_name=target.bedrock_region, config=_CLIENT_CONFIG)
    cloudformation = session.client("cloudformation", region_name=target.region, config=_CLIENT_CONFIG)
    dynamodb = session.client("dynamodb", region_name=target.region, config=_CLIENT_CONFIG)

    outputs: dict[str, str] = {}
    checks: list[Callable[[], Iterable[CheckResult]]] = [
        lambda: check_model_lifecycle(bedrock, target),
        lambda: [check_converse(runtime, target)],
        lambda: [check_stack(cloudformation, target, outputs)],
        lambda: [check_table(dynamodb, target, outputs.get("TableName"))],
    ]
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
        return [CheckResult("AWS", False, _error_text(error), "check the credentials and the caller's permissions")]
    except BotoCoreError as error:
        return [CheckResult("AWS", False, str(error), "check the network and the region")]


# --- Bedrock: lifecycle ----------------------------------------------------------------------------


def check_model_lifecycle(bedrock: Any, target: Target) -> list[CheckResult]:
    """``GetInferenceProfile`` for a profile id (its status, the models and regions behind it), then
    ``GetFoundationModel`` for each foundation model: ACTIVE passes, LEGACY fails with its dates."""
    foundation_ids = [target.model_id]
    results: list[CheckResult] = []
    if target.is_profile:
        try:
            profile = bedrock.get_inference_profile(inferenceProfileIdentifier=target.model_id)
        except ClientError as error:
            return [_profile_error(target, error)]
        routes = [_FOUNDATION_MODEL_ARN.match(model.get("modelArn", "")) for model in profile["models"]]
        foundation_ids = sorted({match.group(2) for match in routes if match})
        regions = sorted({match.group(1) for match in routes if match and match.group(1)})
        status = profile["status"]
        results.append(
            CheckResult(
                "inference profile",
                status == "ACTIVE",
                f"{target.model_id} is {status}, routes to {', '.join(regions) or 'all commercial regions'}",
                "choose an Active inference profile for bedrock.model_id in cdk.json",
            )
        )
        if not target.is_global_profile:
            results.append(_profile_regions_result(target, regions))
    for foundation_id in foundation_ids:
        results.append(_foundation_model_result(bedrock, target, foundation_id))
    return results


def _profile_error(target: Target, error: ClientError) -> CheckResult:
    code = _code(error)
    if code == "ResourceNotFoundException":
        return CheckResult(
            "inference profile",
            False,
            f"{target.model_id} does not exist in {target.bedrock_region}",
            "use a profile id Bedrock lists there (aws bedrock list-inference-profiles) in cdk.json",
        )
    return CheckResult(
        "inference profile", False, _error_text(error), "allow the caller bedrock:GetInferenceProfile on the profile"
    )


def _profile_regions_result(target: Target, routed: Sequence[str]) -> CheckResult:
    missing = sorted(set(routed) - set(target.profile_regions))
    if missing:
        return CheckResult(
            "profile regions",
            False,
            f"the profile routes to {', '.join(missing)}, which bedrock.inference_profile_regions does not list",
            "add them to cdk.json and deploy again (the message Lambda may only invoke the model there)",
        )
    return CheckResult("profile regions", True, f"cdk.json grants every region the profile routes to ({len(routed)})")


def _foundation_model_result(bedrock: Any, target: Target, foundation_id: str) -> CheckResult:
    name = "model lifecycle"
    try:
        details = bedrock.get_foundation_model(modelIdentifier=foundation_id)["modelDetails"]
    except ClientError as error:
        if _code(error) == "ResourceNotFoundException":
            return CheckResult(
                name,
                False,
                f"{foundation_id} is not offered in {target.bedrock_region} (end of life, or never there)",
                "move bedrock.model_id in cdk.json to an Active model (README: Models)",
            )
        return CheckResult(name, False, _error_text(error), "allow the caller bedrock:GetFoundationModel")
    lifecycle = details.get("modelLifecycle", {})
    status = lifecycle.get("status", "unknown")
    if status == "ACTIVE":
        return CheckResult(name, True, f"{foundation_id} is ACTIVE")
    dates = [
        f"{label} {_date(lifecycle[key])}"
        for key, label in (("legacyTime", "legacy since"), ("endOfLifeTime", "end of life"))
        if key in lifecycle
    ]
    return CheckResult(
        name,
        False,
        f"{foundation_id} is {status}" + (f" ({', '.join(dates)})" if dates else ""),
        "move bedrock.model_id in cdk.json to an Active model and deploy (README: Models)",
    )


# --- Bedrock: one token ----------------------------------------------------------------------------


def check_converse(runtime: Any, target: Target) -> CheckResult:
    """One ``Converse`` call of one output token, with the inference settings the message Lambda uses."""
    name = "model invocation"
    try:
        runtime.converse(
            modelId=target.model_id,
            messages=[{"role": "user", "content": [{"text": "Reply with OK."}]}],
            inferenceConfig={"maxTokens": 1, "temperature": Settings.model_fields["temperature"].default},
        )
    except ClientError as error:
        return CheckResult(name, False, _error_text(error), _converse_fix(error, target))
    return CheckResult(name, True, f"Converse with {target.model_id} answered")


def _converse_fix(error: ClientError, target: Target) -> str:
    code, message = _code(error), _message(error).lower()
    if code == _ACCESS_DENIED and "use case" in message:
        return (
            "submit Anthropic's one-time use case form for this account: Bedrock console → Model catalog → "
            "the model → submit use case details (or open it in the playground), then run doctor again"
        )
    if code == _ACCESS_DENIED and "marketplace" in message:
        return (
            "the first use of the model subscribes the account through AWS Marketplace: allow the caller "
            "aws-marketplace:Subscribe, aws-marketplace:ViewSubscriptions and aws-marketplace:Unsubscribe "
            "(or have an administrator invoke the model once), then run doctor again"
        )
    if code == _ACCESS_DENIED and ("model access" in message or "access to the model" in message):
        return "enable access to the model in the Bedrock console (Model access) for this account and region"
    if code == _ACCESS_DENIED:
        regions = ", ".join(target.profile_regions) or target.bedrock_region
        return f"allow the caller bedrock:InvokeModel on {target.model_id} and its foundation model in {regions}"
    if code == "ResourceNotFoundException" or (code == "ValidationException" and "end of its life" in message):
        return "move bedrock.model_id in cdk.json to an Active model and deploy (README: Models)"
    if code == "ThrottlingException":
        return "the account's Bedrock quota for this model is exhausted right now: try again, or request more"
    return "see the message: the deployed message Lambda would get the same answer"


# --- CloudFormation and DynamoDB -------------------------------------------------------------------


def check_stack(cloudformation: Any, target: Target, outputs: dict[str, str]) -> CheckResult:
    """The stage's stack is deployed and usable; its outputs go into ``outputs``."""
    name = "stack"
    deploy = f"deploy it: npx aws-cdk@2 deploy -c stage={target.stage}"
    try:
        stack = cloudformation.describe_stacks(StackName=target.stack_name)["Stacks"][0]
    except ClientError as error:
        if _code(error) == "ValidationError" and "does not exist" in _message(error):
            return CheckResult(name, False, f"{target.stack_name} is not deployed in {target.region}", deploy)
        return CheckResult(name, False, _error_text(error), "allow the caller cloudformation:DescribeStacks")
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
        if _code(error) == "ResourceNotFoundException":
            return CheckResult(
                name,
                False,
                f"{table_name} does not exist in {target.region}",
                f"deploy the stack again (npx aws-cdk@2 deploy -c stage={target.stage}); a retained table "
                "deleted by hand must be restored from its point-in-time backup",
            )
        return CheckResult(name, False, _error_text(error), "allow the caller dynamodb:DescribeTable")
    status = table["TableStatus"]
    if status != "ACTIVE":
        return CheckResult(name, False, f"{table_name} is {status}", "wait until it is ACTIVE and run doctor again")
    return CheckResult(name, True, f"{table_name} is ACTIVE")


# --- helpers ---------------------------------------------------------------------------------------


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


def _error_text(error: ClientError) -> str:
    return f"{_code(error) or 'error'}: {_message(error) or error}"


def _date(value: Any) -> str:
    return value.date().isoformat() if isinstance(value, datetime) else str(value)


def load_target(stage: str | None, region: str | None) -> Target:
    """The stage's settings from cdk.json (through ``infra.config``); ``region`` overrides the stage's."""
    config_module = _infra_config()
    try:
        config = config_module.select_stage(config_module.read_cdk_json_context().get("stages"), stage)
    except config_module.StageConfigError as error:
        raise CannotRun(str(error).replace("-c stage=", "--stage ")) from error
    region = region or config.region
    return Target(
        stage=config.name,
        stack_name=config.stack_name,
        region=region,
        model_id=config.bedrock.model_id,
        bedrock_region=config.bedrock.region or region,
        profile_regions=tuple(config.bedrock.inference_profile_regions),
    )


def _infra_config() -> ModuleType:
    """``infra.config``, which reads cdk.json. The console script runs outside the checkout, where
    ``infra`` (not an installed package) is found next to this package in an editable install."""
    try:
        return importlib.import_module("infra.config")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parent.parent
        if not (checkout / "infra" / "config.py").is_file():
            raise CannotRun(
                "the stage settings live in cdk.json: run doctor from a checkout of the conductor"
            ) from None
        sys.path.append(str(checkout))
        return importlib.import_module("infra.config")


def main(stage: str | None, region: str | None, session: Session | None = None, out: TextIO | None = None) -> int:
    """Check ``stage`` (cdk.json); no credentials or an unusable stage print one line and exit 2."""
    out = sys.stdout if out is None else out
    try:
        return run(load_target(stage, region), session, out)
    except CannotRun as reason:
        print(f"voiceide-conductor doctor: {reason}", file=sys.stderr, flush=True)
        return EXIT_CANNOT_RUN
