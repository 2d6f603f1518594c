"""A client of the conductor's sessions API (docs/sessions-api.md), on the standard library alone.

``SessionsApi`` lists, shows, renames, ends and erases the person's sessions over HTTPS (HTTP on the
local stack), sending the same bearer token as the WebSocket handshake when signed in. Every
failure is a ``SessionsApiError`` with the HTTP status, the API's error code and a sentence for a
person. Calls block: run them in a thread from async code.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

SESSIONS_PATH = "/sessions"
SESSIONS_URL_ENV = "VOICEIDE_SESSIONS_URL"
DEFAULT_TIMEOUT_S = 15.0

TokenProvider = Callable[[], str]
"""A valid bearer token, asked for before each request (e.g. ``CognitoSignIn.id_token``)."""


class SessionsApiError(Exception):
    """A request failed: ``status`` (0 when the API was not reached), the error ``code`` and a
    one-line ``message`` for a person."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def sessions_url_for(websocket_url: str) -> str:
    """The sessions API's base URL beside a conductor's WebSocket URL.

    The local stack serves both on one host and port: ``ws://HOST:PORT/…`` → ``http://HOST:PORT/sessions``.
    A deployed stage's HTTP API has a host of its own (``…execute-api…`` WebSocket URLs raise
    ValueError: pass ``--sessions-url`` or ``$VOICEIDE_SESSIONS_URL``, the stage's ``SessionsApiUrl``).
    """
    parts = urlsplit(websocket_url)
    scheme = {"ws": "http", "wss": "https", "http": "http", "https": "https"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise ValueError(f"{websocket_url!r} is not a conductor WebSocket URL")
    if ".execute-api." in (parts.hostname or ""):
        raise ValueError(
            "a deployed stage's sessions API has its own host: pass --sessions-url "
            f"(or ${SESSIONS_URL_ENV}) with the stage's SessionsApiUrl"
        )
    return urlunsplit((scheme, parts.netloc, SESSIONS_PATH, "", ""))


def normalize_sessions_url(url: str) -> str:
    """``url`` as a base URL ending in ``/sessions`` (a bare ``https://host`` gets it added)."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http(s) URL of the sessions API")
    path = parts.path.rstrip("/")
    if not path.endswith(SESSIONS_PATH):
        path += SESSIONS_PATH
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, "", ""))


class SessionsApi:
    """The sessions API at ``base_url`` (``…/sessions``); ``token`` gives the bearer token (None: no sign-in)."""

    def __init__(
        self, base_url: str, token: TokenProvider | None = None, *, timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.base_url = normalize_sessions_url(base_url)
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"SessionsApi({self.base_url!r})"

    # ---- the routes ----------------------------------------------------------------------------

    def list(self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None) -> Any:
        """One page: ``{"sessions": [...], "nextCursor": ...}``, newest activity first."""
        return self._call("GET", "", {"status": status, "limit": limit, "cursor": cursor})

    def list_all(self, *, status: str | None = None, limit: int | None = None) -> Iterator[Any]:
        """Every session, page after page (following ``nextCursor``)."""
        cursor: str | None = None
        while True:
            page = self.list(status=status, limit=limit, cursor=cursor)
            yield from page.get("sessions") or []
            cursor = page.get("nextCursor")
            if not cursor:
                return

    def show(self, session_id: str, *, limit: int | None = None, cursor: str | None = None) -> Any:
        """``{"session": ..., "transcript": [...], "nextCursor": ...}``."""
        return self._call("GET", f"/{quote(session_id, safe='')}", {"limit": limit, "cursor": cursor})

    def transcript(self, session_id: str, *, limit: int | None = None) -> tuple[Any, list[Any]]:
        """The session and its whole transcript (every page), oldest first."""
        page = self.show(session_id, limit=limit)
        session, entries = page["session"], list(page.get("transcript") or [])
        while page.get("nextCursor"):
            page = self.show(session_id, limit=limit, cursor=page["nextCursor"])
            entries += page.get("transcript") or []
        return session, entries

    def rename(self, session_id: str, title: str) -> Any:
        return self._call("PATCH", f"/{quote(session_id, safe='')}", body={"title": title})

    def end(self, session_id: str) -> Any:
        return self._call("POST", f"/{quote(session_id, safe='')}/end")

    def erase(self, session_id: str) -> None:
        self._call("DELETE", f"/{quote(session_id, safe='')}")

    # ---- what the conductor remembers (``/memories``, beside ``/sessions``) -----------------------

    def memories(self, *, limit: int | None = None, cursor: str | None = None) -> Any:
        return self._call("GET", "", {"limit": limit, "cursor": cursor}, base=self.memories_url)

    def forget(self, memory_id: str) -> None:
        self._call("DELETE", f"/{quote(memory_id, safe='')}", base=self.memories_url)

    def forget_all(self) -> int:
        return int(self._call("DELETE", "", base=self.memories_url)["deleted"])

    @property
    def memories_url(self) -> str:
        return self.base_url.removesuffix(SESSIONS_PATH) + "/memories"

    # ---- HTTP ----------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        body: Any = None,
        base: str | None = None,
    ) -> Any:
        params = {name: str(value) for name, value in (query or {}).items() if value is not None}
        url = (base or self.base_url) + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": "application/json", "User-Agent": "voiceide-client"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token()}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise _failure(error.code, error.read()) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            message = f"sessions API not reachable at {self.base_url}: {reason}"
            raise SessionsApiError(0, "unreachable", message) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            message = "the sessions API answered something that is not JSON"
            raise SessionsApiError(200, "bad_response", message) from None


def _failure(status: int, raw: bytes) -> SessionsApiError:
    """The error for an HTTP error answer: the API's ``{"error": {...}}`` or API Gateway's ``{"message": ...}``."""
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    detail = ""
    code = {400: "bad_request", 401: "unauthorized", 404: "not_found"}.get(status, f"http_{status}")
    if isinstance(error, dict):
        code = str(error.get("code") or code)
        detail = str(error.get("message") or "")
    elif isinstance(body, dict) and isinstance(body.get("message"), str):
        detail = body["message"]
    if status == 401:
        message = "not signed in, or the sign-in expired: sign in (--username …) and try again"
    elif status == 404:
        message = "no such session (or not yours)"
    elif status == 400:
        message = f"the sessions API refused the request: {detail or 'bad request'}"
    else:
        message = f"the sessions API answered HTTP {status}" + (f": {detail}" if detail else "")
    return SessionsApiError(status, code, message)
