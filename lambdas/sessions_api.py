"""The sessions API (docs/sessions-api.md): one Lambda behind an API Gateway HTTP API (payload 2.0).

Routes are served by Powertools' ``APIGatewayHttpResolver`` with validation on, so the parameters
and bodies are checked against the same models the OpenAPI document is generated from
(``lambdas.openapi_export``). Every error this Lambda answers has one shape,
``{"error": {"code", "message"}}``: Powertools' own validation errors too (400, never its 422).
The caller is the JWT authorizer's ``sub``; the local stack without sign-in has one person, ``local``.
"""

from __future__ import annotations

import base64
import binascii
import os
from functools import cache
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.runtime import lambda_entry, logger, memory_service, session_service, settings
from shared.core.session_index import LOCAL_PRINCIPAL
from shared.flows.memory_service import NoSuchMemory
from shared.flows.session_service import BadRequest, NotFound
from shared.wire import bounded_json
from shared.wire.session_api_models import (
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    TRANSCRIPT_LIMIT_DEFAULT,
    TRANSCRIPT_LIMIT_MAX,
    ErrorBody,
    MemoriesErased,
    MemoryList,
    RenameBody,
    Session,
    SessionDetail,
    SessionList,
    Status,
    error_body,
)
from shared.wire.session_cursors import CursorSeal

MEMORIES_LIMIT_MAX = 100

UUID_V4 = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$"
SessionId = Annotated[str, Path(pattern=UUID_V4, description="the session id the app chose: a UUID v4, any case")]


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"model": ErrorBody}}}


UNAUTHORIZED = {
    "description": "no valid token: answered by API Gateway's JWT authorizer as "
    '{"message":"Unauthorized"}, or by the Lambda in the error shape when the stage needs sign-in',
    "content": {
        "application/json": {
            "schema": {
                "oneOf": [
                    {"$ref": "#/components/schemas/ErrorBody"},
                    {
                        "type": "object",
                        "properties": {"message": {"type": "string", "const": "Unauthorized"}},
                        "required": ["message"],
                    },
                ]
            }
        }
    },
}
ERRORS: dict[int, Any] = {
    400: _error("an id, limit, status, cursor, title or body this API does not take"),
    401: UNAUTHORIZED,
    500: _error("an unexpected failure (logged with the request id)"),
}
SESSION_ERRORS: dict[int, Any] = {
    **ERRORS,
    404: _error("no such session for this person: never made, erased, or another person's, answered alike"),
}
# A request body nests at most this deep (``{"title": ...}`` is 1 deep) and holds no number literal
# over bounded_json.MAX_NUMBER_CHARS characters, no NaN or Infinity: anything else is a 400.
BODY_MAX_DEPTH = 32

# Deployed: the Secrets Manager secret holding the key that signs page cursors (read once per cold
# start). The local stack and tests: the key itself, in CONDUCTOR_CURSOR_KEY.
CURSOR_SECRET_ARN_ENV = "CONDUCTOR_CURSOR_SECRET_ARN"
CURSOR_KEY_ENV = "CONDUCTOR_CURSOR_KEY"


def read_body(text: str) -> Any:
    return bounded_json.loads(text, max_depth=BODY_MAX_DEPTH)


app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=read_body)


@cache
def cursor_seal() -> CursorSeal:
    """The seal of this stage's page cursors, with the key read once per container."""
    arn = os.environ.get(CURSOR_SECRET_ARN_ENV)
    key = parameters.get_secret(arn) if arn else os.environ.get(CURSOR_KEY_ENV)
    if not isinstance(key, str) or not key:
        raise RuntimeError(f"no cursor key: set {CURSOR_SECRET_ARN_ENV} (deployed) or {CURSOR_KEY_ENV}")
    return CursorSeal(key.encode())


class Unauthorized(Exception):
    """A stage with sign-in, and a request without the authorizer's ``sub``."""


def _owner() -> str:
    sub = app.current_event.request_context.authorizer.jwt_claim.get("sub")
    if isinstance(sub, str) and sub:
        return sub
    if settings().require_principal:
        raise Unauthorized
    return LOCAL_PRINCIPAL


