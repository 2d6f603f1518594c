"""``maxResults`` and ``nextToken`` on the list and search calls.

A page is the next ``maxResults`` items (20 when not given, as the service's default) after the
token's position in the call's order; the token names the last item's sort key (so an item added or
deleted between pages moves nothing) and the request it belongs to: a token given with another
request's filters, or not made here, is refused with ``ValidationException``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from conductor_local.agentcore_memory.errors import validation_error

DEFAULT_MAX_RESULTS = 20
Item = TypeVar("Item")
SortKey = tuple[Any, ...]
_NOT_PAGING = frozenset({"nextToken", "maxResults", "clientToken"})


def request_scope(operation: str, params: Mapping[str, Any]) -> str:
    """What a token is valid for: the operation and the request's parameters but the paging ones."""
    kept = {name: value for name, value in params.items() if name not in _NOT_PAGING}
    text = json.dumps([operation, kept], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _encode(scope: str, key: SortKey) -> str:
    return base64.urlsafe_b64encode(json.dumps({"s": scope, "k": list(key)}).encode("utf-8")).decode("ascii")


def _decode(token: str, scope: str) -> list[Any]:
    try:
        document = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error):
        document = None
    if not isinstance(document, dict) or document.get("s") != scope or not isinstance(document.get("k"), list):
        raise validation_error("Invalid nextToken: it was not issued for this request")
    key: list[Any] = document["k"]
    return key


def page(
    items: Sequence[Item], key: Callable[[Item], SortKey], params: Mapping[str, Any], operation: str
) -> tuple[list[Item], str | None]:
    """The page of ``items`` (sorted by ``key``, ascending) the request asks for, and the next token
    (None after the last page)."""
    scope = request_scope(operation, params)
    ordered = sorted(items, key=key)
    token = params.get("nextToken")
    if token is not None:
        after = _decode(token, scope)
        ordered = [item for item in ordered if list(key(item)) > after]
    size = params.get("maxResults") or DEFAULT_MAX_RESULTS
    chosen = ordered[:size]
    if len(ordered) <= size or not chosen:
        return chosen, None
    return chosen, _encode(scope, key(chosen[-1]))
