"""A session's state as its ``STATE`` item stores it: compact JSON, compressed.

Every decision rewrites the ``STATE`` item, and DynamoDB bills a write by the larger of the item's
size before and after it, in 1 KB units (twice that inside a transaction). So the state is written
without the fields at their defaults and compressed (zlib) into one binary attribute ``z``: a
typical state of 1 to 3 KB of JSON fits in one unit. Items written before this encoding (``data``, the
JSON as a string) are still read.
"""

from __future__ import annotations

import zlib
from typing import Any

from shared.core.state import SessionState

COMPRESSION_LEVEL = 6  # zlib's default: within a few percent of 9 on a state, at half the CPU


def encoded(state: SessionState) -> dict[str, dict[str, Any]]:
    """The state's attribute (without ``version``, which is its own attribute)."""
    compact = state.model_dump_json(exclude={"version"}, exclude_defaults=True)
    return {"z": {"B": zlib.compress(compact.encode("utf-8"), COMPRESSION_LEVEL)}}


def decoded(item: dict[str, Any]) -> SessionState:
    """The state of a ``STATE`` item, in either encoding, with its version."""
    if "z" in item:
        state = SessionState.model_validate_json(zlib.decompress(item["z"]["B"]))
    else:
        state = SessionState.model_validate_json(item["data"]["S"])
    state.version = int(item["version"]["N"])
    return state
