"""DynamoDB for the local stack: moto's server, answering one request at a time.

moto is not safe under concurrent requests: a ``TransactWriteItems`` that fails restores a
snapshot of the whole table taken when it started, erasing writes other requests committed
meanwhile. DynamoDB itself never does that, and the conductor's concurrent invocations rely
on it, so requests are serialized here (connections are still accepted concurrently).
moto also keeps every model object it ever built; that is dropped after each request.

moto's ``TransactWriteItems`` takes its rollback snapshot once per action, a deep copy of the whole
table each time (all identical, only the last kept): with the conductor committing most decisions
as transactions, that grew with the table and dominated every request (50 sessions at once slowed
to a crawl). Here the snapshot copies only the items the transaction names, once
(``snapshot_touched_items_only``); a rollback restores the same state as before. Likewise a Query
of the table reads only its partition instead of sorting the whole table first
(``query_one_partition``), and moto's request routing lists its package directory once, not per
request. ``faster_moto`` applies all three when the server starts; the answers are unchanged.
"""

from __future__ import annotations

import copy
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
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _OneRequestAtATime:
    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            try:
                return list(self._app(environ, start_response))
            finally:
                _forget_tracked_models()


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
    names; idempotent. Safe because the local server runs one request at a time; the module
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


def query_one_partition() -> None:
    """Patch moto (in this process) so a Query of the table itself reads only the queried partition.

    moto gathers the candidates of every base-table Query by sorting ALL the table's items and then
    keeping those of the partition (then sorts them by range key): a cost growing with the whole
    table per query. The candidates here are the partition's items, the same set (moto sorts them
    by range key next, so their order does not matter); index queries run as before. Idempotent.
    """
    if getattr(Table.query, _PATCHED, False):
        return
    query = Table.query

    def partition_query(table: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        at = _QUERY_INDEX_NAME_AT - 1
        index_name = kwargs.get("index_name", args[at] if len(args) > at else None)
        if index_name or hash_key is None or not table.has_range_key:
            return query(table, hash_key, *args, **kwargs)
        partition = table.items.get(hash_key, {})  # .get: a defaultdict must not grow a partition
        table.all_items = lambda: list(partition.values())  # type: ignore[method-assign]
        try:
            return query(table, hash_key, *args, **kwargs)
        finally:
            del table.all_items

    setattr(partition_query, _PATCHED, True)
    Table.query = partition_query  # type: ignore[method-assign]


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


def faster_moto() -> None:
    """Every patch above (same answers, less work per request)."""
    snapshot_touched_items_only()
    query_one_partition()
    list_moto_modules_once()


class SerializedMotoServer(ThreadedMotoServer):
    """``ThreadedMotoServer`` whose requests run one at a time, as DynamoDB's atomicity needs."""

    def _server_entry(self) -> None:
        faster_moto()
        app = _OneRequestAtATime(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"
