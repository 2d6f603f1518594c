"""How real clients write VoiceIDE events, byte for byte, for the fixtures in ``fixtures/``.

* Swift's ``JSONEncoder`` (swift-foundation ``JSONWriter``): compact, no trailing newline;
  ``"`` ``\\`` escaped, ``/`` escaped as ``\\/`` unless ``.withoutEscapingSlashes``; ``\\b \\f \\n
  \\r \\t`` for those controls and ``\\u00xx`` (lower-case hex) for the other ones below U+0020;
  everything else (DEL, non-ASCII) as raw UTF-8. Object keys come in dictionary order (unordered:
  any order a run happens to produce) or, with ``.sortedKeys``, sorted by their UTF-8 bytes.
  ``.iso8601`` dates are ``2025-01-15T10:30:00Z``; ``UUID`` encodes as ``uuidString`` (upper
  case); nil optionals are left out.
* JavaScript's ``JSON.stringify``: compact, keys in insertion order, ``/`` and non-ASCII as they
  are; ``Date.prototype.toISOString()`` writes milliseconds and ``Z``; ``crypto.randomUUID()``
  lower case; ``undefined`` members are left out.
"""

from __future__ import annotations

from typing import Any

SWIFT_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def swift_string(value: str, *, escape_slashes: bool) -> str:
    out = ['"']
    for char in value:
        if char in SWIFT_SHORT_ESCAPES:
            out.append(SWIFT_SHORT_ESCAPES[char])
        elif char == "/" and escape_slashes:
            out.append("\\/")
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def swift_json(value: Any, *, sorted_keys: bool = False, escape_slashes: bool = True) -> bytes:
    """``JSONEncoder().encode`` of ``value``; without ``sorted_keys`` keys keep the dict's order
    (one of the orders Swift's unordered dictionaries produce)."""

    def write(item: Any) -> str:
        if isinstance(item, dict):
            pairs = sorted(item.items(), key=lambda pair: pair[0].encode()) if sorted_keys else item.items()
            body = ",".join(f"{swift_string(key, escape_slashes=escape_slashes)}:{write(val)}" for key, val in pairs)
            return "{" + body + "}"
        if isinstance(item, str):
            return swift_string(item, escape_slashes=escape_slashes)
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int):
            return str(item)
        raise TypeError(f"no Swift encoding for {type(item).__name__} in these fixtures")

    return write(value).encode("utf-8")


#: fixture directory -> JSONEncoder output formatting
SWIFT_WRITERS: dict[str, dict[str, bool]] = {
    "swift-iso8601": {"sorted_keys": False, "escape_slashes": True},
    "swift-iso8601-sorted-keys": {"sorted_keys": True, "escape_slashes": True},
    "swift-iso8601-without-escaping-slashes": {"sorted_keys": False, "escape_slashes": False},
}
JAVASCRIPT_WRITER = "javascript"
WRITERS = (*SWIFT_WRITERS, JAVASCRIPT_WRITER)
