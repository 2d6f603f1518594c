"""Posts events to WebSocket connections through the API Gateway management API."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

GONE_REMEMBERED = 4096  # a warm container sees many connections come and go


def callback_endpoint(domain_name: str, stage: str) -> str:
    """The management API endpoint of the API a request came through.

    API Gateway domains never carry a port; a domain with an explicit port is a plain-HTTP
    endpoint on a developer's machine (the local stack).
    """
    host = domain_name.rsplit(":", 1)
    scheme = "http" if len(host) == 2 and host[1].isdigit() else "https"
    return f"{scheme}://{domain_name}/{stage}"


class ConnectionGateway:
    """One management-API client per endpoint; remembers connections that are gone."""

    def __init__(self, client_factory: Callable[[str], Any]) -> None:
        self._client_factory = client_factory
        self._clients: dict[str, Any] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def _client(self, endpoint: str) -> Any:
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = self._clients[endpoint] = self._client_factory(endpoint)
            return client

    def post(self, endpoint: str, connection_id: str, frame: str) -> bool:
        """Deliver one frame; False when the connection is gone or delivery failed."""
        if connection_id in self._gone:
            return False
        try:
            self._client(endpoint).post_to_connection(ConnectionId=connection_id, Data=frame.encode("utf-8"))
        except ClientError as error:
            if error.response["Error"]["Code"] == "GoneException":
                self._remember_gone(connection_id)
            return False
        except BotoCoreError:
            return False
        return True

    def close(self, endpoint: str, connection_id: str) -> bool:
        """Close a connection (API Gateway closes it with code 1000); True when it is closed now
        or was already gone, False when closing failed."""
        try:
            self._client(endpoint).delete_connection(ConnectionId=connection_id)
        except ClientError as error:
            if error.response["Error"]["Code"] != "GoneException":
                return False
        except BotoCoreError:
            return False
        self._remember_gone(connection_id)
        return True

    def _remember_gone(self, connection_id: str) -> None:
        with self._lock:
            self._gone[connection_id] = None
            while len(self._gone) > GONE_REMEMBERED:
                self._gone.popitem(last=False)
