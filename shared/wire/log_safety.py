"""Client input in a log line: bounded, escaped, secrets redacted, never an exception.

Anything a client sends (a frame, a URL, a header, a parsed JSON value) is rendered for a log line by
``safe_text`` (text and bytes) or ``safe_value`` (any value). Both:

* never raise, whatever the input (deep nesting, lone surrogates, huge numbers, odd objects);
* are bounded: at most ``limit`` bytes of UTF-8, read from a bounded prefix of the input, so the
  cost does not grow with the input either;
* never recurse: a structure is walked with an explicit stack and a character budget, never with
  ``repr``, ``str`` or ``json.dumps`` (each of which recurses and raises past Python's recursion limit);
* escape what a log line cannot carry: control characters (a forged new log line) and lone surrogates
  (text that cannot be written as UTF-8) are shown as their escapes (``\\x0a``, ``\\ud83d``);
* redact secrets: the value of a ``token=``/``password=``/``secret=``/``signature=``/``Authorization:``
  parameter or header, of a JSON member with such a name, a ``Bearer`` credential and anything shaped
  like a JWT become ``***``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

DEFAULT_LIMIT = 200
"""Bytes of UTF-8 a rendered value takes at most, by default."""
REDACTED = "***"
ELLIPSIS = "…"
_WINDOW_FACTOR = 4
_MIN_WINDOW = 8192
"""Characters of input read at least (four times ``limit`` when more): room for redactions that shorten
it, a URL with a whole token in its query among them."""

_SECRET_WORD = r"(?:token|password|passwd|pwd|secret|signature|credential|authorization|api[_-]?key|cookie)"
_SECRET_NAMES = re.compile(_SECRET_WORD, re.IGNORECASE)
"""A member whose name holds one of these words is a secret (searched in the name's first 256 characters)."""
# Every repetition below is bounded or possessive, so a long run of word characters (or of the
# words themselves) costs linear time: the input is client-controlled.
_NAMED_SECRET = re.compile(
    # a secret's name (``id_token``, ``X-Amz-Security-Token``: the part from the word on), an
    # optional closing quote, ``=`` or ``:``, an optional opening quote, then the value
    rf"(?P<name>{_SECRET_WORD}[\w-]{{0,32}})(?P<sep>\\?[\"']?\s{{0,8}}[=:]\s{{0,8}}\\?[\"']?)"
    r"(?P<value>(?:Bearer\s{1,8}|Basic\s{1,8}|AWS4-HMAC-SHA256\s{1,8})?[^\s&\"',;<>\\]++)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic)\s{1,8}[^\s&\"',;<>\\]++", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[\w-]{2,}+\.[\w-]*+(?:\.[\w-]*+)?")
_MAX_INT_BITS = 64 * 1024
"""Larger ints are shown by size only: turning them into digits costs too much (or raises)."""


def redact(text: str) -> str:
    """``text`` with every recognisable secret replaced by ``***`` (see the module's notes)."""
    text = _NAMED_SECRET.sub(lambda match: f"{match['name']}{match['sep']}{REDACTED}", text)
    text = _BEARER.sub(lambda match: f"{match['scheme']} {REDACTED}", text)
    return _JWT.sub(REDACTED, text)


def _escape(text: str) -> str:
    """Control characters and lone surrogates as escapes; everything else as it is."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code < 0xE000 or code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def _fit(text: str, limit: int, cut: bool) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, ending with ``…`` when something was left out."""
    data = text.encode("utf-8")
    if len(data) <= limit and not cut:
        return text
    room = max(0, limit - len(ELLIPSIS.encode("utf-8")))
    if room == 0:
        return ""
    return data[:room].decode("utf-8", "ignore") + ELLIPSIS


def safe_text(value: str | bytes | bytearray | memoryview, limit: int = DEFAULT_LIMIT) -> str:
    """Text (or bytes, read as UTF-8) as a log line may show it: redacted, escaped, at most
    ``limit`` bytes of UTF-8. Never raises."""
    try:
        limit = max(0, int(limit))
        window = max(limit * _WINDOW_FACTOR, _MIN_WINDOW)
        if isinstance(value, bytes | bytearray | memoryview):
            raw = bytes(value[: window * 4])
            cut = len(value) > len(raw)
            text = raw.decode("utf-8", "backslashreplace")
        elif isinstance(value, str):
            text = value[:window]
            cut = len(value) > window
        else:
            return safe_value(value, limit)
        return _fit(_escape(redact(text)), limit, cut)
    except Exception:  # a log line is never worth an exception
        return f"<unprintable {_type_name(value)}>"[:limit]


def safe_value(value: Any, limit: int = DEFAULT_LIMIT) -> str:
    """Any value (a parsed JSON document, a header list, an exception…) as a log line may show it:
    JSON-like, walked without recursion, members named like secrets redacted, at most ``limit``
    bytes. Never raises."""
    try:
        if isinstance(value, str | bytes | bytearray | memoryview):
            return safe_text(value, limit)
        limit = max(0, int(limit))
        rendered, cut = _render(value, max(limit * _WINDOW_FACTOR, _MIN_WINDOW))
        return _fit(_escape(redact(rendered)), limit, cut)
    except Exception:
        return f"<unprintable {_type_name(value)}>"[: max(0, limit)]


def _type_name(value: Any) -> str:
    try:
        return type(value).__name__
    except Exception:
        return "value"


def _scalar(value: Any) -> str:
    """A scalar's text, bounded in cost; any other object by its type only (its ``repr`` could do anything)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_BITS:
            return f"<int of {value.bit_length()} bits>"
        try:
            return int.__repr__(value)
        except ValueError:  # past Python's digit limit
            return f"<int of {value.bit_length()} bits>"
    if isinstance(value, float):
        return float.__repr__(value)
    if isinstance(value, str):
        return '"' + value[:4096].replace("\\", "\\\\").replace('"', '\\"') + ('…"' if len(value) > 4096 else '"')
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, BaseException):
        return f"<{_type_name(value)}>"
    return f"<{_type_name(value)}>"


def _render(value: Any, budget: int) -> tuple[str, bool]:
    """A JSON-like rendering of ``value`` of at most about ``budget`` characters, and whether it was cut.

    An explicit stack of iterators instead of recursion: depth costs memory in the stack, never a
    Python frame, and the walk stops as soon as the budget is spent."""
    out: list[str] = []
    used = 0
    stack: list[tuple[Iterator[Any], str, bool]] = []  # (items, closing bracket, is a mapping)
    pending: list[Any] = [value]
    first = True
    while True:
        if used > budget:
            return "".join(out), True
        if pending:
            item = pending.pop()
            secret = False
            if isinstance(item, tuple) and len(item) == 3 and item[0] is _MEMBER:
                _, key, item = item
                key_text = _scalar(key if isinstance(key, str) else _scalar(key))
                piece = ("" if first else ",") + key_text + ":"
                out.append(piece)
                used += len(piece)
                secret = isinstance(key, str) and _SECRET_NAMES.search(key[:256]) is not None
            elif not first:
                out.append(",")
                used += 1
            first = False
            if secret:
                out.append(f'"{REDACTED}"')
                used += len(REDACTED) + 2
            elif isinstance(item, Mapping):
                out.append("{")
                used += 1
                stack.append((iter(item.items()), "}", True))
                first = True
            elif isinstance(item, list | tuple | set | frozenset):
                out.append("[")
                used += 1
                stack.append((iter(item), "]", False))
                first = True
            else:
                text = _scalar(item)
                out.append(text)
                used += len(text)
            continue
        if not stack:
            return "".join(out), False
        items, closing, is_mapping = stack[-1]
        try:
            nxt = next(items)
        except StopIteration:
            stack.pop()
            out.append(closing)
            used += 1
            first = False
            continue
        if is_mapping:
            key, member = nxt
            pending.append((_MEMBER, key, member))
        else:
            pending.append(nxt)


class SafeRecords(logging.Filter):
    """A logging filter that writes each record's message through ``safe_text``: for a library's
    logger that prints what a client sent (``websockets`` logs each request line at DEBUG, query
    string and all). The message is rendered once, here; the record keeps no client ``args``."""

    def __init__(self, limit: int = 2000) -> None:
        super().__init__()
        self.limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: its format string alone
            message = f"{record.msg}"
        record.msg = safe_text(message, self.limit)
        record.args = None
        return True


_MEMBER = object()
"""Marks a mapping member waiting on the render stack: (``_MEMBER``, key, value)."""
