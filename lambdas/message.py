"""``$default``: every frame the app sends. Never raises to API Gateway.

Replies go through the management API (the route has no route response). The handler only
decides, commits, posts and launches turns, well within API Gateway's 29 s integration timeout:
the model stream runs in the turn runner (``lambdas.turn``).
"""

from __future__ import annotations

from lambdas import init_phase  # first: the imports below run without the garbage collector

# isort: split

from typing import TYPE_CHECKING, Any

# The service every frame goes through, imported with the handler (the container's init), not by
# its first invocation: ``lambdas.runtime`` leaves it to the functions that build it.
import shared.flows.conductor_service  # noqa: F401
from lambdas.events import MessageEvent, principal_of
from lambdas.runtime import PowertoolsMetrics, lambda_entry, logger, service
from shared.adapters.gateway import callback_endpoint
from shared.flows.commit import error_metric_name
from shared.flows.delivery import Request
from shared.wire.protocol import ErrorCode, error_event

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

init_phase.done()

OK = {"statusCode": 200}


@lambda_entry
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    raw_context = event.get("requestContext") if isinstance(event, dict) else None
    raw_context = raw_context if isinstance(raw_context, dict) else {}
    connection_id = str(raw_context.get("connectionId", ""))
    endpoint = callback_endpoint(str(raw_context.get("domainName", "")), str(raw_context.get("stage", "")))
    logger.thread_safe_append_keys(connection_id=connection_id)
    try:
        parsed = MessageEvent.model_validate(event)
        request = Request(
            connection_id=connection_id,
            endpoint=endpoint,
            remaining_ms=context.get_remaining_time_in_millis,
            principal=principal_of(parsed.request_context.authorizer),
        )
        service().handle_frame(request, parsed.body, is_base64=parsed.is_base64_encoded)
    except Exception:  # last resort: the app gets handler_error, API Gateway gets a 200
        logger.exception("message handler failed")
        _report_failure(endpoint, connection_id)
    return OK


def _report_failure(endpoint: str, connection_id: str) -> None:
    # Counted even when it cannot be posted: Lambda's Errors never sees this failure.
    PowertoolsMetrics().count(error_metric_name(ErrorCode.HANDLER_ERROR))
    if not connection_id:
        return
    try:
        frame = error_event(ErrorCode.HANDLER_ERROR, "the conductor could not handle this message").to_json()
        service().gateway.post(endpoint, connection_id, frame)
    except Exception:
        logger.exception("could not report the failure to the connection")
