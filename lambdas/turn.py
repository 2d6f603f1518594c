"""The turn runner: streams the model for one turn, launched asynchronously by ``$default``.

Its own invocation (not the ``$default`` integration, which API Gateway cuts off after 29 s), so
a turn with a long answer or a slow build runs as long as the function's timeout allows.
"""

from __future__ import annotations

from lambdas import init_phase  # first: the imports below run without the garbage collector

# isort: split

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from lambdas.runtime import (
    DYNAMODB_REQUESTS_METRIC,
    MCP_SERVERS_ENV,
    POSTS_METRIC,
    PowertoolsMetrics,
    call_counts,
    lambda_entry,
    logger,
    mcp_registry,
    mcp_runner,
    speculation_watcher,
    tracer,
    turn_runner,
)
from shared.adapters.turn_launcher import TurnTask

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

init_phase.done()

TURN_RUN_METRIC = "TurnRunMs"


def _warm_mcp() -> None:
    """List the MCP servers' tools once, in the background of a new container: the SDK's import (about
    a second) and each server's handshake are paid while the container starts, not by a turn."""
    try:
        registry = mcp_registry()
        if registry is not None:
            registry.offered()
    except Exception:  # a turn lists them again; a server out of reach is said then
        logger.exception("MCP servers not listed while the container started")


if os.environ.get(MCP_SERVERS_ENV):
    threading.Thread(target=_warm_mcp, name="mcp-warm", daemon=True).start()


@lambda_entry
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        task = TurnTask.model_validate(event)
    except ValidationError as error:
        logger.error("malformed turn task: nothing to run", extra={"errors": error.error_count()})
        return {"ran": False}
    logger.thread_safe_append_keys(session_id=task.session_id, stream_id=task.stream_id)
    tracer.put_annotation("session_id", task.session_id)
    call_counts.reset()
    began = time.monotonic()
    if task.mcp_calls:
        mcp_runner().run(task, context.get_remaining_time_in_millis)
    elif task.watch:
        speculation_watcher().watch(task, context.get_remaining_time_in_millis)
    else:
        turn_runner().run(task, context.get_remaining_time_in_millis)
    # One record per runner invocation: what the turn cost, beside the runner's own timings.
    sink = PowertoolsMetrics()
    sink.timing(TURN_RUN_METRIC, (time.monotonic() - began) * 1000)
    sink.count(DYNAMODB_REQUESTS_METRIC, call_counts.get(DYNAMODB_REQUESTS_METRIC))
    sink.count(POSTS_METRIC, call_counts.get(POSTS_METRIC))
    return {"ran": True}
