"""A management-API endpoint for handler tests: records every post per connection.

The real ``apigatewaymanagementapi`` client posts here; connections marked gone get 410
``GoneException`` exactly like API Gateway answers for a closed connection.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from shared.wire.protocol import Event, parse_event


class RecordingManagementApi:
    def __init__(self) -> None:
        self.frames: dict[str, list[str]] = defaultdict(list)
        self.gone: set[str] = set()
        self._changed = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                connection_id = unquote(self.path.rsplit("/@connections/", 1)[1])
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if connection_id in api.gone:
                    payload = json.dumps({"message": "Gone"}).encode()
                    self.send_response(410)
                    self.send_header("x-amzn-ErrorType", "GoneException")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                with api._changed:
                    api.frames[connection_id].append(body.decode("utf-8"))
                    api._changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def domain(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RecordingManagementApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def events(self, connection_id: str) -> list[Event]:
        with self._changed:
            frames = list(self.frames[connection_id])
        events = [parse_event(frame) for frame in frames]
        assert all(isinstance(event, Event) for event in events), events
        return events  # type: ignore[return-value]

    def wait_for(self, connection_id: str, predicate: Any, timeout: float = 10.0) -> list[Event]:
        """Block until ``predicate(events)`` holds for the connection's events."""
        with self._changed:
            ok = self._changed.wait_for(
                lambda: predicate([parse_event(frame) for frame in self.frames[connection_id]]), timeout
            )
        assert ok, f"timed out; got {[f for f in self.frames[connection_id]]}"
        return self.events(connection_id)
