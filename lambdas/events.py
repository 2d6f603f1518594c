"""API Gateway WebSocket event models (Powertools parser), extended with what we read."""

from __future__ import annotations

from typing import Any

# The WebSocket models' own module: the ``models`` package imports every event source's models,
# some 60 ms of a cold start.
from aws_lambda_powertools.utilities.parser.models.apigw_websocket import (
    APIGatewayWebSocketConnectEventModel,
    APIGatewayWebSocketConnectEventRequestContext,
    APIGatewayWebSocketDisconnectEventModel,
    APIGatewayWebSocketMessageEventModel,
    APIGatewayWebSocketMessageEventRequestContext,
)
from pydantic import Field


class ConnectRequestContext(APIGatewayWebSocketConnectEventRequestContext):
    authorizer: dict[str, Any] | None = None


class ConnectEvent(APIGatewayWebSocketConnectEventModel):
    """``$connect``; the Powertools model lacks the query string and the authorizer context."""

    request_context: ConnectRequestContext = Field(alias="requestContext")
    query_string_parameters: dict[str, str] | None = Field(default=None, alias="queryStringParameters")


class MessageRequestContext(APIGatewayWebSocketMessageEventRequestContext):
    authorizer: dict[str, Any] | None = None


class MessageEvent(APIGatewayWebSocketMessageEventModel):
    request_context: MessageRequestContext = Field(alias="requestContext")
    body: str | None = Field(default=None, alias="body")


DisconnectEvent = APIGatewayWebSocketDisconnectEventModel


def principal_of(authorizer: dict[str, Any] | None) -> str | None:
    if not authorizer:
        return None
    principal = authorizer.get("principalId")
    return str(principal) if principal else None
