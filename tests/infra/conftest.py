"""Synthesize each stage once per test session (jsii is slow) and share the results."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.config import StageConfig, read_cdk_json_context

# A stage that switches on every optional feature: alarm e-mail (SNS + KMS), reserved
# concurrency, a global inference profile in another region, no account-level API Gateway role
# but access logging declared on (the role is set by someone else).
VARIANT_STAGE = "staging"
# A CI rig's stage: the $connect authorizer checks HMAC tokens signed with a generated secret.
SIGNED_TOKEN_STAGE = "ci"
# A stage signing in with an existing user pool (in another region) and two app clients.
EXISTING_POOL_STAGE = "shared"
EXISTING_POOL = {"user_pool_id": "eu-west-1_AbCdEf123", "client_ids": ["3n4b5urk1ft4fl3mg5e62d9ado", "7a1b2c3d4e"]}
# A development stage that writes no access logs at all (access_logging: off).
QUIET_STAGE = "quiet"
# What a retaining stage is given when it is deployed (cdk.json leaves them null: a real address is the
# deploying operator's): who hears its alarms, and the verified SES address its pool sends from.
ALARM_EMAIL = "oncall@example.com"
SES_FROM_EMAIL = "no-reply@example.com"
DEPLOY_SETTINGS: dict[str, Any] = {"alarm_email": ALARM_EMAIL, "cognito": {"ses_from_email": SES_FROM_EMAIL}}


def deploy_context(stage: str) -> dict[str, str]:
    """The ``-c stages.<stage>.<setting>=...`` context an operator synthesizes a retaining stage of cdk.json
    with (as ``make synth`` does for prod); none for other stages."""
    if read_cdk_json_context()["stages"].get(stage, {}).get("removal_policy") != "retain":
        return {}
    return {f"stages.{stage}.alarm_email": ALARM_EMAIL, f"stages.{stage}.cognito.ses_from_email": SES_FROM_EMAIL}


def variant_stages() -> dict[str, Any]:
    stages = read_cdk_json_context()["stages"]
    settings = copy.deepcopy(stages["prod"])
    settings["cognito"] = {**settings["cognito"], "ses_from_email": SES_FROM_EMAIL}
    settings.update(
        region="eu-west-1",
        alarm_email=ALARM_EMAIL,
        api_gateway_cloudwatch_role=False,
        access_logging="on",
        log_retention_days=30,
    )
    settings["lambdas"]["reserved_concurrency"] = 20
    settings["lambdas"]["turn_reserved_concurrency"] = 200
    settings["fair_share"] = {"min_partial_interval_ms": 250, "max_events_per_second": 20}
    settings["bedrock"] = {
        "model_id": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "inference_profile_regions": ["eu-west-1", "us-east-1"],
        "max_tokens": 4096,
        # Claude Sonnet 4.5 through a global profile, USD per million tokens.
        "prices": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
    }
    return {VARIANT_STAGE: settings}


def stage_like_prod(**changes: Any) -> dict[str, Any]:
    """prod's settings as deployed (``DEPLOY_SETTINGS`` given), with ``changes``."""
    settings = copy.deepcopy(read_cdk_json_context()["stages"]["prod"])
    settings["alarm_email"] = DEPLOY_SETTINGS["alarm_email"]
    settings["cognito"] = {**settings["cognito"], **DEPLOY_SETTINGS["cognito"]}
    settings.update(changes)
    return settings


def signed_token_stages() -> dict[str, Any]:
    settings = stage_like_prod(auth="dev-signed-token", removal_policy="destroy")
    del settings["cognito"]
    return {SIGNED_TOKEN_STAGE: settings}


def existing_pool_stages() -> dict[str, Any]:
    return {EXISTING_POOL_STAGE: stage_like_prod(cognito=EXISTING_POOL)}


def quiet_stages() -> dict[str, Any]:
    settings = copy.deepcopy(read_cdk_json_context()["stages"]["dev"])
    settings.update(access_logging="off")
    return {QUIET_STAGE: settings}


EXTRA_STAGES = {
    VARIANT_STAGE: variant_stages,
    SIGNED_TOKEN_STAGE: signed_token_stages,
    EXISTING_POOL_STAGE: existing_pool_stages,
    QUIET_STAGE: quiet_stages,
}


