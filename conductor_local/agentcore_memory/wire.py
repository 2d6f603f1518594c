"""The rest-json wire protocol of ``bedrock-agentcore``, read from the installed botocore service model.

Requests are routed by each operation's HTTP method and ``requestUri`` (labels are matched on the raw
path, segment by segment, then percent-decoded, as botocore encodes them), and parsed back into the
parameters the client was given: URI labels, query strings, headers and the JSON body, each member by
its shape (timestamps are epoch seconds, blobs base64). A value of the wrong JSON type is refused
with ``ValidationException`` (reason ``CannotParse``), as the service refuses a body it cannot read.
Responses are serialized by the output shape: timestamps as epoch-second numbers.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import botocore.session
from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StructureShape

from conductor_local.agentcore_memory.errors import CANNOT_PARSE, ServiceError, unknown_operation, validation_error

SERVICE = "bedrock-agentcore"


@functools.cache
def service_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model(SERVICE)


@dataclass(frozen=True)
class Route:
    """One operation's ``method`` and ``requestUri`` path, split into segments (``{label}``,
    ``{label+}`` for a greedy one, or literal text)."""

    operation: OperationModel
    method: str
    segments: tuple[str, ...]

    @property
    def literals(self) -> int:
        return sum(1 for segment in self.segments if not segment.startswith("{"))

    def labels(self, method: str, segments: list[str]) -> dict[str, str] | None:
        """The URI labels when this route takes the request (None: it does not)."""
        if method != self.method:
            return None
        labels: dict[str, str] = {}
        for index, pattern in enumerate(self.segments):
            if pattern.endswith("+}"):
                rest = segments[index:]
                if not rest or not all(rest):
                    return None
                labels[pattern[1:-2]] = unquote("/".join(rest))
                return labels if index == len(self.segments) - 1 else None
            if index >= len(segments):
                return None
            if pattern.startswith("{"):
                if not segments[index]:
                    return None
                labels[pattern[1:-1]] = unquote(segments[index])
            elif segments[index] != pattern:
                return None
        return labels if len(segments) == len(self.segments) else None


@functools.cache
def routes() -> tuple[Route, ...]:
    """Every operation of the service, the most literal paths first (``…/batchCreate`` before
    ``…/{memoryRecordId}``)."""
    model = service_model()
    found = []
    for name in model.operation_names:
        operation = model.operation_model(name)
        path = operation.http["requestUri"].split("?", 1)[0]
        found.append(Route(operation, operation.http["method"], tuple(path.strip("/").split("/"))))
    return tuple(sorted(found, key=lambda route: -route.literals))


def route(method: str, raw_path: str) -> tuple[OperationModel, dict[str, str]]:
    """The operation a request names and its URI labels; ``UnknownOperationException`` for none."""
    segments = raw_path.strip("/").split("/")
    for candidate in routes():
        labels = candidate.labels(method, segments)
        if labels is not None:
            return candidate.operation, labels
    raise unknown_operation(method, raw_path)


# ---- requests: the wire back into parameters --------------------------------------------------


def _cannot_parse(path: str, expected: str) -> ServiceError:
    return validation_error(f"Cannot parse the value at '{path}': expected {expected}", CANNOT_PARSE)


def _from_text(shape: Shape, text: str, path: str) -> Any:
    """A URI label, query string or header value as its shape's type."""
    kind = shape.type_name
    if kind in ("integer", "long"):
        try:
            return int(text)
        except ValueError:
            raise _cannot_parse(path, "an integer") from None
    if kind in ("double", "float"):
        try:
            return float(text)
        except ValueError:
            raise _cannot_parse(path, "a number") from None
    if kind == "boolean":
        if text not in ("true", "false"):
            raise _cannot_parse(path, "true or false")
        return text == "true"
    return text


