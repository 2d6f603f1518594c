"""The cold import benchmark measures as a deployed function imports: in Lambda, tracing on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import cold_import

PROBE = """
import json, sys
import lambdas.message
from lambdas.runtime import tracer
print(json.dumps({"disabled": tracer.disabled, "sdk_loaded": "aws_xray_sdk.core" in sys.modules}))
"""


def probe(env: dict[str, str]) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=cold_import.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(run.stdout.splitlines()[-1])
    return result


@pytest.fixture
def tests_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test run or the local stack may have set, none of it in a deployed function."""
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("AWS_SAM_LOCAL", "true")
    monkeypatch.setenv("CONDUCTOR_MCP_SERVERS", '[{"name": "demo", "url": "http://127.0.0.1:9/mcp"}]')


@pytest.mark.usefixtures("tests_environment")
def test_as_in_lambda_the_handlers_trace_with_the_x_ray_sdk() -> None:
    env = cold_import.import_env("lambdas.message", in_lambda=True)
    assert env["LAMBDA_TASK_ROOT"] == "/var/task"
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == "voiceide-conductor-message"
    assert env["_HANDLER"] == "lambdas.message.handler"
    assert not {"POWERTOOLS_TRACE_DISABLED", "POWERTOOLS_METRICS_DISABLED", "AWS_SAM_LOCAL"} & env.keys()
    assert "CONDUCTOR_MCP_SERVERS" not in env
    assert probe(env) == {"disabled": False, "sdk_loaded": True}


@pytest.mark.usefixtures("tests_environment")
def test_outside_lambda_the_handlers_import_no_x_ray_sdk() -> None:
    env = cold_import.import_env("lambdas.message", in_lambda=False)
    assert "LAMBDA_TASK_ROOT" not in env
    assert "CONDUCTOR_MCP_SERVERS" not in env
    assert probe(env) == {"disabled": True, "sdk_loaded": False}


def test_the_module_s_cumulative_time_is_read() -> None:
    importtime = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       120 |        120 |   lambdas.events",
            "import time:       580 |     348277 | lambdas.message",
        ]
    )
    assert cold_import.cumulative_ms(importtime, "lambdas.message") == pytest.approx(348.277)
    with pytest.raises(RuntimeError, match=r"import lambdas\.turn failed"):
        cold_import.cumulative_ms(importtime, "lambdas.turn")


def test_the_handlers_are_measured_interleaved(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool, bool]] = []

    def measure(module: str, *, bytecode: bool, in_lambda: bool = True) -> float:
        calls.append((module, bytecode, in_lambda))
        return 100.0 + len(calls)

    monkeypatch.setattr(cold_import, "import_ms", measure)
    imports = cold_import.cold_imports(2)
    assert set(imports) == set(cold_import.HANDLERS)
    assert all(warm < cold for warm, cold in imports.values())
    assert all(in_lambda for _, _, in_lambda in calls)
    outside = cold_import.outside_lambda_imports(2)
    assert set(outside) == set(cold_import.HANDLERS)
    assert [module for module, _, in_lambda in calls if not in_lambda] == list(cold_import.HANDLERS) * 2
