"""What the local stack's own servers share (the gateway, Bedrock, the Lambda service): each stands in
for an AWS endpoint on a thread of this process, is started and stopped the same way, and is a
context manager. ``LoopbackHttpServer`` is the ``http.server`` kind (Bedrock, Lambda), answering
what ``loopback_guard`` lets through."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import ClassVar, Self

from conductor_local.loopback_guard import GuardedRequestHandler, LoopbackGuard


class LocalServer(ABC):
    """A local endpoint: ``start`` listens and serves on a thread (and returns the server), ``stop``
    ends it (nothing when it is not started); ``port`` and ``url`` say where it listens once started."""

    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> None: ...

    @property
    @abstractmethod
    def port(self) -> int: ...

    @property
    @abstractmethod
    def url(self) -> str: ...

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class EndpointHttpServer(ThreadingHTTPServer):
    """The ``http.server`` of one local endpoint: a daemon thread per request, the endpoint as ``app``
    (for the request handlers), its ``guard``."""

    daemon_threads = True
    app: LoopbackHttpServer
    guard: LoopbackGuard


class LoopbackHttpServer(LocalServer):
    """A threaded HTTP server on a thread of its own, answering native clients only, by a loopback
    name (``handler_class`` is a ``GuardedRequestHandler``). ``port=0`` picks a free port."""

    handler_class: ClassVar[type[GuardedRequestHandler]]
    server_class: ClassVar[type[EndpointHttpServer]] = EndpointHttpServer
    thread_name: ClassVar[str]

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._httpd: EndpointHttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("the server is already started")
        httpd = self.server_class((self._host, self._port), self.handler_class)
        httpd.app = self
        httpd.guard = LoopbackGuard(bind=self._host)  # native clients only, by a loopback name
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stop_listening()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def _stop_listening(self) -> None:
        """Stop serving and close the listening socket (the serving thread then ends)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
