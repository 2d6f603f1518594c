"""Meters wrapped around the local stack from outside: DynamoDB requests (with their capacity
units), management API posts to the connections, and the model's streams."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks.capacity import item_size, read_units, write_units
from shared.adapters.session_records import SESSIONS_INDEX_PROJECTED

KEY_NAMES = ("pk", "sk")
INDEX_KEYS = ("owner", "last_active")
"""The sessions index's keys (``infra/stack.py``; ``shared.adapters.session_records``)."""
INDEX_ENTRY_OVERHEAD = 100
"""Bytes DynamoDB adds to each index entry (the developer guide's figure for index storage)."""


@dataclass
class DynamoRequest:
    operation: str
    started: float
    """perf_counter when the server got the request (before waiting for its turn)."""
    ended: float
    wru: float = 0.0
    rru: float = 0.0
    index_wru: float = 0.0
    """Write units the sessions index took for this request (``index_write_units``)."""


class DynamoMeter:
    """Wraps the stack's moto server: every request's operation, start and end, and its WRU/RRU
    (writes from the item sizes before and after, looked up in moto; reads from the items
    answered). The outer layer times the request, the inner one (under the server's lock) sizes it;
    ``sizing=False`` leaves the units out (and the work of finding them, for load runs).

    ``client`` (the conductor's own DynamoDB client): its ROUND TRIPS too, from each call to its
    answer as the calling code waits for it. Requests a handler issues together overlap there even
    when this one-process stack gets to the second only after the first (one Python thread runs
    at a time): deployed, each is a network round trip and they overlap."""

    def __init__(self, stack: Any, *, sizing: bool = True, client: Any = None, launcher: Any = None) -> None:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        server = stack._moto._server
        outer = server.app  # ReadsTogetherWritesAlone, perhaps behind the loopback guard
        serialized = _serialized_layer(outer)
        self._backend = lambda: dynamodb_backends[DEFAULT_ACCOUNT_ID][stack.region]
        self.requests: list[DynamoRequest] = []
        self._units = threading.local()
        self._lock = threading.Lock()
        inner = serialized._app
        if sizing:
            serialized._app = lambda environ, start_response: self._sized(inner, environ, start_response)
        server.app = lambda environ, start_response: self._timed(outer, environ, start_response)
        self.round_trips: list[DynamoRequest] = []
        # The turn runner's launches (Lambda Invoke), as ``$default``'s client issues and gets them:
        # a DynamoDB round trip in flight alongside one is not on the path to the model.
        self.invokes: list[tuple[float, float]] = []
        if launcher is not None:
            launcher.meta.events.register("before-call.lambda.Invoke", self._invoke_issued, unique_id="bench-invoke")
            for answered in ("after-call.lambda.Invoke", "after-call-error.lambda.Invoke"):
                launcher.meta.events.register(answered, self._invoke_answered, unique_id=f"bench-{answered}")
        if client is not None:
            client.meta.events.register("before-call.dynamodb", self._issued, unique_id="bench-round-trip-issued")
            for answered in ("after-call.dynamodb", "after-call-error.dynamodb"):
                client.meta.events.register(answered, self._answered, unique_id=f"bench-{answered}")

    def _invoke_issued(self, context: dict[str, Any], **_: Any) -> None:
        context["bench_invoke"] = time.perf_counter()

    def _invoke_answered(self, context: dict[str, Any], **_: Any) -> None:
        issued = context.pop("bench_invoke", None)
        if issued is not None:
            with self._lock:
                self.invokes.append((issued, time.perf_counter()))

    def _issued(self, context: dict[str, Any], model: Any = None, **_: Any) -> None:
        context["bench_issued"] = (getattr(model, "name", "?"), time.perf_counter())

    def _answered(self, context: dict[str, Any], **_: Any) -> None:
        issued = context.pop("bench_issued", None)
        if issued is None:
            return
        operation, at = issued
        with self._lock:
            self.round_trips.append(DynamoRequest(operation, at, time.perf_counter()))

    def _timed(self, app: Callable[..., Iterable[bytes]], environ: dict[str, Any], start: Callable[..., Any]) -> Any:
        began = time.perf_counter()
        self._units.value = (0.0, 0.0, 0.0)
        body = list(app(environ, start))
        wru, rru, index_wru = self._units.value
        service, _, operation = str(environ.get("HTTP_X_AMZ_TARGET", "?")).rpartition(".")
        if not service.startswith("DynamoDB"):  # the tool-deadline queue shares the moto server
            return body
        with self._lock:
            self.requests.append(DynamoRequest(operation, began, time.perf_counter(), wru, rru, index_wru))
        return body

    def _sized(self, app: Callable[..., Iterable[bytes]], environ: dict[str, Any], start: Callable[..., Any]) -> Any:
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(raw)
        operation = str(environ.get("HTTP_X_AMZ_TARGET", "?")).rpartition(".")[2]
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            request = {}
        writes = self._write_targets(operation, request)
        before = [self._item_of(table, key) for table, key, _ in writes]
        body = list(app(environ, start))
        after = [self._item_of(table, key) for table, key, _ in writes]
        wru = sum(
            write_units(item_size(old), item_size(new), transactional=tx)
            for (_table, _key, tx), old, new in zip(writes, before, after, strict=True)
        )
        index_wru = sum(index_write_units(old, new) for old, new in zip(before, after, strict=True))
        rru = self._read_units(operation, request, b"".join(body))
        self._units.value = (wru, rru, index_wru)
        return body

    @staticmethod
    def _write_targets(operation: str, request: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
        if operation == "PutItem":
            return [(request["TableName"], _key_of(request.get("Item", {})), False)]
        if operation in ("UpdateItem", "DeleteItem"):
            return [(request["TableName"], request.get("Key", {}), False)]
        if operation == "TransactWriteItems":
            targets = []
            for action in request.get("TransactItems", []):
                ((kind, op),) = action.items()
                key = _key_of(op["Item"]) if kind == "Put" else op.get("Key", {})
                targets.append((op["TableName"], key, True))
            return targets
        return []

    def _item_of(self, table_name: str, key: dict[str, Any]) -> dict[str, Any] | None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        try:
            table = self._backend().get_table(table_name)
            item = table.get_item(DynamoType(key["pk"]), DynamoType(key["sk"]) if "sk" in key else None)
        except Exception:
            return None
        return None if item is None else dict(item.to_json()["Attributes"])

    @staticmethod
    def _read_units(operation: str, request: dict[str, Any], body: bytes) -> float:
        if operation not in ("GetItem", "Query", "TransactGetItems", "BatchGetItem"):
            return 0.0
        try:
            answer = json.loads(body or b"{}")
        except ValueError:
            return 0.0
        consistent = bool(request.get("ConsistentRead"))
        if operation == "GetItem":
            return read_units(item_size(answer.get("Item")), consistent=consistent)
        if operation == "Query":
            return read_units(sum(item_size(i) for i in answer.get("Items", [])), consistent=consistent)
        if operation == "TransactGetItems":
            return sum(
                read_units(item_size(r.get("Item")), consistent=True, transactional=True)
                for r in answer.get("Responses", [])
            )
        total = 0.0
        for table, items in answer.get("Responses", {}).items():
            keys = request.get("RequestItems", {}).get(table, {})
            total += sum(read_units(item_size(i), consistent=bool(keys.get("ConsistentRead"))) for i in items)
        return total

    def since(self, mark: int) -> list[DynamoRequest]:
        with self._lock:
            return list(self.requests[mark:])

    def round_trips_since(self, mark: int) -> list[DynamoRequest]:
        with self._lock:
            return list(self.round_trips[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.requests)

    def round_trip_mark(self) -> int:
        with self._lock:
            return len(self.round_trips)


def _serialized_layer(app: Any) -> Any:
    """The moto server's ``ReadsTogetherWritesAlone`` layer (it wraps moto's app as ``_app``): the
    server's app itself, or the app a wrapper in front of it (the loopback guard) closes over."""
    if hasattr(app, "_app"):
        return app
    for cell in getattr(app, "__closure__", None) or ():
        inner = cell.cell_contents
        if hasattr(inner, "_app"):
            return inner
    raise TypeError(f"no ReadsTogetherWritesAlone layer found in the DynamoDB server's app {app!r}")


def index_entry(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sessions index's entry of a table item (its keys, the table's and the projected
    attributes), or None when the sparse index leaves the item out."""
    if item is None or any(name not in item for name in INDEX_KEYS):
        return None
    names = (*KEY_NAMES, *INDEX_KEYS, *SESSIONS_INDEX_PROJECTED)
    return {name: item[name] for name in names if name in item}


def index_write_units(before: dict[str, Any] | None, after: dict[str, Any] | None) -> float:
    """What a table write costs the sessions index, by DynamoDB's rules for a global secondary
    index: nothing when the item is in the index neither before nor after, or its entry is
    unchanged; one write to put or to delete an entry; two when an index key changes (a delete and
    a put); one when only projected attributes change. A write is 1 WRU per 1 KB of the entry
    (the entry's size counted as its attributes plus ``INDEX_ENTRY_OVERHEAD`` bytes)."""
    old, new = index_entry(before), index_entry(after)
    if old == new:
        return 0.0

    def units(entry: dict[str, Any]) -> float:
        return write_units(0, item_size(entry) + INDEX_ENTRY_OVERHEAD)

    if old is None or new is None:
        return units(new if new is not None else old)  # type: ignore[arg-type]
    if any(old.get(name) != new.get(name) for name in INDEX_KEYS):
        return units(old) + units(new)
    return units(new)


def _key_of(item: dict[str, Any]) -> dict[str, Any]:
    return {name: item[name] for name in KEY_NAMES if name in item}


@dataclass
class Post:
    at: float
    size: int
    kind: str
    """The event's kind (``toolCall:<name>`` for a tool call), from the posted body."""


class PostMeter:
    """Counts the management API's POSTs to connections (bytes and when), by wrapping the local
    gateway's handler of management requests."""

    def __init__(self, gateway: Any) -> None:
        self.posts: list[Post] = []
        self._lock = threading.Lock()
        manage = gateway._manage

        async def counted(request: Any) -> bytes:
            answer = await manage(request)
            if request.method == "POST":
                self._record(request.body)
            return answer

        gateway._manage = counted

    def _record(self, body: bytes) -> None:
        try:
            ((kind, payload),) = json.loads(body)["kind"].items()
            if isinstance(payload, dict) and payload.get("name"):
                kind += ":" + str(payload["name"])
        except (ValueError, KeyError, TypeError, AttributeError):
            kind = "?"
        with self._lock:
            self.posts.append(Post(time.perf_counter(), len(body), kind))

    def since(self, mark: int) -> list[Post]:
        with self._lock:
            return list(self.posts[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.posts)


@dataclass
class ModelStream:
    """One ConverseStream answered by the local Bedrock endpoint."""

    requested: float
    first_delta: float | None = None
    first_text: float | None = None
    last_delta: float | None = None
    ended: float | None = None
    output_chars: int = 0
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    prefix_tokens: int = 0
    """Input tokens before the newest message (what a prompt cache could serve)."""
    tool_uses: int = 0
    tool_chars: int = 0
    """Characters of tool input JSON streamed."""
    reasoning_chars: int = 0


class ModelMeter:
    """Times every stream of the local Bedrock endpoint (request, first delta, end) and keeps its
    usage figures, by wrapping the method of the endpoint's request handler that sends a script.
    ``watch_sends(client)``: also when the conductor's Bedrock client sends each ConverseStream."""

    def __init__(self) -> None:
        from conductor_local.bedrock.server import _Handler

        self.sends: list[float] = []
        self.streams: list[ModelStream] = []
        self.prefix_of: Callable[[], int] | None = None
        """Called in the handler thread as a stream starts: its ``prefix_tokens``."""
        self._lock = threading.Lock()
        original = _Handler._stream
        meter = self

        def observed(handler: Any, script: Any) -> None:
            original(handler, meter._observe(script))

        _Handler._stream = observed  # type: ignore[method-assign]
        self._restore = lambda: setattr(_Handler, "_stream", original)

    def close(self) -> None:
        self._restore()

    def watch_sends(self, client: Any) -> None:
        def sent(**_: Any) -> None:
            with self._lock:
                self.sends.append(time.perf_counter())

        client.meta.events.register("before-send.bedrock-runtime.ConverseStream", sent, unique_id="bench-model-send")

    def sends_since(self, since: float) -> list[float]:
        with self._lock:
            return [at for at in self.sends if at >= since]

    def _observe(self, steps: Iterable[Any]) -> Iterator[Any]:
        stream = ModelStream(time.perf_counter(), prefix_tokens=self.prefix_of() if self.prefix_of else 0)
        with self._lock:
            self.streams.append(stream)
        for step in steps:
            if isinstance(step, dict):
                if "toolUse" in (step.get("contentBlockStart") or {}).get("start", {}):
                    stream.tool_uses += 1
                delta = step.get("contentBlockDelta")
                if delta is not None:
                    stream.last_delta = time.perf_counter()
                    if stream.first_delta is None:
                        stream.first_delta = stream.last_delta
                    body = delta["delta"]
                    if "text" in body:
                        stream.first_text = stream.first_text or time.perf_counter()
                        stream.text += body["text"]
                    stream.output_chars += len(body.get("text") or body.get("toolUse", {}).get("input", ""))
                    stream.tool_chars += len(body.get("toolUse", {}).get("input", ""))
                    stream.reasoning_chars += len(body.get("reasoningContent", {}).get("text", ""))
                if "metadata" in step:
                    stream.usage = dict(step["metadata"].get("usage", {}))
            yield step
        stream.ended = time.perf_counter()

    def since(self, mark: int) -> list[ModelStream]:
        with self._lock:
            return list(self.streams[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.streams)
