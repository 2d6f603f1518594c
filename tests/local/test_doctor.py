"""``voiceide-conductor doctor`` against real wire protocols.

CloudFormation, DynamoDB and API Gateway's account settings are a moto server. moto implements
none of Bedrock's ``GetFoundationModel``, ``GetInferenceProfile``, ``GetFoundationModelAvailability``,
``GetUseCaseForModelAccess`` or ``Converse``, nor Lambda's ``GetAccountSettings`` or Service Quotas'
``ListServiceQuotas``, so a small HTTP endpoint here serves them: its requests and responses are
validated against the installed botocore service models (required members, types, enums,
patterns), errors carry the services' error shapes. The real boto3 clients reach both through
``AWS_ENDPOINT_URL_<SERVICE>``. Each check's cases are in ``test_doctor_bedrock.py`` and
``test_doctor_account.py`` (botocore Stubber).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import botocore.session
import pytest
from botocore.validate import ParamValidator
from moto.server import ThreadedMotoServer

from conductor_local.doctor import command as doctor
from shared.wire.model_rules import Inference, request_fields, rules_for

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
PROFILE_ID = "us.anthropic.claude-haiku-5-5"
FOUNDATION_ID = "anthropic.claude-haiku-5-5"
PROFILE_REGIONS = ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
USE_CASE_MESSAGE = (
    "Model use case details have not been submitted for this account. Fill out the Anthropic use case "
    "details form before using the model. If you have already filled out the form, try again in 15 minutes."
)

_LOADER = botocore.session.get_session()
BEDROCK = _LOADER.get_service_model("bedrock")
RUNTIME = _LOADER.get_service_model("bedrock-runtime")
LAMBDA = _LOADER.get_service_model("lambda")
SERVICE_QUOTAS = _LOADER.get_service_model("service-quotas")
LOGGING_ROLE = "arn:aws:iam::123456789012:role/VoiceIDEConductor-prod-ApiCloudWatchRole"
ACCOUNT = "123456789012"  # moto's account: what GetCallerIdentity answers
READ_AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _enum_and_pattern_problems(shape: Any, value: Any, path: str) -> list[str]:
    """What botocore's validator leaves out: enum members and string patterns, recursively."""
    problems: list[str] = []
    if shape.type_name == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                problems += _enum_and_pattern_problems(member, value[name], f"{path}.{name}")
    elif shape.type_name == "list" and isinstance(value, list):
        for index, item in enumerate(value):
            problems += _enum_and_pattern_problems(shape.member, item, f"{path}[{index}]")
    elif shape.type_name == "string" and isinstance(value, str):
        if shape.enum and value not in shape.enum:
            problems.append(f"{path}: {value!r} is not one of {shape.enum}")
        pattern = shape.metadata.get("pattern")
        if pattern and not re.fullmatch(pattern, value):
            problems.append(f"{path}: {value!r} does not match {pattern}")
    return problems


