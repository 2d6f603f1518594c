"""A session's state as its ``STATE`` item stores it: compact JSON, compressed.

Every decision rewrites the ``STATE`` item, and DynamoDB bills a write by the larger of the item's
size before and after it, in 1 KB units (twice that inside a transaction). So the state is written
without the fields at their defaults and compressed (zlib) into one binary attribute ``z``: a
typical state of 1 to 3 KB of JSON fits in one unit. Items written before this encoding (``data``, the
JSON as a string) are still read.

What the item holds as attributes of its own (the session id in its key, ``version``,
``incarnation`` and ``wid``, which the write's condition reads) is not repeated in ``z``: those
are random strings that compression cannot shrink.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from shared.core.state import SessionState

COMPRESSION_LEVEL = 6  # zlib's default: within a few percent of 9 on a state, at half the CPU
KEY_PREFIX = "SESSION#"
# Fields the item holds as attributes of its own, by attribute.
OWN_ATTRIBUTES = {"incarnation": "incarnation", "wid": "write_id"}


def encoded(state: SessionState) -> dict[str, dict[str, Any]]:
    """The state's attribute (without ``version``, which is its own attribute)."""
    compact = state.model_dump_json(exclude={"version", "session_id", *OWN_ATTRIBUTES.values()}, exclude_defaults=True)
    return {"z": {"B": zlib.compress(compact.encode("utf-8"), COMPRESSION_LEVEL)}}


def decoded(item: dict[str, Any]) -> SessionState:
    """The state of a ``STATE`` item, in either encoding, with its version."""
    data = json.loads(zlib.decompress(item["z"]["B"]) if "z" in item else item["data"]["S"])
    data.setdefault("session_id", item["pk"]["S"].removeprefix(KEY_PREFIX))
    for attribute, field in OWN_ATTRIBUTES.items():
        if attribute in item:
            data.setdefault(field, item[attribute]["S"])
    state = SessionState.model_validate(data)
    state.version = int(item["version"]["N"])
    return state