def from_json(shape: Shape, value: Any, path: str) -> Any:
    """A JSON value as the parameter it encodes (``null`` members are absent)."""
    kind = shape.type_name
    if shape.metadata.get("document"):
        return value
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            raise _cannot_parse(path, "an object")
        params = {}
        for name, member in shape.members.items():
            wire_name = member.serialization.get("name", name)
            if value.get(wire_name) is not None:
                params[name] = from_json(member, value[wire_name], f"{path}.{name}" if path else name)
        return params
    if isinstance(shape, ListShape):
        if not isinstance(value, list):
            raise _cannot_parse(path, "a list")
        return [from_json(shape.member, item, f"{path}.{index}.member") for index, item in enumerate(value, 1)]
    if isinstance(shape, MapShape):
        if not isinstance(value, dict):
            raise _cannot_parse(path, "an object")
        return {key: from_json(shape.value, item, f"{path}.{key}") for key, item in value.items()}
    return _scalar_from_json(kind, value, path)


def _scalar_from_json(kind: str, value: Any, path: str) -> Any:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        if not isinstance(value, str):
            raise _cannot_parse(path, "a string")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _cannot_parse(path, "true or false")
        return value
    if kind in ("integer", "long"):
        if not number or not float(value).is_integer():
            raise _cannot_parse(path, "an integer")
        return int(value)
    if kind in ("double", "float"):
        if not number:
            raise _cannot_parse(path, "a number")
        return float(value)
    if kind == "timestamp":
        if not number or not math.isfinite(value):
            raise _cannot_parse(path, "a timestamp in epoch seconds")
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise _cannot_parse(path, "a timestamp in epoch seconds") from None
    if kind == "blob":
        if not isinstance(value, str):
            raise _cannot_parse(path, "base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _cannot_parse(path, "base64 text") from None
    return value


def parse_request(
    operation: OperationModel,
    labels: Mapping[str, str],
    query: Mapping[str, list[str]],
    headers: Mapping[str, str],
    body: bytes,
) -> dict[str, Any]:
    """The parameters of a request, by the operation's input shape."""
    shape = operation.input_shape
    if shape is None:
        return {}
    document: Any = {}
    if body.strip():
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise validation_error("The request body is not valid JSON", CANNOT_PARSE) from None
        if not isinstance(document, dict):
            raise validation_error("The request body is not a JSON object", CANNOT_PARSE)
    params: dict[str, Any] = {}
    body_members = {}
    for name, member in shape.members.items():
        location = member.serialization.get("location")
        wire_name = member.serialization.get("name", name)
        if location == "uri" and wire_name in labels:
            params[name] = _from_text(member, labels[wire_name], name)
        elif location == "querystring" and wire_name in query:
            values = query[wire_name]
            if isinstance(member, ListShape):
                params[name] = [_from_text(member.member, value, name) for value in values]
            else:
                params[name] = _from_text(member, values[0], name)
        elif location == "header" and wire_name.lower() in headers:
            params[name] = _from_text(member, headers[wire_name.lower()], name)
        elif location is None:
            body_members[name] = member
    for name, member in body_members.items():
        wire_name = member.serialization.get("name", name)
        if document.get(wire_name) is not None:
            params[name] = from_json(member, document[wire_name], name)
    return params


# ---- responses ---------------------------------------------------------------------------------


def to_json(shape: Shape | None, value: Any) -> Any:
    """An output value as rest-json sends it: timestamps as epoch seconds, blobs base64."""
    if value is None or shape is None or shape.metadata.get("document"):
        return value
    if isinstance(shape, StructureShape):
        return {
            member.serialization.get("name", name): to_json(member, value[name])
            for name, member in shape.members.items()
            if value.get(name) is not None
        }
    if isinstance(shape, ListShape):
        return [to_json(shape.member, item) for item in value]
    if isinstance(shape, MapShape):
        return {key: to_json(shape.value, item) for key, item in value.items()}
    if shape.type_name == "timestamp" and isinstance(value, datetime):
        return round(value.timestamp(), 3)
    if shape.type_name == "blob" and isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def serialize_response(operation: OperationModel, output: Mapping[str, Any]) -> tuple[int, bytes]:
    """The status (the operation's ``responseCode``) and JSON body of a success."""
    body = to_json(operation.output_shape, dict(output)) if operation.output_shape is not None else {}
    return int(operation.http.get("responseCode", 200)), json.dumps(body).encode("utf-8")
