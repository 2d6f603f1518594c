"""``$disconnect``: forget the connection; the session keeps its state for a reconnect."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from lambdas.events import DisconnectEvent
from lambdas.runtime import lambda_entry, logger, service
from shared.adapters.gateway import callback_endpoint


@lambda_entry
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        parsed = DisconnectEvent.model_validate(event)
    except ValidationError as error:
        logger.warning("malformed $disconnect event", extra={"errors": error.error_count()})
        return {"statusCode": 400}
    connection_id = parsed.request_context.connection_id
    logger.thread_safe_append_keys(connection_id=connection_id)
    raw_context = event.get("requestContext") or {}
    endpoint = callback_endpoint(str(raw_context.get("domainName", "")), str(raw_context.get("stage", "")))
    service().disconnect(connection_id, endpoint)
    logger.info("connection closed", extra={"reason": parsed.request_context.disconnect_reason})
    return {"statusCode": 200}
