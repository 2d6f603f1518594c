"""What a cold start imports: each handler its own path, in a deployed function's environment (tracing on)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.cold_import import ROOT, import_env

PROBE = """
import json, sys
import {module}
print(json.dumps(sorted(sys.modules)))
"""

# Never on a handler's import: the sessions API, the reaper, the MCP SDK and the name matching.
NOT_ON_ANY_PATH = (
    "shared.core.identifiers",
    "shared.flows.session_service",
    "shared.flows.memory_service",
    "shared.flows.session_reaper",
    "shared.adapters.mcp_client",
    "shared.flows.mcp_runner",
    "mcp",
    "rapidfuzz",
    "jellyfish",
)
SERVICE = ("shared.flows.conductor_service", "shared.flows.frame_routes", "shared.flows.session_ready")


def imported(module: str) -> set[str]:
    """The modules a fresh container holds once ``module`` is imported, as in Lambda."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=ROOT,
        env=import_env(module, in_lambda=True),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(json.loads(run.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", ["lambdas.message", "lambdas.connect"])
def test_the_websocket_handlers_import_the_service_but_not_the_watcher(module: str) -> None:
    loaded = imported(module)
    assert set(SERVICE) <= loaded  # every invocation uses it: paid in the init, not by the first one
    assert "shared.flows.speculation_watcher" not in loaded
    assert not loaded & set(NOT_ON_ANY_PATH)


def test_the_turn_runner_imports_neither_the_service_nor_the_watcher() -> None:
    loaded = imported("lambdas.turn")
    assert "shared.flows.turn_runner" in loaded
    assert "aws_xray_sdk.core" in loaded
    assert not loaded & {*SERVICE, "shared.flows.speculation_watcher", *NOT_ON_ANY_PATH}


GC_PROBE = """
import gc, json, sys
{before}
import lambdas.turn
print(json.dumps({{"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}}))
"""


@pytest.mark.parametrize(("before", "enabled"), [("", True), ("gc.disable()", False)])
def test_the_init_runs_without_the_collector_and_leaves_it_as_it_was(before: str, enabled: bool) -> None:
    run = subprocess.run(
        [sys.executable, "-c", GC_PROBE.format(before=before)],
        cwd=ROOT,
        env=import_env("lambdas.turn", in_lambda=True),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    after = json.loads(run.stdout.splitlines()[-1])
    assert after["enabled"] is enabled
    assert after["frozen"] > 10_000  # what the imports built, out of every later collection