def strict(shape: Any, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` when it is a valid instance of ``shape``; AssertionError otherwise."""
    report = ParamValidator().validate(value, shape)
    problems = ([report.generate_report()] if report.has_errors() else []) + _enum_and_pattern_problems(
        shape, value, shape.name
    )
    assert not problems, "\n".join(problems)
    return value


def lifecycle(status: str, **dates: str) -> dict[str, Any]:
    return {"status": status, "startOfLifeTime": "2026-10-07T00:00:00Z", **dates}


def foundation_model(model_id: str, region: str, life: dict[str, Any]) -> dict[str, Any]:
    details = {
        "modelArn": f"arn:aws:bedrock:{region}::foundation-model/{model_id}",
        "modelId": model_id,
        "modelName": "Claude",
        "providerName": "Anthropic",
        "inputModalities": ["TEXT", "IMAGE"],
        "outputModalities": ["TEXT"],
        "responseStreamingSupported": True,
        "inferenceTypesSupported": ["ON_DEMAND"],
        "modelLifecycle": life,
    }
    return strict(BEDROCK.operation_model("GetFoundationModel").output_shape, {"modelDetails": details})


def inference_profile(profile_id: str, foundation_id: str, regions: tuple[str, ...]) -> dict[str, Any]:
    body = {
        "inferenceProfileName": "US Anthropic Claude Haiku",
        "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:123456789012:inference-profile/{profile_id}",
        "inferenceProfileId": profile_id,
        "models": [{"modelArn": f"arn:aws:bedrock:{r}::foundation-model/{foundation_id}"} for r in regions],
        "status": "ACTIVE",
        "type": "SYSTEM_DEFINED",
    }
    return strict(BEDROCK.operation_model("GetInferenceProfile").output_shape, body)


def availability(model_id: str, **fields: Any) -> dict[str, Any]:
    body = {
        "modelId": model_id,
        "agreementAvailability": {"status": "AVAILABLE"},
        "authorizationStatus": "AUTHORIZED",
        "entitlementAvailability": "AVAILABLE",
        "regionAvailability": "AVAILABLE",
        **fields,
    }
    return strict(BEDROCK.operation_model("GetFoundationModelAvailability").output_shape, body)


def service_quota(name: str, value: float, quota_code: str = "L-0A1B2C3D") -> dict[str, Any]:
    body = {
        "ServiceCode": "bedrock",
        "ServiceName": "Amazon Bedrock",
        "QuotaCode": quota_code,
        "QuotaName": name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }
    return strict(SERVICE_QUOTAS.operation_model("ListServiceQuotas").output_shape, {"Quotas": [body]})["Quotas"][0]


HAIKU_QUOTAS = [
    service_quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 4_000_000.0),
    service_quota("On-demand InvokeModel tokens per minute for Anthropic Claude Haiku 5.5", 2_000_000.0),
    service_quota("Model invocation max tokens per day for Anthropic Claude Haiku 5.5", 5_760_000_000.0),
    service_quota("Cross-Region InvokeModel tokens per minute for Anthropic Claude Sonnet 5.5", 0.0),
]
ACCOUNT_SETTINGS = strict(
    LAMBDA.operation_model("GetAccountSettings").output_shape,
    {
        "AccountLimit": {
            "TotalCodeSize": 80_530_636_800,
            "CodeSizeUnzipped": 262_144_000,
            "CodeSizeZipped": 52_428_800,
            "ConcurrentExecutions": 1000,
            "UnreservedConcurrentExecutions": 1000,
        },
        "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
    },
)


CONVERSE_REPLY = strict(
    RUNTIME.operation_model("Converse").output_shape,
    {
        "output": {"message": {"role": "assistant", "content": [{"text": "OK"}]}},
        "stopReason": "max_tokens",
        "usage": {"inputTokens": 11, "outputTokens": 1, "totalTokens": 12},
        "metrics": {"latencyMs": 180},
    },
)


@dataclass
class BedrockState:
    """What the fake Bedrock knows: models by id, profiles by id, the account's access to each model
    and its use case form, an error Converse answers with; and the account's Lambda settings and
    Bedrock quotas."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    availability: dict[str, dict[str, Any]] = field(default_factory=dict)
    use_case_submitted: bool = True
    converse_error: tuple[int, str, str] | None = None
    converse_requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    account_settings: dict[str, Any] = field(default_factory=lambda: ACCOUNT_SETTINGS)
    quotas: list[dict[str, Any]] = field(default_factory=lambda: list(HAIKU_QUOTAS))


class _BedrockHandler(BaseHTTPRequestHandler):
    server: _BedrockServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        state = self.server.state
        path = urlsplit(self.path).path
        if match := re.fullmatch(r"/foundation-models/([^/]+)", path):
            model_id = unquote(match.group(1))
            body = state.models.get(model_id)
            if body is None:
                self._error(404, "ResourceNotFoundException", "The requested model could not be found.")
            else:
                self._json(200, body)
        elif match := re.fullmatch(r"/inference-profiles/([^/]+)", path):
            body = state.profiles.get(unquote(match.group(1)))
            if body is None:
                self._error(404, "ResourceNotFoundException", "The provided inference profile could not be found.")
            else:
                self._json(200, body)
        elif match := re.fullmatch(r"/foundation-model-availability/([^/]+)", path):
            model_id = unquote(match.group(1))
            if model_id not in state.models:
                self._error(404, "ResourceNotFoundException", "The requested model could not be found.")
            else:
                self._json(200, state.availability.get(model_id) or availability(model_id))
        elif path == "/use-case-for-model-access":
            if state.use_case_submitted:
                self._json(200, {"formData": "eyJjb21wYW55TmFtZSI6ICJFeGFtcGxlIn0="})
            else:
                self._error(404, "ResourceNotFoundException", "Use case details were not found for this account.")
        elif path.rstrip("/") == "/2016-08-19/account-settings":
            self._json(200, state.account_settings)
        else:
            self._error(404, "UnknownOperationException", f"no such operation: GET {path}")

    def do_POST(self) -> None:
        state = self.server.state
        path = urlsplit(self.path).path
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        target = self.headers.get("X-Amz-Target", "")
        if target.startswith("ServiceQuotasV20190624."):
            self._service_quotas(target.split(".", 1)[1], request)
            return
        match = re.fullmatch(r"/model/([^/]+)/converse", path)
        if match is None:
            self._error(404, "UnknownOperationException", f"no such operation: POST {path}")
            return
        model_id = unquote(match.group(1))
        strict(RUNTIME.operation_model("Converse").input_shape, {"modelId": model_id, **request})
        state.converse_requests.append((model_id, request))
        if state.converse_error is not None:
            self._error(*state.converse_error)
        elif model_id not in state.profiles and model_id not in state.models:
            self._error(400, "ValidationException", "The provided model identifier is invalid.")
        elif "temperature" in request.get("inferenceConfig", {}) and not rules_for(model_id).sampling:
            # As Bedrock answers Claude models from Opus 4.7 on.
            self._error(400, "ValidationException", "temperature is deprecated for this model.")
        else:
            self._json(200, CONVERSE_REPLY)

    def _service_quotas(self, operation: str, request: dict[str, Any]) -> None:
        """``ListServiceQuotas`` (the applied values) and ``ListAWSDefaultServiceQuotas`` (none here)."""
        strict(SERVICE_QUOTAS.operation_model(operation).input_shape, request)
        if request.get("ServiceCode") != "bedrock":
            self._error(400, "NoSuchResourceException", "The request failed because the service does not exist.")
            return
        quotas = self.server.state.quotas if operation == "ListServiceQuotas" else []
        self._json(200, strict(SERVICE_QUOTAS.operation_model(operation).output_shape, {"Quotas": quotas}))

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", "5c8b6bd8-7a5e-4b8e-9b1e-8c8f4b7d2a10")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, error_type: str, message: str) -> None:
        data = json.dumps({"message": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/")
        self.end_headers()
        self.wfile.write(data)


class _BedrockServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: BedrockState) -> None:
        super().__init__(("127.0.0.1", 0), _BedrockHandler)
        self.state = state


@pytest.fixture
def bedrock_state() -> BedrockState:
    return BedrockState(
        models={FOUNDATION_ID: foundation_model(FOUNDATION_ID, REGION, lifecycle("ACTIVE"))},
        profiles={PROFILE_ID: inference_profile(PROFILE_ID, FOUNDATION_ID, PROFILE_REGIONS)},
    )


@pytest.fixture
def endpoints(bedrock_state: BedrockState, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Credentials and endpoints for the real clients: moto for CloudFormation/DynamoDB, the fake Bedrock."""
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    fake = _BedrockServer(bedrock_state)
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    moto_url = "http://{}:{}".format(*moto.get_host_and_port())
    # The server's backends live in this process and outlive it: start from none.
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10).close()
    bedrock_url = f"http://127.0.0.1:{fake.server_address[1]}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL_CLOUDFORMATION": moto_url,
        "AWS_ENDPOINT_URL_DYNAMODB": moto_url,
        "AWS_ENDPOINT_URL_API_GATEWAY": moto_url,
        "AWS_ENDPOINT_URL_STS": moto_url,
        "AWS_ENDPOINT_URL_BEDROCK": bedrock_url,
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": bedrock_url,
        "AWS_ENDPOINT_URL_LAMBDA": bedrock_url,
        "AWS_ENDPOINT_URL_SERVICE_QUOTAS": bedrock_url,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # The account's API Gateway logging role, as the prod stage sets it.
    boto3.client("apigateway", region_name=REGION).update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": LOGGING_ROLE}]
    )
    try:
        yield env
    finally:
        fake.shutdown()
        fake.server_close()
        moto.stop()


STACK_TEMPLATE = {
    "Resources": {
        "Table": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        }
    },
    "Outputs": {
        "WebSocketUrl": {"Value": "wss://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/dev"},
        "TableName": {"Value": {"Ref": "Table"}},
    },
}


@pytest.fixture
def deployed(endpoints: dict[str, str]) -> str:
    """The dev stage's stack, deployed through CloudFormation; its table name."""
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName="VoiceIDEConductor-dev", TemplateBody=json.dumps(STACK_TEMPLATE))
    outputs = cloudformation.describe_stacks(StackName="VoiceIDEConductor-dev")["Stacks"][0]["Outputs"]
    return next(item["OutputValue"] for item in outputs if item["OutputKey"] == "TableName")


def target(**changes: Any) -> doctor.Target:
    settings: dict[str, Any] = {
        "stage": "dev",
        "stack_name": "VoiceIDEConductor-dev",
        "region": REGION,
        "model_id": PROFILE_ID,
        "bedrock_region": REGION,
        "profile_regions": PROFILE_REGIONS,
        **changes,
    }
    return doctor.Target(**settings)


def run_doctor(checked: doctor.Target, context_file: Path | None = None) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = doctor.run(checked, None, out, context_file=context_file, now=lambda: READ_AT)
    return code, out.getvalue().splitlines()


def line(lines: list[str], name: str) -> str:
    found = [text for text in lines if text[2:].startswith(f"{name}:")]
    assert len(found) == 1, f"expected one {name!r} line in {lines}"
    return found[0]


# --- all green -------------------------------------------------------------------------------------


def test_every_check_passes_on_a_healthy_stage(deployed: str, bedrock_state: BedrockState) -> None:
    code, lines = run_doctor(target())
    assert code == doctor.EXIT_OK, lines
    assert all(text.startswith("✓") for text in lines[1:]), lines
    assert line(lines, "API Gateway logging role").startswith(f"✓ API Gateway logging role: {LOGGING_ROLE} is")
    assert line(lines, "inference profile").startswith("✓")
    assert "us-east-1, us-east-2, us-west-1, us-west-2" in line(lines, "inference profile")
    assert line(lines, "profile regions").startswith("✓")
    assert line(lines, "model lifecycle") == f"✓ model lifecycle: {FOUNDATION_ID} is ACTIVE"
    assert line(lines, "model access").startswith(f"✓ model access: {FOUNDATION_ID} in us-east-1: regionAvailability")
    assert line(lines, "Anthropic use case").startswith("✓")
    assert line(lines, "model invocation").startswith("✓")
    assert line(lines, "Bedrock quotas") == (
        "✓ Bedrock quotas: us-east-1: Cross-Region InvokeModel tokens per minute for Anthropic Claude Haiku 5.5 = "
        "4,000,000; no requests-per-minute quota (Bedrock throttles on tokens)"
    )
    assert line(lines, "Lambda concurrency").startswith("✓ Lambda concurrency: ConcurrentExecutions 1,000")
    assert line(lines, "stack").endswith("wss://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/dev")
    assert line(lines, "table") == f"✓ table: {deployed} is ACTIVE"
    # One output token, with exactly the fields the turn runner sends the model (no temperature:
    # Claude Haiku 5.5 refuses one).
    (model_id, request), *_ = bedrock_state.converse_requests
    assert model_id == PROFILE_ID
    expected = request_fields(rules_for(PROFILE_ID), Inference(max_tokens=1, effort="low", thinking="off"))
    assert {key: value for key, value in request.items() if key != "messages"} == expected
    assert request["inferenceConfig"] == {"maxTokens": 1}


def test_a_temperature_would_be_refused_by_the_model(deployed: str, bedrock_state: BedrockState) -> None:
    """What the probe used to send: the fake refuses it as Bedrock does, so the probe's fields matter."""
    runtime = boto3.client("bedrock-runtime", region_name=REGION)
    with pytest.raises(runtime.exceptions.ValidationException, match="temperature"):
        runtime.converse(
            modelId=PROFILE_ID,
            messages=[{"role": "user", "content": [{"text": "Reply with OK."}]}],
            inferenceConfig={"maxTokens": 1, "temperature": 0.3},
        )


def test_a_foundation_model_id_is_checked_directly(deployed: str, bedrock_state: BedrockState) -> None:
    code, lines = run_doctor(target(model_id=FOUNDATION_ID, profile_regions=()))
    assert code == doctor.EXIT_OK, lines
    assert not [text for text in lines if "inference profile" in text or "profile regions" in text]
    assert bedrock_state.converse_requests[0][0] == FOUNDATION_ID


# --- failures --------------------------------------------------------------------------------------


def test_a_legacy_model_fails_with_its_dates(deployed: str, bedrock_state: BedrockState) -> None:
    legacy_id = "anthropic.claude-3-haiku-20240307-v1:0"
    bedrock_state.models[legacy_id] = foundation_model(
        legacy_id,
        REGION,
        lifecycle("LEGACY", legacyTime="2026-03-10T00:00:00Z", endOfLifeTime="2026-09-10T00:00:00Z"),
    )
    code, lines = run_doctor(target(model_id=legacy_id, profile_regions=()))
    assert code == doctor.EXIT_FAILED
    assert line(lines, "model lifecycle") == (
        f"✗ model lifecycle: {legacy_id} is LEGACY (legacy since 2026-03-10, end of life 2026-09-10) "
        "→ move bedrock.model_id in cdk.json to an Active model and deploy (docs/deploying.md, Models)"
    )
    assert line(lines, "table").startswith("✓")  # the other checks still ran


def test_a_profile_routing_outside_the_granted_regions_fails(deployed: str) -> None:
    code, lines = run_doctor(target(profile_regions=("us-east-1", "us-east-2", "us-west-2")))
    assert code == doctor.EXIT_FAILED
    assert line(lines, "profile regions").startswith(
        "✗ profile regions: the profile routes to us-west-1, which bedrock.inference_profile_regions does not list"
    )


def test_the_use_case_form_error_says_to_submit_it(deployed: str, bedrock_state: BedrockState) -> None:
    bedrock_state.converse_error = (403, "AccessDeniedException", USE_CASE_MESSAGE)
    code, lines = run_doctor(target())
    assert code == doctor.EXIT_FAILED
    text = line(lines, "model invocation")
    assert text.startswith(f"✗ model invocation: AccessDeniedException: {USE_CASE_MESSAGE}")
    assert "submit Anthropic's one-time use case form" in text


def test_missing_marketplace_permissions_are_named(deployed: str, bedrock_state: BedrockState) -> None:
    message = (
        "Model access is denied due to IAM user or service role is not authorized to perform the required "
        "AWS Marketplace actions (aws-marketplace:ViewSubscriptions, aws-marketplace:Subscribe) to enable "
        "access to this model."
    )
    bedrock_state.converse_error = (403, "AccessDeniedException", message)
    code, lines = run_doctor(target())
    assert code == doctor.EXIT_FAILED
    assert "allow the caller aws-marketplace:Subscribe, aws-marketplace:ViewSubscriptions" in line(
        lines, "model invocation"
    )


def test_an_unknown_profile_fails(deployed: str) -> None:
    code, lines = run_doctor(target(model_id="us.anthropic.claude-3-5-haiku-20241022-v1:0"))
    assert code == doctor.EXIT_FAILED
    assert line(lines, "inference profile").startswith(
        "✗ inference profile: us.anthropic.claude-3-5-haiku-20241022-v1:0 does not exist in us-east-1"
    )
    assert line(lines, "model invocation").startswith("✗ model invocation: ValidationException")


def test_a_missing_table_fails(deployed: str) -> None:
    boto3.client("dynamodb", region_name=REGION).delete_table(TableName=deployed)
    code, lines = run_doctor(target())
    assert code == doctor.EXIT_FAILED
    assert line(lines, "table").startswith(f"✗ table: {deployed} does not exist in us-east-1 → deploy the stack again")
    assert line(lines, "stack").startswith("✓")


def test_a_stage_never_deployed_fails_stack_and_table(endpoints: dict[str, str]) -> None:
    code, lines = run_doctor(target())
    assert code == doctor.EXIT_FAILED
    assert line(lines, "stack") == (
        "✗ stack: VoiceIDEConductor-dev is not deployed in us-east-1 → deploy it: npx aws-cdk@2 deploy -c stage=dev"
    )
    assert line(lines, "table").startswith("✗ table: unknown: the stack has no TableName output")


def test_stage_settings_come_from_cdk_json() -> None:
    dev = doctor.load_target("dev", None)
    assert (dev.stack_name, dev.region) == ("VoiceIDEConductor-dev", "us-east-1")
    assert dev.model_id.startswith("us.") and dev.is_profile
    assert (dev.effort, dev.thinking) == ("low", "off")
    assert not dev.creates_cloudwatch_role and dev.role_owners == ("prod",)
    prod = doctor.load_target("prod", None)
    assert prod.creates_cloudwatch_role and prod.access_logging
    assert doctor.load_target("prod", "us-west-2").region == "us-west-2"
    assert doctor.load_target("prod", "us-west-2").role_owners == ()  # prod sets the role in us-east-1 only
    with pytest.raises(
        doctor.CannotRun, match=re.escape("Unknown stage 'qa'. Known stages: dev, prod. Choose one with --stage")
    ):
        doctor.load_target("qa", None)


def test_prod_as_shipped_is_read_with_its_wish_and_its_plan_but_no_account() -> None:
    prod = doctor.load_target("prod", None)
    assert prod.account is None  # so synth reserves none of the 1,500 (tests/infra)
    assert (prod.turn_reserved_concurrency, prod.planned_account_concurrency) == (1500, 3000)


# --- recording what was read -------------------------------------------------------------------------


def test_doctor_records_the_quotas_it_read_where_synth_finds_them(deployed: str, tmp_path: Path) -> None:
    """The Lambda and Bedrock figures doctor printed, with the caller's account and the date, in
    cdk.context.json; other keys of the file stay."""
    from infra.quota_readings import load_context, reading_for, reading_key

    context_file = tmp_path / "cdk.context.json"
    context_file.write_text(json.dumps({"availability-zones:account=1:region=x": ["x-1a"]}))
    code, lines = run_doctor(target(account=ACCOUNT), context_file)
    assert code == doctor.EXIT_OK, lines
    assert line(lines, "quota reading") == (
        f"✓ quota reading: recorded for account {ACCOUNT} (2026-11-28T12:00:00Z) in cdk.context.json: us-east-1: "
        f"Lambda concurrency 1,000 (1,000 unreserved), Bedrock {PROFILE_ID} 4,000,000 tokens/min; synth trusts it "
        "for dev (commit cdk.context.json)"
    )
    context = load_context(context_file)
    assert set(context) == {"availability-zones:account=1:region=x", reading_key(ACCOUNT, REGION)}
    reading = reading_for(context, ACCOUNT, REGION)
    assert reading is not None
    assert reading.read_at == "2026-11-28T12:00:00Z"
    assert (reading.lambda_concurrency, reading.lambda_unreserved) == (1000, 1000)
    assert reading.bedrock[PROFILE_ID].tokens_per_minute == 4_000_000
    assert reading.bedrock[PROFILE_ID].requests_per_minute is None  # not read: absent


def test_a_stage_pinning_no_account_is_told_which_one_to_pin(deployed: str, tmp_path: Path) -> None:
    code, lines = run_doctor(target(), tmp_path / "cdk.context.json")
    assert code == doctor.EXIT_OK, lines
    text = line(lines, "quota reading")
    assert text.startswith(f"! quota reading: recorded for account {ACCOUNT}")
    assert text.endswith(
        f'dev pins no account, so synth trusts none of it → put "account": "{ACCOUNT}" in stages.dev of cdk.json and '
        "commit cdk.context.json"
    )


def test_a_reading_of_another_account_than_the_pinned_one_is_said(deployed: str, tmp_path: Path) -> None:
    code, lines = run_doctor(target(account="999999999999"), tmp_path / "cdk.context.json")
    assert code == doctor.EXIT_OK, lines
    assert line(lines, "quota reading").endswith(
        "dev pins account 999999999999, not this one → run doctor with credentials of account 999999999999"
    )


def test_the_bedrock_reading_goes_under_the_models_own_region(deployed: str, tmp_path: Path) -> None:
    from infra.quota_readings import load_context, reading_for

    context_file = tmp_path / "cdk.context.json"
    run_doctor(target(region="us-west-2"), context_file)
    context = load_context(context_file)
    lambda_reading, bedrock_reading = reading_for(context, ACCOUNT, "us-west-2"), reading_for(context, ACCOUNT, REGION)
    assert lambda_reading is not None and lambda_reading.lambda_concurrency == 1000 and not lambda_reading.bedrock
    assert bedrock_reading is not None and bedrock_reading.lambda_concurrency is None
    assert bedrock_reading.bedrock[PROFILE_ID].tokens_per_minute == 4_000_000


def test_main_records_in_the_checkouts_context_file_by_default(
    deployed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infra import quota_readings

    context_file = tmp_path / "cdk.context.json"
    monkeypatch.setattr(quota_readings, "CDK_CONTEXT_JSON", context_file)
    out = io.StringIO()
    doctor.main("dev", None, out=out)
    assert quota_readings.reading_for(quota_readings.load_context(context_file), ACCOUNT, REGION) is not None


# --- without credentials: one line, no traceback ---------------------------------------------------


def no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """An environment where botocore's provider chain finds nothing (and does not wait for IMDS)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("AWS_") or name in ("AWS_CA_BUNDLE", "AWS_DEFAULT_REGION")
    }
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"),
        AWS_CONFIG_FILE=str(tmp_path / "config"),
        AWS_EC2_METADATA_DISABLED="true",
        HOME=str(tmp_path),
    )
    return env


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conductor_local", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_doctor_without_credentials_prints_one_line(tmp_path: Path) -> None:
    result = run_cli(["doctor", "--stage", "prod"], no_credentials_env(tmp_path))
    assert result.returncode == doctor.EXIT_CANNOT_RUN
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("voiceide-conductor doctor: no AWS credentials found: set AWS_PROFILE=")


def test_doctor_with_an_unknown_profile_prints_one_line(tmp_path: Path) -> None:
    env = {**no_credentials_env(tmp_path), "AWS_PROFILE": "missing"}
    result = run_cli(["doctor"], env)
    assert result.returncode == doctor.EXIT_CANNOT_RUN
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "The config profile (missing) could not be found" in result.stderr
