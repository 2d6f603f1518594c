"""``$connect``: bind the new connection to its session (``?sessionId=<uuid v4>``)."""

from __future__ import annotations

from lambdas import init_phase  # first: the imports below run without the garbage collector

# isort: split

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

# The service every connection goes through, imported with the handler (the container's init), not by
# its first invocation: ``lambdas.runtime`` leaves it to the functions that build it.
import shared.flows.conductor_service  # noqa: F401
from lambdas.events import ConnectEvent, principal_of
from lambdas.runtime import lambda_entry, logger, service, tracer
from shared.flows.connecting import check_connect

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

init_phase.done()


def _response(status: int, body: str = "") -> dict[str, Any]:
    return {"statusCode": status, "body": body}


@lambda_entry  # never logs the event: its query string holds the client's token
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        parsed = ConnectEvent.model_validate(event)
    except ValidationError as error:
        logger.warning("malformed $connect event", extra={"errors": error.error_count()})
        return _response(400, "malformed connect request")
    connection_id = parsed.request_context.connection_id
    logger.thread_safe_append_keys(connection_id=connection_id)
    authorizer = parsed.request_context.authorizer
    check = check_connect((parsed.query_string_parameters or {}).get("sessionId"), authorizer)
    if check.session_id is not None:
        logger.thread_safe_append_keys(session_id=check.session_id)
        tracer.put_annotation("session_id", check.session_id)
    if check.refusal is not None:
        logger.info(check.refusal.log_line)
        return _response(check.refusal.status, check.refusal.body)
    assert check.session_id is not None  # what is not refused names its session
    result = service().connect(connection_id, check.session_id, principal_of(authorizer))
    logger.info("connection bound" if result.status == 200 else "connection refused", extra={"status": result.status})
    return _response(result.status, result.reason)
