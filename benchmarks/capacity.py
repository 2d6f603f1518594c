"""DynamoDB item sizes and capacity units, by DynamoDB's published rules.

Item size (Developer Guide, "DynamoDB item sizes and formats", CapacityUnitCalculations.html):
the UTF-8 bytes of each attribute name plus its value: a string its UTF-8 bytes, a number
1 byte per two significant digits + 1, binary its raw bytes, null/boolean 1 byte, a list or
map 3 bytes + its elements + 1 byte per element; sets the sum of their members.

Units (Developer Guide, "DynamoDB read and write operations", read-write-operations.html):
a write is 1 WRU per 1 KB of the larger of the item before and after (a failed condition
still consumes it; a delete the deleted item); a strongly consistent read 1 RRU per 4 KB,
eventually consistent half that; Query sums the sizes of the items returned before
rounding up to 4 KB; transactional reads and writes cost twice (each item rounded first).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

WRITE_UNIT = 1024
READ_UNIT = 4096


def number_size(text: str) -> int:
    digits = text.lstrip("-+").lower().split("e")[0].replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1


def binary_size(body: bytes | str) -> int:
    """A binary value's bytes: on the wire it is base64, in moto's stored items raw bytes."""
    return len(body) if isinstance(body, bytes | bytearray) else len(base64.b64decode(body))


def value_size(value: Mapping[str, Any]) -> int:
    ((kind, body),) = value.items()
    if kind == "S":
        return len(body.encode("utf-8"))
    if kind == "N":
        return number_size(body)
    if kind == "B":
        return binary_size(body)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in body)
    if kind == "NS":
        return sum(number_size(v) for v in body)
    if kind == "BS":
        return sum(binary_size(v) for v in body)
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in body)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in body.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """Bytes of an item in DynamoDB JSON (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(before: int, after: int, *, transactional: bool = False) -> float:
    units = max(1, math.ceil(max(before, after) / WRITE_UNIT))
    return units * (2 if transactional else 1)


def read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / READ_UNIT))
    if transactional:
        return units * 2
    return units if consistent else units / 2
