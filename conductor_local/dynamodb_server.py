"""DynamoDB for the local stack: moto's server, answering one request at a time.

moto is not safe under concurrent requests: a ``TransactWriteItems`` that fails restores a
snapshot of the whole table taken when it started, erasing writes other requests committed
meanwhile. DynamoDB itself never does that, and the conductor's concurrent invocations rely
on it, so requests are serialized here (connections are still accepted concurrently).
moto also keeps every model object it ever built; that is dropped after each request.

moto's ``TransactWriteItems`` takes its rollback snapshot once per action, a deep copy of the whole
table each time (all identical, only the last kept): with the conductor committing most decisions
as transactions, that grows with the table and dominated every request. Here the first copy of a
table is made and handed out again for the transaction's other actions (``one_table_copy_per_transaction``,
applied when the server starts); rollbacks restore the same state as before.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable
from typing import Any

import moto.dynamodb.models as moto_dynamodb
from moto.core.base_backend import model_data
from moto.dynamodb.models import DynamoDBBackend
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


class _OneTableCopy:
    """Stands in for ``copy`` in moto's DynamoDB models during one ``TransactWriteItems``: the first deep
    copy of a table is made and handed out again; anything else is copied as usual."""

    def __init__(self) -> None:
        self._tables: dict[int, Table] = {}

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if not isinstance(value, Table):
            return copy.deepcopy(value, memo)
        if id(value) not in self._tables:
            self._tables[id(value)] = copy.deepcopy(value)
        return self._tables[id(value)]


_PATCHED = "_conductor_one_table_copy"


def one_table_copy_per_transaction() -> None:
    """Patch moto (in this process) so a transaction snapshots each table once; idempotent. Safe because
    the local server runs one request at a time; the module global is restored after each transaction."""
    if getattr(DynamoDBBackend.transact_write_items, _PATCHED, False):
        return
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        moto_dynamodb.copy = _OneTableCopy()  # type: ignore[assignment]
        try:
            transact(backend, transact_items)
        finally:
            moto_dynamodb.copy = copy

    setattr(transact_write_items, _PATCHED, True)
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


class SerializedMotoServer(ThreadedMotoServer):
    """``ThreadedMotoServer`` whose requests run one at a time, as DynamoDB's atomicity needs."""

    def _server_entry(self) -> None:
        one_table_copy_per_transaction()
        app = _OneRequestAtATime(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"
