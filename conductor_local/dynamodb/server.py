"""DynamoDB for the local stack: moto's server, reads served together, each write alone.

moto is not safe under concurrent writes: a ``TransactWriteItems`` that fails restores a
snapshot of the whole table taken when it started, erasing writes other requests committed
meanwhile. DynamoDB itself never does that, and the conductor's concurrent invocations rely
on it, so every write runs alone here (no read or other write beside it). Reads (GetItem,
BatchGetItem, Query, Scan, Describe*) change nothing, so they run together, as DynamoDB serves
them: the two reads ``$default`` makes in parallel overlap here too. The server's other service
(the deadline queue's SQS) has a lock of its own and never waits on, or holds up, the table.
moto's GetItem adds an empty partition to the table for a key it does not hold
(``reads_change_nothing`` answers the same without it), and a Query's partition is passed per
thread, so concurrent reads never see a table change under them. moto also keeps every model
object it ever built; that is dropped after each request.

moto's ``TransactWriteItems`` takes its rollback snapshot once per action, a deep copy of the whole
table each time (all identical, only the last kept): with the conductor committing most decisions
as transactions, that grew with the table and dominated every request (50 sessions at once slowed
to a crawl). Here the snapshot copies only the items the transaction names, once
(``snapshot_touched_items_only``); a rollback restores the same state as before. Likewise a Query
of the table reads only its partition instead of sorting the whole table first
(``query_one_partition``), moto's request routing lists its package directory once, not per
request, and item data is answered as JSON directly rather than by a walk of the output shape
(``serialize_item_data_directly``). ``faster_moto`` applies these when the server starts; the
answers are unchanged.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import moto.backends as moto_backends
import moto.dynamodb.models as moto_dynamodb
from moto.core.base_backend import model_data
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from conductor_local.loopback_guard import LoopbackGuard, guard_wsgi

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


READ_OPERATIONS = frozenset(
    {"GetItem", "BatchGetItem", "Query", "Scan", "DescribeTable", "DescribeTimeToLive", "ListTables"}
)
"""DynamoDB operations that change nothing: served together. Any other request runs alone."""


DYNAMODB_TARGET_PREFIX = "DynamoDB_"
"""How every DynamoDB request's ``X-Amz-Target`` begins (``DynamoDB_20120810.GetItem``)."""


class ReadsTogetherWritesAlone:
    """A readers-writer lock for moto's WSGI app: DynamoDB reads share it, a DynamoDB write holds
    it alone, and a waiting write goes before reads that arrive after it (a stream of reads never
    starves it).

    The other services this server answers (the tool-deadline queue's SQS) are not the table's
    business: they run one at a time under a lock of their own, so the deadline poller's
    ``ReceiveMessage`` every second neither waits for a table read nor, queued as a write,
    holds up the reads that arrive behind it.
    """

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._changed = threading.Condition()
        self._reading = 0
        self._writing = False
        self._writers_waiting = 0
        self._other_services = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        try:
            if not target.startswith(DYNAMODB_TARGET_PREFIX):
                with self._other_services:
                    return list(self._app(environ, start_response))
            reads = target.rpartition(".")[2] in READ_OPERATIONS
            self._enter(reads)
            try:
                return list(self._app(environ, start_response))
            finally:
                self._leave(reads)
        finally:
            _forget_tracked_models()

    def _enter(self, reads: bool) -> None:
        with self._changed:
            if reads:
                self._changed.wait_for(lambda: not self._writing and not self._writers_waiting)
                self._reading += 1
                return
            self._writers_waiting += 1
            self._changed.wait_for(lambda: not self._writing and not self._reading)
            self._writers_waiting -= 1
            self._writing = True

    def _leave(self, reads: bool) -> None:
        with self._changed:
            if reads:
                self._reading -= 1
            else:
                self._writing = False
            self._changed.notify_all()


def _forget_tracked_models() -> None:
    """moto keeps every model object it ever built (for its own introspection), table copies of
    each transaction included: let them go, or a long local session grows without bound."""
    for models in model_data.values():
        for model in models.values():
            model.instances_tracked.clear()


