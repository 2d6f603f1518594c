"""Writes the sessions API's OpenAPI 3.1 document: ``python -m lambdas.openapi_export [PATH]``
(``make openapi``; docs/openapi.json).

The document is generated from the sessions Lambda's resolver (``lambdas.sessions_api``), so its
routes, parameters and models are the ones the Lambda validates with. Powertools documents its own
422 validation answer; this API answers validation errors with 400 in its error shape, so the 422
answers and their schemas are left out, as are the ``null`` alternatives of optional query
parameters (a query parameter is absent, never null).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.wire.schema_export import write_document

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "openapi.json"
TITLE = "VoiceIDE sessions API"
VERSION = "1.0.0"
DESCRIPTION = (
    "The conductor's HTTPS API for the app's session picker: the person's sessions, one session's "
    "transcript, renaming, ending and erasing a session. The contract in words is docs/sessions-api.md."
)
SECURITY_SCHEME = "cognito"
POWERTOOLS_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the resolver the sessions Lambda serves."""
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Server, ServerVariable

    from lambdas.sessions_api import app

    raw = app.get_openapi_json_schema(
        title=TITLE,
        version=VERSION,
        openapi_version="3.1.0",
        description=DESCRIPTION,
        servers=[
            Server(
                url="https://{apiId}.execute-api.{region}.amazonaws.com",
                description="a deployed stage (cdk output SessionsApiUrl)",
                variables={
                    "apiId": ServerVariable(default="abcdef1234", description="the stage's HTTP API id"),
                    "region": ServerVariable(default="us-east-1", description="the stage's region"),
                },
            ),
            Server(url="http://127.0.0.1:8080", description="the local stack (the WebSocket's host and port)"),
        ],
        security_schemes={
            SECURITY_SCHEME: HTTPBearer(
                scheme="bearer",
                bearerFormat="JWT",
                description="the stage's Cognito ID or access token, checked by API Gateway's JWT authorizer "
                "(every deployed stage has it; only the local stack without sign-in has none: "
                "every session belongs to one person, local)",
            )
        },
        security=[{SECURITY_SCHEME: []}],
    )
    return tidy(json.loads(raw))


def tidy(document: dict[str, Any]) -> dict[str, Any]:
    """Drop what Powertools adds that this API never answers (see the module's docstring)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for response in responses.values():
                if response.get("content") == {}:
                    del response["content"]
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                choices = schema.get("anyOf")
                if parameter.get("in") == "query" and choices and {"type": "null"} in choices and len(choices) == 2:
                    del schema["anyOf"]
                    schema.update(next(choice for choice in choices if choice != {"type": "null"}))
    schemas = document.get("components", {}).get("schemas", {})
    text = json.dumps(document.get("paths", {}))
    for name in POWERTOOLS_VALIDATION_SCHEMAS:
        if f'"#/components/schemas/{name}"' not in text:
            schemas.pop(name, None)
    return document


def render() -> str:
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_document(render(), DEFAULT_PATH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
