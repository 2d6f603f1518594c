"""JSON from untrusted clients, read within bounds: a nesting depth, a number length, no NaN or
Infinity, and one error type for everything that is refused.

``json.loads`` alone takes text that costs more than its size suggests: a 10 KB array nested 5,000
deep (``RecursionError``), a 5,000-digit integer (``ValueError`` past Python's int-from-string limit,
and quadratic work below it), ``NaN`` / ``Infinity`` / ``1e999`` (not JSON, and not storable). Here
the depth is measured before anything is parsed, without recursion: the strings are cut out of the
text (a regular expression, in C), the brackets that remain are counted with running sums, and
only text within the depth reaches ``json.loads``, whose own recursion then stays shallow. Numbers
are checked by length as they are read (``parse_int`` / ``parse_float``) and must be finite.

Pure: no AWS, no I/O. The depth counts every object and array, the outermost one included:
``{"a": [1]}`` is 2 deep.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

MAX_NUMBER_CHARS = 100  # sign, digits, fraction and exponent of one number literal
# A JSON string: a quote, then anything but a quote or a backslash, or a backslash and any one
# character. The closing quote is optional so an unterminated string is cut out too (json.loads
# refuses it afterwards); the unrolled form never backtracks.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonRefused(ValueError):
    """The text is not JSON, or not JSON within the bounds; the message says why in words that are
    safe to show the client (never the text itself). ``bound`` names the bound the text is past
    (``depth``, ``number``, ``constant``), or is None for text that is not JSON at all."""

    def __init__(self, message: str, bound: str | None = None) -> None:
        super().__init__(message)
        self.bound = bound


def nesting_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in ``text`` (brackets inside strings aside); for
    text that is not JSON, the most brackets open at any point. Never recurses."""
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(text: str | bytes, *, max_depth: int, max_number_chars: int = MAX_NUMBER_CHARS) -> Any:
    """The value ``text`` holds; raises :class:`JsonRefused` for anything else (bytes that are not
    UTF-8, text that is not JSON, nesting deeper than ``max_depth``, a number literal longer than
    ``max_number_chars``, ``NaN``, ``Infinity`` or a number too large for a float)."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRefused("the JSON is not UTF-8 text") from None
    if not isinstance(text, str):
        raise JsonRefused("the JSON must be text")
    if nesting_depth(text) > max_depth:
        raise JsonRefused(f"the JSON nests deeper than {max_depth} levels", "depth")

    def integer(literal: str) -> int:
        if len(literal) > max_number_chars:
            raise JsonRefused(f"a number in the JSON is longer than {max_number_chars} characters", "number")
        return int(literal)

    def real(literal: str) -> float:
        if len(literal) > max_number_chars:
            raise JsonRefused(f"a number in the JSON is longer than {max_number_chars} characters", "number")
        value = float(literal)
        if not math.isfinite(value):
            raise JsonRefused("a number in the JSON is too large", "number")
        return value

    def constant(name: str) -> Any:
        raise JsonRefused(f"{name} is not JSON", "constant")

    try:
        return json.loads(text, parse_int=integer, parse_float=real, parse_constant=constant)
    except JsonRefused:
        raise
    except (ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
        raise JsonRefused("the text is not valid JSON") from None