@app.get(
    "/sessions",
    summary="The person's sessions, newest activity first",
    operation_id="listSessions",
    tags=["sessions"],
    responses={200: {"description": "a page of sessions"}, **ERRORS},
)
def list_sessions(
    status: Annotated[Status | None, Query(description="only sessions with this status (all when left out)")] = None,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX, description="sessions per page")] = LIST_LIMIT_DEFAULT,
    cursor: Annotated[str | None, Query(description="the nextCursor of the previous page")] = None,
) -> SessionList:
    return session_service().list(_owner(), cursor_seal(), status, limit, cursor)


@app.get(
    "/sessions/<id>",
    summary="One session and a page of its transcript, oldest first",
    operation_id="getSession",
    tags=["sessions"],
    responses={200: {"description": "the session and a page of its transcript"}, **SESSION_ERRORS},
)
def get_session(
    id: SessionId,
    limit: Annotated[
        int, Query(ge=1, le=TRANSCRIPT_LIMIT_MAX, description="transcript entries per page")
    ] = TRANSCRIPT_LIMIT_DEFAULT,
    cursor: Annotated[str | None, Query(description="the nextCursor of the previous page")] = None,
) -> SessionDetail:
    return session_service().show(_owner(), id, cursor_seal(), limit, cursor)


@app.patch(
    "/sessions/<id>",
    summary="Rename a session",
    operation_id="renameSession",
    tags=["sessions"],
    responses={200: {"description": "the session, renamed"}, **SESSION_ERRORS},
)
def rename_session(id: SessionId, body: RenameBody) -> Session:
    return session_service().rename(_owner(), id, body.title)


@app.post(
    "/sessions/<id>/end",
    summary="End a session: its open connection gets session_ended and is closed",
    operation_id="endSession",
    tags=["sessions"],
    responses={200: {"description": "the session, ended"}, **SESSION_ERRORS},
)
def end_session(id: SessionId) -> Session:
    return session_service().end(_owner(), id)


@app.delete(
    "/sessions/<id>",
    summary="Erase a session and every item of it",
    operation_id="eraseSession",
    tags=["sessions"],
    status_code=204,
    responses={204: {"description": "erased", "content": {}}, **SESSION_ERRORS},
)
def erase_session(id: SessionId) -> None:
    owner = _owner()
    session_service().erase(owner, id)
    memory_service().erase_session(owner, id)  # the memory's events of it go too


# ---- memories ----------------------------------------------------------------------------------

MEMORY_ID = r"^mem-[a-zA-Z0-9_-]{36,46}$"
MemoryId = Annotated[str, Path(pattern=MEMORY_ID, description="a record's id, as GET /memories lists it")]
MEMORY_ERRORS: dict[int, Any] = {
    **ERRORS,
    404: _error("no such record for this person: never made, forgotten, or another person's, answered alike"),
}


@app.get(
    "/memories",
    summary="What the conductor remembers of the person, newest first",
    operation_id="listMemories",
    tags=["memories"],
    responses={200: {"description": "a page of records"}, **ERRORS},
)
def list_memories(
    limit: Annotated[int, Query(ge=1, le=MEMORIES_LIMIT_MAX, description="records per page")] = LIST_LIMIT_DEFAULT,
    cursor: Annotated[str | None, Query(description="the nextCursor of the previous page")] = None,
) -> MemoryList:
    return memory_service().list(_owner(), cursor_seal(), limit, cursor)


@app.delete(
    "/memories/<id>",
    summary="Forget one record",
    operation_id="forgetMemory",
    tags=["memories"],
    status_code=204,
    responses={204: {"description": "forgotten", "content": {}}, **MEMORY_ERRORS},
)
def forget_memory(id: MemoryId) -> None:
    memory_service().forget(_owner(), id)


@app.delete(
    "/memories",
    summary="Forget everything remembered of the person, and the conversations it was taken from",
    operation_id="forgetAllMemories",
    tags=["memories"],
    responses={200: {"description": "how many records were deleted"}, **ERRORS},
)
def forget_all_memories() -> MemoriesErased:
    return MemoriesErased(deleted=memory_service().forget_all(_owner()))


# ---- errors ------------------------------------------------------------------------------------


def error_response(status: HTTPStatus, code: str, message: str) -> Response:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=error_body(code, message))