@dataclass
class Synth:
    """One synthesized stage: its settings, stack, template and cloud assembly directory."""

    config: StageConfig
    stack: Any
    template: dict[str, Any]
    outdir: Path

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {name: res for name, res in self.resources.items() if res["Type"] == resource_type}

    def one(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        found = self.of_type(resource_type)
        assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
        return next(iter(found.items()))

    def api_id(self, protocol: str) -> str:
        """The logical id of the stack's API Gateway v2 API of ``protocol`` (``WEBSOCKET`` or ``HTTP``)."""
        found = [
            name
            for name, res in self.of_type("AWS::ApiGatewayV2::Api").items()
            if res["Properties"]["ProtocolType"] == protocol
        ]
        assert len(found) == 1, f"expected one {protocol} API, found {sorted(found)}"
        return found[0]

    def of_api(self, resource_type: str, protocol: str) -> dict[str, dict[str, Any]]:
        """The resources of ``resource_type`` (routes, stages, authorizers, ...) of the ``protocol`` API."""
        api = self.api_id(protocol)
        return {
            name: res for name, res in self.of_type(resource_type).items() if res["Properties"]["ApiId"] == {"Ref": api}
        }

    def one_of_api(self, resource_type: str, protocol: str) -> tuple[str, dict[str, Any]]:
        found = self.of_api(resource_type, protocol)
        assert len(found) == 1, f"expected one {resource_type} of the {protocol} API, found {sorted(found)}"
        return next(iter(found.items()))

    def function(self, handler: str) -> tuple[str, dict[str, Any]]:
        found = {
            name: res
            for name, res in self.of_type("AWS::Lambda::Function").items()
            if res["Properties"]["Handler"] == handler
        }
        assert len(found) == 1, f"expected one function with handler {handler}, found {sorted(found)}"
        return next(iter(found.items()))


def synthesize(outdir: Path, stage: str, **overrides: Any) -> Synth:
    """``stage`` synthesized in process; a retaining stage of cdk.json (prod) with ``deploy_context`` unless
    ``overrides`` bring their own ``stages``."""
    from infra.app import build_app

    context = {} if "stages" in overrides else deploy_context(stage)
    # Account-agnostic like a synth without credentials, whatever the developer's shell has; and
    # nothing a test run left in this process's environment (a local stack's variables) reaches it.
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
        for name in list(os.environ):
            if name.startswith(("CONDUCTOR_", "POWERTOOLS_", "AWS_ENDPOINT_URL", "BEDROCK_")):
                patch.delenv(name)
        app, stack = build_app({"stage": stage, "skip_bundle_deps": "true", **context, **overrides}, outdir=str(outdir))
        assembly = app.synth()
    template = assembly.get_stack_by_name(stack.stack_name).template
    return Synth(config=stack.config, stack=stack, template=json.loads(json.dumps(template)), outdir=outdir)


@pytest.fixture(scope="session")
def synth_stage(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Synth]:
    cache: dict[str, Synth] = {}

    def get(stage: str) -> Synth:
        if stage not in cache:
            outdir = tmp_path_factory.mktemp(f"cdk-{stage}")
            extra = {"stages": EXTRA_STAGES[stage]()} if stage in EXTRA_STAGES else {}
            cache[stage] = synthesize(outdir, stage, **extra)
        return cache[stage]

    return get


@pytest.fixture(scope="session")
def dev(synth_stage: Callable[[str], Synth]) -> Synth:
    return synth_stage("dev")


@pytest.fixture(scope="session")
def prod(synth_stage: Callable[[str], Synth]) -> Synth:
    return synth_stage("prod")


@pytest.fixture(scope="session")
def variant(synth_stage: Callable[[str], Synth]) -> Synth:
    return synth_stage(VARIANT_STAGE)


@pytest.fixture(scope="session")
def signed_token(synth_stage: Callable[[str], Synth]) -> Synth:
    return synth_stage(SIGNED_TOKEN_STAGE)


@pytest.fixture(scope="session")
def existing_pool_stage(synth_stage: Callable[[str], Synth]) -> Synth:
    return synth_stage(EXISTING_POOL_STAGE)


@pytest.fixture(scope="session")
def quiet(synth_stage: Callable[[str], Synth]) -> Synth:
    return synth_stage(QUIET_STAGE)
