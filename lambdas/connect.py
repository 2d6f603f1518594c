"""``$connect``: bind the new connection to its session (``?sessionId=<uuid v4>``)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from lambdas.events import ConnectEvent, principal_of
from lambdas.runtime import logger, metrics, service, tracer
from shared.wire.wire_formats import is_uuid_v4


def _response(status: int, body: str = "") -> dict[str, Any]:
    return {"statusCode": status, "body": body}


# never the event (POWERTOOLS_LOGGER_LOG_EVENT): its query string holds the client's token
@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.thread_safe_clear_keys()
    try:
        parsed = ConnectEvent.model_validate(event)
    except ValidationError as error:
        logger.warning("malformed $connect event", extra={"errors": error.error_count()})
        return _response(400, "malformed connect request")
    connection_id = parsed.request_context.connection_id
    logger.thread_safe_append_keys(connection_id=connection_id)
    session_id = (parsed.query_string_parameters or {}).get("sessionId")
    if not is_uuid_v4(session_id):
        logger.info("connection refused: sessionId is not a UUID v4")
        return _response(400, "sessionId must be a UUID v4")
    assert session_id is not None
    session_id = session_id.lower()
    logger.thread_safe_append_keys(session_id=session_id)
    tracer.put_annotation("session_id", session_id)
    authorizer = parsed.request_context.authorizer
    authorized_session = (authorizer or {}).get("sessionId")
    if authorized_session and str(authorized_session).lower() != session_id:
        logger.info("connection refused: token was issued for another session")
        return _response(403, "the token does not grant this session")
    result = service().connect(connection_id, session_id, principal_of(authorizer))
    logger.info("connection bound" if result.status == 200 else "connection refused", extra={"status": result.status})
    return _response(result.status, result.reason)
