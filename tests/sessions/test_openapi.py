"""docs/openapi.json: valid OpenAPI 3.1, the routes the sessions Lambda serves, and up to date."""

from __future__ import annotations

import json

from openapi_spec_validator import validate

from lambdas.openapi_export import DEFAULT_PATH, render
from lambdas.sessions_api import app

DOCUMENTED_ROUTES = {
    ("GET", "/sessions"),
    ("GET", "/sessions/{id}"),
    ("PATCH", "/sessions/{id}"),
    ("POST", "/sessions/{id}/end"),
    ("DELETE", "/sessions/{id}"),
    ("GET", "/memories"),
    ("DELETE", "/memories"),
    ("DELETE", "/memories/{id}"),
}


def committed() -> dict[str, object]:
    return json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))


def test_the_document_is_valid_openapi_3_1() -> None:
    document = committed()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] == "VoiceIDE sessions API"  # type: ignore[index]
    validate(document)


def test_it_lists_exactly_the_routes_the_resolver_serves() -> None:
    served = {(route.method, route.openapi_path) for route in app._static_routes + app._dynamic_routes}
    documented = {
        (method.upper(), path)
        for path, operations in committed()["paths"].items()  # type: ignore[attr-defined]
        for method in operations
    }
    assert served == documented == DOCUMENTED_ROUTES


def test_every_operation_documents_its_errors_in_our_shape_and_never_422() -> None:
    for path, operations in committed()["paths"].items():  # type: ignore[attr-defined]
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)
            for status in ("400", "500") + (("404",) if "{id}" in path else ()):
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
            assert "401" in responses


def test_it_says_how_to_sign_in() -> None:
    document = committed()
    assert document["components"]["securitySchemes"]["cognito"] == {  # type: ignore[index]
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": document["components"]["securitySchemes"]["cognito"]["description"],  # type: ignore[index]
    }
    assert document["security"] == [{"cognito": []}]
    assert [server["url"] for server in document["servers"]] == [  # type: ignore[attr-defined]
        "https://{apiId}.execute-api.{region}.amazonaws.com",
        "http://127.0.0.1:8080",
    ]


def test_the_committed_file_is_a_fresh_export() -> None:
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(), "run `make openapi` and commit docs/openapi.json"