class _TouchedItemsSnapshot:
    """Stands in for ``copy`` in moto's DynamoDB models during one ``TransactWriteItems``.

    moto snapshots a table by deep-copying all of it (once per action) and puts the snapshot back
    when the transaction fails. Only the items the transaction names can change, so the snapshot
    here is the table with a copy of its item index (the same item objects) and deep copies of
    just those items: the same rollback for a cost that no longer grows with every item's size.
    """

    def __init__(self, backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        self._keys: dict[str, list[dict[str, Any]]] = {}
        for action in transact_items:
            ((kind, op),) = action.items()
            table = backend.tables.get(op.get("TableName", ""))
            if table is None:
                continue
            if kind == "Put":
                item = op.get("Item", {})
                key = {name: item[name] for name in (table.hash_key_attr, table.range_key_attr) if name in item}
            else:
                key = op.get("Key", {})
            self._keys.setdefault(table.name, []).append(key)
        self._snapshots: dict[int, Table] = {}

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if not isinstance(value, Table):
            return copy.deepcopy(value, memo)
        if id(value) not in self._snapshots:
            self._snapshots[id(value)] = self._snapshot(value)
        return self._snapshots[id(value)]

    def _snapshot(self, table: Table) -> Table:
        snapshot = copy.copy(table)
        items: defaultdict[Any, Any] = defaultdict(dict)
        for hash_value, stored in table.items.items():
            items[hash_value] = dict(stored) if table.has_range_key else stored
        for key in self._keys.get(table.name, []):
            try:
                hash_value = DynamoType(key[table.hash_key_attr])
                range_value = DynamoType(key[table.range_key_attr]) if table.has_range_key else None
            except (KeyError, TypeError, ValueError):
                continue  # moto refuses the action itself
            if hash_value not in table.items:
                continue
            if range_value is None:
                items[hash_value] = copy.deepcopy(table.items[hash_value])
            elif range_value in table.items[hash_value]:
                items[hash_value][range_value] = copy.deepcopy(table.items[hash_value][range_value])
        snapshot.items = items
        return snapshot


_PATCHED = "_conductor_touched_items_snapshot"


def snapshot_touched_items_only() -> None:
    """Patch moto (in this process) so a transaction's rollback snapshot copies only the items it
    names; idempotent. Safe because the local server runs each write alone; the module
    global is restored after each transaction."""
    if getattr(DynamoDBBackend.transact_write_items, _PATCHED, False):
        return
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        moto_dynamodb.copy = _TouchedItemsSnapshot(backend, transact_items)  # type: ignore[assignment]
        try:
            transact(backend, transact_items)
        finally:
            moto_dynamodb.copy = copy

    setattr(transact_write_items, _PATCHED, True)
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


_QUERY_INDEX_NAME_AT = 7
"""Position of ``index_name`` among ``Table.query``'s arguments after ``self``."""


_query_partition = threading.local()
"""The partition the current thread's Query reads (a table and its items), if any."""


def query_one_partition() -> None:
    """Patch moto (in this process) so a Query of the table itself reads only the queried partition.

    moto gathers the candidates of every base-table Query by sorting ALL the table's items and then
    keeping those of the partition (then sorts them by range key): a cost growing with the whole
    table per query. The candidates here are the partition's items, the same set (moto sorts them
    by range key next, so their order does not matter); index queries run as before. The partition
    is per thread: queries of the same table run at once. Idempotent.
    """
    if getattr(Table.query, _PATCHED, False):
        return
    query = Table.query
    all_items = Table.all_items

    def partition_items(table: Table) -> list[Any]:
        scoped = getattr(_query_partition, "scope", None)
        if scoped is not None and scoped[0] is table:
            return list(scoped[1].values())
        return all_items(table)

    def partition_query(table: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        at = _QUERY_INDEX_NAME_AT - 1
        index_name = kwargs.get("index_name", args[at] if len(args) > at else None)
        if index_name or hash_key is None or not table.has_range_key:
            return query(table, hash_key, *args, **kwargs)
        # .get: a defaultdict must not grow a partition
        _query_partition.scope = (table, table.items.get(hash_key, {}))
        try:
            return query(table, hash_key, *args, **kwargs)
        finally:
            _query_partition.scope = None

    setattr(partition_query, _PATCHED, True)
    Table.all_items = partition_items  # type: ignore[method-assign]
    Table.query = partition_query  # type: ignore[method-assign]


def reads_change_nothing() -> None:
    """Patch moto (in this process) so GetItem of a key the table does not hold answers "no item"
    without adding an empty partition for it (moto's items are a defaultdict): a read that
    changed the table could break a Scan or index Query iterating it at the same time. Idempotent."""
    if getattr(Table.get_item, _PATCHED, False):
        return
    get_item = Table.get_item

    def pure_get_item(table: Table, hash_key: Any, range_key: Any = None, *args: Any, **kwargs: Any) -> Any:
        if range_key and hash_key not in table.items:
            return None
        return get_item(table, hash_key, range_key, *args, **kwargs)

    setattr(pure_get_item, _PATCHED, True)
    Table.get_item = pure_get_item  # type: ignore[method-assign]


def list_moto_modules_once() -> None:
    """moto's server lists its own package directory on every request to route it; the list does not
    change while the process runs, so it is read once."""
    if getattr(moto_backends.list_of_moto_modules, _PATCHED, False):
        return
    modules = tuple(moto_backends.list_of_moto_modules())

    def listed() -> tuple[str, ...]:
        return modules

    setattr(listed, _PATCHED, True)
    moto_backends.list_of_moto_modules = listed  # type: ignore[assignment]


ATTRIBUTE_DATA_OPERATIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "TransactGetItems",
    }
)
"""Operations whose answer is item data (and counts, keys, consumed capacity): nothing in it that
the JSON protocol writes differently from plain JSON, except binary values (base64)."""
_JSON_CONTENT_TYPE = "application/x-amz-json-1.0"


