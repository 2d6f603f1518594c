"""The sessions API's page cursors: opaque to the app, and only ever ones this API made.

A cursor is ``<payload>.<mac>``, both base64url without padding: the payload is compact JSON (where
the next page starts), the MAC is HMAC-SHA256 with the stage's cursor key over what the cursor is
for (the session list, or one session's transcript), the person it was handed to, and the payload.
So a cursor is refused (:class:`BadCursor`) when it was changed, made up, handed to someone else,
or made for another list; and only after its MAC verifies is its payload read (with the bounded
JSON reader, and checked field by field). Every refusal has the same message, so a refused cursor
tells nothing about why. A new key (a rotated secret) refuses every older cursor: the app starts
from the first page again.

Pure: the key is given (``lambdas.sessions_api`` reads it from Secrets Manager, or from
``CONDUCTOR_CURSOR_KEY`` on the local stack and in tests).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import re
from typing import Any

from shared.wire import bounded_json

CURSOR_MAX_CHARS = 1024  # far above any cursor this API makes (about 200 characters)
MEMORIES_CURSOR_MAX_CHARS = 8192  # the memory's own page token inside (opaque, its length not documented)
MIN_KEY_BYTES = 32
REFUSED = "the cursor is not one this API handed out"
_B64URL = re.compile(r"[A-Za-z0-9_-]+")
_SESSION_PK = re.compile(r"SESSION#[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_DECIMAL = re.compile(r"-?[0-9]{1,12}(\.[0-9]{1,6})?")
_MAC_BYTES = hashlib.sha256().digest_size
_SEQ_MAX = 10**10


class BadCursor(ValueError):
    """A cursor this API did not hand to this person for this list."""

    def __init__(self) -> None:
        super().__init__(REFUSED)


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise BadCursor
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorSeal:
    """Makes and opens cursors with one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the cursor key must be at least {MIN_KEY_BYTES} bytes")
        self._key = key

    def _mac(self, purpose: str, owner: str, payload: bytes) -> bytes:
        message = b"\0".join((b"voiceide-cursor-v1", purpose.encode(), owner.encode(), payload))
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def seal(self, purpose: str, owner: str, plain: dict[str, Any]) -> str:
        payload = json.dumps(plain, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64encode(payload)}.{_b64encode(self._mac(purpose, owner, payload))}"

    def open(self, purpose: str, owner: str, cursor: object, max_chars: int = CURSOR_MAX_CHARS) -> dict[str, Any]:
        """The payload of a cursor this seal made for ``purpose`` and ``owner``; BadCursor otherwise."""
        if not isinstance(cursor, str) or len(cursor) > max_chars or cursor.count(".") != 1:
            raise BadCursor
        payload_text, mac_text = cursor.split(".")
        payload, mac = _b64decode(payload_text), _b64decode(mac_text)
        if len(mac) != _MAC_BYTES or not hmac.compare_digest(mac, self._mac(purpose, owner, payload)):
            raise BadCursor
        try:
            plain = bounded_json.loads(payload, max_depth=1)
        except bounded_json.JsonRefused:
            raise BadCursor from None
        if not isinstance(plain, dict):
            raise BadCursor
        return plain

    # ---- the two lists -------------------------------------------------------------------------

    def list_cursor(self, owner: str, last_key: dict[str, Any]) -> str:
        """The session list's next page after the index key ``last_key`` (DynamoDB's typed form)."""
        plain = {name: last_key[name][kind] for name, kind in (("pk", "S"), ("sk", "S"), ("last_active", "N"))}
        return self.seal("sessions", owner, plain)

    def list_start(self, owner: str, cursor: str) -> dict[str, Any]:
        """The index key (``ExclusiveStartKey``) a session-list cursor of ``owner`` stands for."""
        plain = self.open("sessions", owner, cursor)
        if set(plain) != {"pk", "sk", "last_active"} or not all(isinstance(value, str) for value in plain.values()):
            raise BadCursor
        last_active = plain["last_active"]
        if plain["sk"] != "STATE" or not _SESSION_PK.fullmatch(plain["pk"]) or not _DECIMAL.fullmatch(last_active):
            raise BadCursor
        if not math.isfinite(float(last_active)):
            raise BadCursor
        return {
            "pk": {"S": plain["pk"]},
            "sk": {"S": "STATE"},
            "owner": {"S": owner},
            "last_active": {"N": last_active},
        }

    def memories_cursor(self, owner: str, next_token: str) -> str:
        """The memories list's next page: the memory's own page token, sealed for the person."""
        return self.seal("memories", owner, {"token": next_token})

    def memories_start(self, owner: str, cursor: str) -> str:
        plain = self.open("memories", owner, cursor, max_chars=MEMORIES_CURSOR_MAX_CHARS)
        token = plain.get("token")
        if set(plain) != {"token"} or not isinstance(token, str) or not token:
            raise BadCursor
        return token

    def transcript_cursor(self, owner: str, session_id: str, seq: int, part: int) -> str:
        """A session's transcript from message ``seq``, entry ``part`` on."""
        return self.seal(f"transcript:{session_id}", owner, {"seq": seq, "part": part})

    def transcript_start(self, owner: str, session_id: str, cursor: str) -> tuple[int, int]:
        plain = self.open(f"transcript:{session_id}", owner, cursor)
        if set(plain) != {"seq", "part"}:
            raise BadCursor
        seq, part = plain["seq"], plain["part"]
        if not all(type(value) is int and 0 <= value < _SEQ_MAX for value in (seq, part)):
            raise BadCursor
        return seq, part
