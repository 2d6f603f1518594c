"""The handlers' tracer: the X-Ray SDK where traces are sent, not even imported where they are not."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lambdas import runtime

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import lambdas.message, lambdas.turn
from lambdas.runtime import tracer
import botocore.client
print(json.dumps({
    "disabled": tracer.disabled,
    "provider": type(tracer.provider).__module__,
    "sdk_loaded": "aws_xray_sdk.core" in sys.modules,
    "botocore_patched": "aws_xray_sdk.ext.botocore.patch" in sys.modules,
}))
"""


def probe(**environment: str) -> dict[str, object]:
    """The tracer a fresh container builds with ``environment`` (a subprocess: the tracer is built at import)."""
    env = {key: value for key, value in os.environ.items() if key not in {"LAMBDA_TASK_ROOT", "AWS_SAM_LOCAL"}}
    env |= {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CONDUCTOR_TABLE": "voiceide-conductor-test",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "PYTHONPATH": str(ROOT),
        **environment,
    }
    run = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    result: dict[str, object] = json.loads(run.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "environment",
    [
        {"POWERTOOLS_TRACE_DISABLED": "true"},
        {"POWERTOOLS_TRACE_DISABLED": "false"},  # outside Lambda
        {"POWERTOOLS_TRACE_DISABLED": "true", "LAMBDA_TASK_ROOT": "/var/task"},
        {"POWERTOOLS_TRACE_DISABLED": "false", "LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"},
    ],
)
def test_without_traces_the_x_ray_sdk_is_never_imported(environment: dict[str, str]) -> None:
    assert probe(**environment) == {
        "disabled": True,
        "provider": "lambdas.runtime",
        "sdk_loaded": False,
        "botocore_patched": False,
    }


def test_in_lambda_with_tracing_the_x_ray_recorder_traces_botocore() -> None:
    assert probe(POWERTOOLS_TRACE_DISABLED="false", LAMBDA_TASK_ROOT="/var/task") == {
        "disabled": False,
        "provider": "aws_xray_sdk.core.async_recorder",
        "sdk_loaded": True,
        "botocore_patched": True,
    }


def test_a_disabled_tracer_still_runs_the_handler_and_its_errors() -> None:
    assert isinstance(runtime.tracer.provider, runtime.NoTraces)

    def handler(event: dict[str, object], context: object) -> dict[str, object]:
        if event.get("fail"):
            raise ValueError("failed")
        return {"ok": True}

    traced = runtime.tracer.capture_lambda_handler(handler, capture_response=False)
    assert traced({}, None) == {"ok": True}
    with pytest.raises(ValueError, match="failed"):
        traced({"fail": True}, None)


def test_no_traces_takes_every_call_of_a_provider_and_records_nothing() -> None:
    provider = runtime.NoTraces()
    with provider.in_subsegment("## handler") as subsegment:
        assert subsegment.put_annotation("ColdStart", True) is None
        assert subsegment.put_metadata("handler error", ValueError("failed"), namespace="voiceide") is None
    assert provider.put_annotation("session_id", "s-1") is None
    assert provider.put_metadata("key", {"value": 1}) is None
    assert provider.patch(["botocore"]) is None
    assert provider.patch_all() is None

    async def traced() -> None:
        async with provider.in_subsegment_async("## handler") as subsegment:
            assert subsegment.put_annotation("ColdStart", True) is None

    asyncio.run(traced())
