"""The turn runner: streams the model for one turn, launched asynchronously by ``$default``.

Its own invocation (not the ``$default`` integration, which API Gateway cuts off after 29 s), so
a turn with a long answer or a slow build runs as long as the function's timeout allows.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from lambdas.runtime import (
    DYNAMODB_REQUESTS_METRIC,
    POSTS_METRIC,
    PowertoolsMetrics,
    call_counts,
    lambda_entry,
    logger,
    speculation_watcher,
    tracer,
    turn_runner,
)
from shared.adapters.turn_launcher import TurnTask

TURN_RUN_METRIC = "TurnRunMs"


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
    if task.watch:
        speculation_watcher().watch(task, context.get_remaining_time_in_millis)
    else:
        turn_runner().run(task, context.get_remaining_time_in_millis)
    # One record per runner invocation: what the turn cost, beside the runner's own timings.
    sink = PowertoolsMetrics()
    sink.timing(TURN_RUN_METRIC, (time.monotonic() - began) * 1000)
    sink.count(DYNAMODB_REQUESTS_METRIC, call_counts.get(DYNAMODB_REQUESTS_METRIC))
    sink.count(POSTS_METRIC, call_counts.get(POSTS_METRIC))
    return {"ran": True}
