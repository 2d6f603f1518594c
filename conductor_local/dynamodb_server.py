"""DynamoDB for the local stack: moto's server, answering one request at a time.

moto is not safe under concurrent requests: a ``TransactWriteItems`` that fails restores a
snapshot of the whole table taken when it started, erasing writes other requests committed
meanwhile. DynamoDB itself never does that, and the conductor's concurrent invocations rely
on it, so requests are serialized here (connections are still accepted concurrently).
moto also keeps every model object it ever built; that is dropped after each request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.core.base_backend import model_data
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


class SerializedMotoServer(ThreadedMotoServer):
    """``ThreadedMotoServer`` whose requests run one at a time, as DynamoDB's atomicity needs."""

    def _server_entry(self) -> None:
        app = _OneRequestAtATime(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"
