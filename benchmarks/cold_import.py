"""Cold import time of the Lambda handlers, as a fresh Lambda container pays it (init phase)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
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


def import_ms(module: str, *, bytecode: bool) -> float:
    """Milliseconds ``import module`` takes in a fresh interpreter (``-X importtime`` cumulative).

    Without bytecode: nothing is read from or written to ``__pycache__`` (a fresh, empty pycache
    prefix and PYTHONDONTWRITEBYTECODE), so every module is compiled from source.
    """
    env = {**os.environ, **IMPORT_ENV, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
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
    for line in reversed(run.stderr.splitlines()):
        fields = [part.strip() for part in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == module:
            return int(fields[1]) / 1000
    raise RuntimeError(f"import {module} failed: {run.stderr[-500:]}")


def cold_imports(repeat: int = 3) -> dict[str, tuple[float, float]]:
    """Per handler module: (best ms with bytecode, best ms without)."""
    results = {}
    for module in HANDLERS:
        import_ms(module, bytecode=True)  # writes the bytecode the next runs read
        warm = min(import_ms(module, bytecode=True) for _ in range(repeat))
        cold = min(import_ms(module, bytecode=False) for _ in range(max(1, repeat - 1)))
        results[module] = (warm, cold)
    return results