@app.exception_handler([RequestValidationError, RequestUnsupportedContentType])
def _invalid(error: RequestValidationError | RequestUnsupportedContentType) -> Response:
    errors = list(error.errors()) if isinstance(error, RequestValidationError) else []
    if any(tuple(item.get("loc", ()))[:1] == ("response",) for item in errors):
        # Powertools reports an answer that fails its model as a request validation error: ours, 500.
        return _internal(error)
    return error_response(HTTPStatus.BAD_REQUEST, "bad_request", validation_message(errors, app.current_event.path))


@app.exception_handler(BadRequest)
def _bad_request(error: BadRequest) -> Response:
    return error_response(HTTPStatus.BAD_REQUEST, "bad_request", str(error))


@app.exception_handler(bounded_json.JsonRefused)
def _refused_body(error: bounded_json.JsonRefused) -> Response:
    return error_response(HTTPStatus.BAD_REQUEST, "bad_request", body_problem(error))


def body_problem(error: bounded_json.JsonRefused) -> str:
    return f"the body must be JSON: {error}" if error.bound else "the body must be JSON"


@app.exception_handler(Unauthorized)
def _unauthorized(_: Unauthorized) -> Response:
    return error_response(HTTPStatus.UNAUTHORIZED, "unauthorized", "sign in: this stage needs a token")


@app.exception_handler(NotFound)
def _not_found(error: NotFound) -> Response:
    what = "record" if isinstance(error, NoSuchMemory) else "session"
    return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no such {what}")


@app.not_found
def _no_route(_: NotFoundError) -> Response:
    return error_response(HTTPStatus.NOT_FOUND, "not_found", "no such route")


@app.exception_handler(Exception)
def _internal(error: Exception) -> Response:
    request_id = app.lambda_context.aws_request_id if app.lambda_context else "?"
    logger.exception("sessions API request failed", extra={"route": app.current_event.route_key})
    return error_response(HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error", f"an unexpected failure ({request_id})")


def validation_message(errors: list[Any], path: str) -> str:
    """Why a request failed validation, in words (never pydantic's, which name Python internals)."""
    if not errors:
        return "the body must be JSON"
    location = tuple(errors[0].get("loc", ()))
    where, name = (*location, "", "")[:2]
    if where == "path":
        return "the session id must be a UUID v4"
    if where == "query" and name == "limit":
        most = LIST_LIMIT_MAX if path.rstrip("/") == "/sessions" else TRANSCRIPT_LIMIT_MAX
        return f"limit must be between 1 and {most}"
    if where == "query" and name == "status":
        return "status must be active, idle or ended"
    if where == "query":
        return f"{name} is not valid"
    if where == "body" and name == "title":
        if errors[0].get("type") == "missing":
            return 'the body must be {"title": string}'
        return "the title must be a string of 1 to 60 characters once trimmed"
    if where == "body" and name:
        return f'the body may only hold "title", not "{name}"'
    return 'the body must be {"title": string}'


# ---- the handler -------------------------------------------------------------------------------


def unreadable_body(event: dict[str, Any]) -> str | None:
    """Why a request's body cannot be the documented JSON before it is parsed (Powertools would
    read a form or multipart body by its content type, and fail on bytes that are not UTF-8), or
    why it is not JSON within the bounds (``BODY_MAX_DEPTH``, no long or non-finite numbers)."""
    body = event.get("body")
    method = (event.get("requestContext") or {}).get("http", {}).get("method", "")
    if not body or method != "PATCH":
        return None
    headers = {str(name).lower(): str(value) for name, value in (event.get("headers") or {}).items()}
    media_type = headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        return "the body must be JSON (Content-Type: application/json)"
    try:
        raw = base64.b64decode(body, validate=True) if event.get("isBase64Encoded") else str(body).encode()
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return "the body must be JSON text in UTF-8"
    try:
        read_body(text)
    except bounded_json.JsonRefused as error:
        return body_problem(error)
    return None


@lambda_entry(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    problem = unreadable_body(event)
    if problem is not None:
        return {
            "statusCode": HTTPStatus.BAD_REQUEST,
            "headers": {"Content-Type": content_types.APPLICATION_JSON},
            "body": ErrorBody.model_validate(error_body("bad_request", problem)).model_dump_json(),
        }
    return app.resolve(event, context)
