"""Who may talk to the local stack's loopback endpoints: native clients, the console, no web page.

Every endpoint the local stack opens (the gateway's WebSocket and HTTP side, the moto server with
DynamoDB, SQS and the user pool, the Lambda and Bedrock endpoints) listens on loopback, and any web
page open in the developer's browser can send requests there. Two checks keep pages out:

* ``Host``: a page whose own name was re-bound to 127.0.0.1 (DNS rebinding) reaches the port
  as a same-origin page, without any ``Origin`` on a GET, but its requests still name its own host.
  Only the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``) with the endpoint's port are
  answered, the listening address too when it is a specific one, and any IP address when the
  endpoint listens on all of them (``0.0.0.0``: a phone on the LAN; a rebound name is never an
  address). Anything else is refused with 403.
* ``Origin``: browsers send it on every cross-origin request (and every WebSocket handshake);
  native clients (boto3, the iOS app, the client stub) send none. A request without it passes; one
  from an allowed origin (the console's own, ``--allow-origin``) passes where browsers have
  business; any other is refused with 403, CORS preflights included, and a refusal never carries an
  ``Access-Control-Allow-*`` header, so the page cannot read it either.

``LoopbackGuard`` decides; ``guard_wsgi`` wraps a WSGI app (moto's server) with it, and
``GuardedRequestHandler`` is a ``BaseHTTPRequestHandler`` that checks before any ``do_*`` runs.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from shared.wire.log_safety import safe_text

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
ANY_ORIGIN = "*"
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
FORBIDDEN = "Forbidden"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def host_name(host: str) -> str:
    """A listening address as it appears in a ``Host`` header (IPv6 in brackets), lower case."""
    host = host.strip().lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``Host``'s name and port (None: no port), or None when it is malformed."""
    value = value.strip().lower()
    if not value or any(c in value for c in " \t/\\@?#"):
        return None
    if value.startswith("["):
        name, bracket, rest = value.partition("]")
        if not bracket:
            return None
        name += "]"
        if not rest:
            return name, None
        if not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        name, colon, port_text = value.partition(":")
        if not colon:
            return name, None
    if not port_text.isdigit() or len(port_text) > 5:
        return None
    return name, int(port_text)


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass
class LoopbackGuard:
    """The ``Host`` and ``Origin`` rules of one endpoint.

    ``bind``: the address it listens on (its specific address is answered besides the loopback
    names; a wildcard bind answers any IP address). ``origins``: the browser origins allowed
    (normalized ``scheme://host[:port]``; ``*``: any); empty: no browser at all. ``origins`` may
    be replaced while the endpoint runs (the console's origin is known once the gateway listens).
    """

    bind: str = "127.0.0.1"
    origins: frozenset[str] = frozenset()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def allow_origins(self, origins: Iterable[str]) -> None:
        with self._lock:
            self.origins = frozenset(origin.strip().lower().rstrip("/") for origin in origins)

    def host_refusal(self, host: str | None, port: int) -> str | None:
        """Why a request with this ``Host`` is refused (None: it is not)."""
        if host is None:
            return "no Host"
        parts = _split_host(host)
        if parts is None:
            return f"Host {safe_text(host, 80)!r} is malformed"
        name, given_port = parts
        if (given_port if given_port is not None else 80) != port:
            return f"Host {safe_text(host, 80)!r} names another port"
        bind = host_name(self.bind)
        if name in LOOPBACK_NAMES or (self.bind not in WILDCARD_BINDS and name == bind):
            return None
        if self.bind in WILDCARD_BINDS and _is_ip_literal(name):
            return None
        return f"Host {safe_text(host, 80)!r} is not this machine's loopback name"

    def origin_refusal(self, origins: Sequence[str]) -> str | None:
        """Why a request with these ``Origin`` headers is refused (None: native, or allowed)."""
        if not origins:
            return None
        if len(origins) > 1:
            return "more than one Origin"
        origin = origins[0].strip().lower().rstrip("/")
        with self._lock:
            allowed = self.origins
        if ANY_ORIGIN in allowed or origin in allowed:
            return None
        return f"origin {safe_text(origins[0], 80)!r} is not allowed"

    def refusal(self, host: str | None, origins: Sequence[str], port: int) -> str | None:
        return self.host_refusal(host, port) or self.origin_refusal(origins)


# ---- WSGI (moto's server) -------------------------------------------------------------------------

BROWSER_TARGETS = frozenset(
    f"AWSCognitoIdentityProviderService.{operation}"
    for operation in ("InitiateAuth", "RespondToAuthChallenge", "GetUser", "GlobalSignOut", "RevokeToken")
)
"""What an allowed browser origin may ask the moto server: a public app client's sign-in (the
console signs in with ``InitiateAuth``). Never DynamoDB, SQS or the user pool's admin API."""


def _forbidden_wsgi(start_response: Callable[..., Any], reason: str) -> list[bytes]:
    body = json.dumps({"__type": "AccessDeniedException", "message": f"{FORBIDDEN}: {reason}"}).encode()
    start_response(
        "403 Forbidden",
        [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body))), ("Vary", "Origin")],
    )
    return [body]


def guard_wsgi(app: WsgiApp, guard: LoopbackGuard, port: Callable[[], int]) -> WsgiApp:
    """``app`` answering only requests ``guard`` lets through; a browser origin it allows may only
    send CORS preflights and ``BROWSER_TARGETS``, and hears its own origin in
    ``Access-Control-Allow-Origin`` (never ``*``)."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        origin = environ.get("HTTP_ORIGIN")
        origins = [origin] if origin is not None else []
        reason = guard.refusal(environ.get("HTTP_HOST"), origins, port())
        if reason is None and origin is not None:
            method = environ.get("REQUEST_METHOD", "")
            target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
            if method != "OPTIONS" and not (method == "POST" and target in BROWSER_TARGETS):
                reason = f"browsers may not call {safe_text(target or method, 80)}"
        if reason is not None:
            return _forbidden_wsgi(start_response, reason)
        if origin is None:
            return app(environ, start_response)

        def with_own_origin(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [
                (name, value) for name, value in headers if name.lower() not in ("access-control-allow-origin", "vary")
            ]
            kept += [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]
            return start_response(status, kept, *exc_info)

        return app(environ, with_own_origin)

    return guarded


# ---- http.server (the Lambda and Bedrock endpoints) --------------------------------------------------


class GuardedRequestHandler(BaseHTTPRequestHandler):
    """A request handler refusing, before any ``do_*`` runs, what its server's ``guard`` refuses
    (the server's ``guard`` attribute; a ``LoopbackGuard`` allowing no browser origin by default)."""

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        guard: LoopbackGuard = getattr(self.server, "guard", None) or _NATIVE_ONLY
        port = int(self.server.server_address[1])
        reason = guard.refusal(self.headers.get("Host"), self.headers.get_all("Origin") or [], port)
        if reason is None:
            return True
        body = json.dumps({"message": f"{FORBIDDEN}: {reason}"}).encode()
        self.close_connection = True  # its body (if any) is never read
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.send_header("Vary", "Origin")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return False


_NATIVE_ONLY = LoopbackGuard()
