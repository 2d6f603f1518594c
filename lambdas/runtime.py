"""Per-container wiring: settings, boto3 clients and the service, built once and reused."""

from __future__ import annotations

import os
from functools import cache

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.config import Config

from shared.brain import BedrockBrain, bedrock_client_config
from shared.commit import Committer
from shared.config import Settings
from shared.core.wrapper import wrapper_tool_spec
from shared.delivery import Delivery
from shared.gateway import ConnectionGateway
from shared.service import ConductorService
from shared.store import SessionStore
from shared.turn_launcher import LambdaTurnLauncher
from shared.turn_runner import TurnRunner

SERVICE_NAME = os.environ.get("POWERTOOLS_SERVICE_NAME", "voiceide-conductor")

logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "VoiceIDE"), service=SERVICE_NAME)

_AWS_CONFIG = Config(connect_timeout=3, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 5})


class PowertoolsMetrics:
    def count(self, name: str, value: int = 1) -> None:
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


@cache
def settings() -> Settings:
    return Settings.from_env()


@cache
def store() -> SessionStore:
    client = boto3.client("dynamodb", config=_AWS_CONFIG)
    return SessionStore(client, settings().table_name, ttl_seconds=settings().session_ttl_seconds)


@cache
def service() -> ConductorService:
    config = settings()
    lambda_client = boto3.client("lambda", config=_AWS_CONFIG)
    return ConductorService(
        store=store(),
        gateway=gateway(),
        launcher=LambdaTurnLauncher(lambda_client, config.turn_function),
        runner=turn_runner(),
        settings=config,
        logger=logger,
        metrics=PowertoolsMetrics(),
    )


@cache
def gateway() -> ConnectionGateway:
    return ConnectionGateway(
        lambda endpoint: boto3.client("apigatewaymanagementapi", endpoint_url=endpoint, config=_AWS_CONFIG)
    )


@cache
def turn_runner() -> TurnRunner:
    config = settings()
    bedrock = boto3.client(
        "bedrock-runtime",
        region_name=config.bedrock_region,
        config=bedrock_client_config(
            config.bedrock_connect_timeout_s, config.stream_idle_timeout_s, config.bedrock_max_attempts
        ),
    )
    brain = BedrockBrain(
        bedrock,
        model_id=config.model_id,
        system_prompt=config.system_prompt,
        tool_spec=wrapper_tool_spec(config.catalog),
        max_tokens=config.max_tokens,
        temperature=config.temperature,
    )
    metrics_sink = PowertoolsMetrics()
    committer = Committer(store(), config, metrics_sink)
    delivery = Delivery(store=store(), gateway=gateway(), committer=committer, logger=logger, metrics=metrics_sink)
    return TurnRunner(
        store=store(),
        brain=brain,
        committer=committer,
        delivery=delivery,
        settings=config,
        logger=logger,
        metrics=metrics_sink,
    )


def reset() -> None:
    """Forget the container's clients and settings (the local stack and tests re-point them)."""
    for built in (settings, store, service, gateway, turn_runner):
        built.cache_clear()
