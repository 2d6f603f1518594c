"""Cold import time of the Lambda handlers, as a fresh Lambda container pays it (init phase).

Measured as in Lambda (``LAMBDA_ENV``): the variables the Lambda runtime sets (``LAMBDA_TASK_ROOT``, the
``AWS_LAMBDA_*`` names, the X-Ray daemon's address, a trace header) and tracing on, so Powertools builds
the X-Ray recorder with botocore patched as in every deployed function, and the SDK takes its local
sampler (no network). ``IMPORT_ENV`` is outside Lambda with tracing off (the tests' and the local
stack's setting): the handlers then never import the X-Ray SDK.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("lambdas.connect", "lambdas.message", "lambdas.turn")
IMPORT_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "CONDUCTOR_TABLE": "voiceide-conductor-bench",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
_NOT_IN_LAMBDA = {"POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_TRACE_DISABLED", "AWS_SAM_LOCAL", "CONDUCTOR_MCP_SERVERS"}


def lambda_env(module: str) -> dict[str, str]:
    """The environment a deployed function's init sees (its own variables as ``infra`` sets them aside)."""
    name = "voiceide-conductor-" + module.rsplit(".", 1)[-1]
    return {
        **{key: value for key, value in IMPORT_ENV.items() if key not in _NOT_IN_LAMBDA},
        "AWS_SESSION_TOKEN": "testing",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]0123456789abcdef0123456789abcdef",
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129:2000",
        "_AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129",
        "_AWS_XRAY_DAEMON_PORT": "2000",
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        "_HANDLER": f"{module}.handler",
        "LAMBDA_TASK_ROOT": "/var/task",
        "LAMBDA_RUNTIME_DIR": "/var/runtime",
        "POWERTOOLS_SERVICE_NAME": "voiceide-conductor",
        "POWERTOOLS_METRICS_NAMESPACE": "VoiceIDE",
    }


def import_env(module: str, *, in_lambda: bool) -> dict[str, str]:
    """The fresh interpreter's environment: this process's, less what would change the measure."""
    env = {key: value for key, value in os.environ.items() if key not in _NOT_IN_LAMBDA}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    chosen: Mapping[str, str] = lambda_env(module) if in_lambda else IMPORT_ENV
    return {**env, **chosen, "PYTHONPATH": str(ROOT)}


def import_ms(module: str, *, bytecode: bool, in_lambda: bool = True) -> float:
    """Milliseconds ``import module`` takes in a fresh interpreter (``-X importtime`` cumulative), as in
    Lambda (``lambda_env``) or outside it with tracing off (``IMPORT_ENV``).

    Without bytecode: nothing is read from or written to ``__pycache__`` (a fresh, empty pycache
    prefix and PYTHONDONTWRITEBYTECODE), so every module is compiled from source.
    """
    env = import_env(module, in_lambda=in_lambda)
    with tempfile.TemporaryDirectory(prefix="pycache-") as prefix:
        if not bytecode:
            env |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": prefix}
        run = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    return cumulative_ms(run.stderr, module)


def cumulative_ms(importtime: str, module: str) -> float:
    """``module``'s cumulative import time (ms) in ``-X importtime`` output."""
    for line in reversed(importtime.splitlines()):
        fields = [part.strip() for part in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == module:
            return int(fields[1]) / 1000
    raise RuntimeError(f"import {module} failed: {importtime[-500:]}")


def cold_imports(repeat: int = 3) -> dict[str, tuple[float, float]]:
    """Per handler module, as in Lambda: (best ms with bytecode, best ms without), the handlers interleaved."""
    for module in HANDLERS:
        import_ms(module, bytecode=True)  # writes the bytecode the next runs read
    warm: dict[str, float] = {}
    cold: dict[str, float] = {}
    for round_ in range(repeat):
        for module in HANDLERS:
            warm[module] = min(warm.get(module, float("inf")), import_ms(module, bytecode=True))
            if round_ < max(1, repeat - 1):
                cold[module] = min(cold.get(module, float("inf")), import_ms(module, bytecode=False))
    return {module: (warm[module], cold[module]) for module in HANDLERS}


def outside_lambda_imports(repeat: int = 3) -> dict[str, float]:
    """Per handler module, the best ms with bytecode outside Lambda with tracing off (``IMPORT_ENV``)."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        for module in HANDLERS:
            best[module] = min(best.get(module, float("inf")), import_ms(module, bytecode=True, in_lambda=False))
    return best
