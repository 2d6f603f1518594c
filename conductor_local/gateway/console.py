"""The browser side of the local API Gateway: the voice console's static files over plain HTTP GET,
and the ``Origin`` check of WebSocket handshakes.

A browser sends ``Origin`` on every WebSocket handshake; a native app sends none. So a handshake
without ``Origin`` is let through (the iOS app, the client stub), one from the console's own origin
too (the gateway's ``http://HOST:PORT``, spelled with any loopback name), and any other is refused
with 403 before ``$connect`` runs, unless it was allowed (``--allow-origin``). Otherwise any web
page open in the developer's browser could drive the local conductor, including one that runs on
the developer's AWS credentials (``--bedrock``). The allowed origins are a fixed list, never the
request's own ``Host``: a page whose name was re-bound to 127.0.0.1 (DNS rebinding) keeps its own
origin and is refused.
"""

from __future__ import annotations

import email.utils
import http
import json
import mimetypes
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

CONSOLE_DIR = Path(__file__).resolve().parents[1] / "console"
"""The console's files, shipped in the package (no build step, nothing from a CDN)."""
CONSOLE_PATH = "/console"
ANY_ORIGIN = "*"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".png": "image/png"}


def normalize_origin(origin: str) -> str:
    """An origin as browsers send it: ``scheme://host[:port]``, lower case, no path or slash;
    ``*`` and ``null`` as they are. Raises ValueError for anything else."""
    origin = origin.strip()
    if origin in (ANY_ORIGIN, "null"):
        return origin
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(f"not an origin (scheme://host[:port]): {origin!r}")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"not an origin (scheme://host[:port]): {origin!r}")
    return f"{parts.scheme}://{parts.netloc}".lower()


def own_origins(host: str, port: int) -> frozenset[str]:
    """The origins the console has when served by this gateway: every loopback spelling, and the
    listening address itself when it is a specific one."""
    names = set(LOOPBACK_NAMES)
    if host not in ("", "0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    return frozenset(f"http://{name}:{port}".lower() for name in names)


def origin_allowed(request: Request, allowed: frozenset[str]) -> tuple[bool, str | None]:
    """Whether a handshake may go on, and the origin it came from (None: no ``Origin``, a native app)."""
    origins = request.headers.get_all("Origin")
    if not origins:
        return True, None
    origin = origins[-1].strip().lower().rstrip("/")
    return (len(origins) == 1 and (ANY_ORIGIN in allowed or origin in allowed)), origins[-1]


def is_websocket_handshake(request: Request) -> bool:
    upgrade = ",".join(request.headers.get_all("Upgrade")).lower()
    return "websocket" in upgrade


def http_response(status: int, body: bytes, content_type: str, extra: Iterable[tuple[str, str]] = ()) -> Response:
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-cache"),
            ("X-Content-Type-Options", "nosniff"),
            *extra,
        ]
    )
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return Response(status, phrase, headers, body)


def _text(status: int, message: str) -> Response:
    return http_response(status, f"{message}\n".encode(), "text/plain; charset=utf-8")


def console_response(request: Request, console_dir: Path, config: Mapping[str, Any]) -> Response:
    """The answer to a plain HTTP request (not a WebSocket handshake): the console's files under
    ``/console/``, its settings as ``/console/config.json``, ``/`` sends the browser to the console;
    anything else is 404 (405 for methods other than GET)."""
    path = urlsplit(request.path).path
    if path in ("/", CONSOLE_PATH):
        query = urlsplit(request.path).query
        return http_response(
            302, b"", "text/plain", [("Location", f"{CONSOLE_PATH}/" + (f"?{query}" if query else ""))]
        )
    if not path.startswith(f"{CONSOLE_PATH}/"):
        return _text(404, "Not Found")
    name = path[len(CONSOLE_PATH) + 1 :] or "index.html"
    if name == "config.json":
        body = json.dumps(dict(config)).encode()
        return http_response(200, body, "application/json")
    root = console_dir.resolve()
    file = (root / name).resolve()
    if not file.is_relative_to(root) or not file.is_file() or name.startswith("."):
        return _text(404, "Not Found")
    content_type = _TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    if content_type.startswith("text/"):
        content_type += "; charset=utf-8"
    csp = (
        "default-src 'self'; connect-src 'self' ws: wss: http: https:; img-src 'self' data:; "
        "style-src 'self'; script-src 'self'; frame-ancestors 'none'"
    )
    return http_response(200, file.read_bytes(), content_type, [("Content-Security-Policy", csp)])