def _shaped(value: Any, shape: Any) -> Any:
    """``value`` with only what the output shape declares (moto's answers carry a few extras),
    down to the attribute values, which are item data as stored (never walked)."""
    if shape is None or shape.name == "AttributeValue":
        return value
    if shape.type_name == "structure" and isinstance(value, dict):
        members = shape.members
        return {
            name: _shaped(item, members[name]) for name, item in value.items() if name in members and item is not None
        }
    if shape.type_name == "list" and isinstance(value, list):
        return [_shaped(item, shape.member) for item in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {name: _shaped(item, shape.value) for name, item in value.items()}
    return value


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not item data")


def serialize_item_data_directly() -> None:
    """Patch moto (in this process) so the answers of ``ATTRIBUTE_DATA_OPERATIONS`` are written as
    JSON directly instead of by walking every attribute value through the output shape: the same
    answer (only the members the shape declares, binary as base64, as the shape walk writes them)
    at a fraction of the cost; an answer holding anything else (a date) goes the shape walk's way.
    Idempotent."""
    execute = DynamoResult.execute_result
    if getattr(execute, _PATCHED, False):
        return

    def execute_result(result: DynamoResult, context: Any) -> Any:
        answer = result.result
        if context.operation_model.name in ATTRIBUTE_DATA_OPERATIONS and isinstance(answer, dict):
            try:
                shaped = _shaped(answer, context.operation_model.output_shape)
                body = json.dumps(shaped, default=_json_value, separators=(",", ":"))
            except TypeError:
                return execute(result, context)
            return 200, {"Content-Type": _JSON_CONTENT_TYPE}, body
        return execute(result, context)

    setattr(execute_result, _PATCHED, True)
    execute_result.shape_walk = execute  # type: ignore[attr-defined]  # moto's own way, to compare with
    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]


def faster_moto() -> None:
    """Every patch above (same answers, less work per request)."""
    snapshot_touched_items_only()
    query_one_partition()
    reads_change_nothing()
    serialize_item_data_directly()
    list_moto_modules_once()


class LocalMotoServer(ThreadedMotoServer):
    """``ThreadedMotoServer`` whose writes run alone, as DynamoDB's atomicity needs, and reads together.

    Only native clients (no ``Origin``) and requests naming it by a loopback ``Host`` are answered
    (``loopback_guard``): moto answers every web page with CORS headers, so without the guard any
    page could read the tables and call the user pool's admin API. ``guard.allow_origins`` lets the
    console's origin sign in (``InitiateAuth``) and nothing else."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = LoopbackGuard(bind=self._ip_address)

    def allow_origins(self, origins: Iterable[str]) -> None:
        """Let these browser origins sign in (the console's; ``LoopbackGuard.allow_origins``)."""
        self.guard.allow_origins(origins)

    def _server_entry(self) -> None:
        faster_moto()
        moto_app = ReadsTogetherWritesAlone(DomainDispatcherApplication(create_backend_app))
        app = guard_wsgi(moto_app, self.guard, lambda: self._server.server_port)
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"
