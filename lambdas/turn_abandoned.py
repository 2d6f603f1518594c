"""On-failure destination of the turn runner: a turn whose invocation never ran, or died.

Lambda sends it the invocation record when the runner's asynchronous event failed (its retries
are off) or waited past its maximum event age. The turn then ends with ``conductor_error``, a
spoken line and idle, so the session never stays "thinking"; the record is logged and counted
(``TurnsAbandoned``). A watcher of the person's speech that failed is no turn the person waited for:
its speculation is forgotten and it is counted apart (``WatcherFailures``).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from lambdas.runtime import PowertoolsMetrics, lambda_entry, logger, speculation_watcher, tracer, turn_runner
from shared.adapters.turn_launcher import TurnTask
from shared.core.stream import RUNNER_LOST_LINE
from shared.wire.protocol import ErrorCode

TURNS_ABANDONED_METRIC = "TurnsAbandoned"
WATCHER_FAILURES_METRIC = "WatcherFailures"


@lambda_entry
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    record = event if isinstance(event, dict) else {}
    request_context = record.get("requestContext")
    request_context = request_context if isinstance(request_context, dict) else {}
    condition = str(request_context.get("condition", "unknown"))
    response = record.get("responsePayload") or {}
    try:
        task = TurnTask.model_validate(record.get("requestPayload") or {})
    except ValidationError:
        logger.error("abandoned turn record without a turn task", extra={"condition": condition})
        return {"ended": False}
    logger.thread_safe_append_keys(session_id=task.session_id, stream_id=task.stream_id)
    tracer.put_annotation("session_id", task.session_id)
    logger.error(
        "turn abandoned by its runner",
        extra={
            "condition": condition,
            "attempts": request_context.get("approximateInvokeCount"),
            "error_type": response.get("errorType") if isinstance(response, dict) else None,
        },
    )
    if task.watch:  # a watcher of the person's speech: its speculation, never heard, is forgotten
        PowertoolsMetrics().count(WATCHER_FAILURES_METRIC)
        speculation_watcher().abandoned(task)
        return {"ended": True}
    PowertoolsMetrics().count(TURNS_ABANDONED_METRIC)
    turn_runner().fail(
        task, ErrorCode.CONDUCTOR_ERROR, f"the turn could not run ({condition})", fallback_line=RUNNER_LOST_LINE
    )
    return {"ended": True}
