"""Text the client did not write itself, made safe to print on a terminal (the command line's
transcript and the companion's display alike).

What the model says, the names of devices, file names, a command's output and the errors that quote
them come from the network, from files and from commands. Printed as they are, an escape sequence
in them would act on the person's terminal: set its title (``ESC ] 0 ; … BEL``), write to the
clipboard (OSC 52), clear the screen (``ESC [ 2 J``), move the cursor to hide a line. ``printable``
removes every escape sequence (CSI, OSC and the other strings, two-character escapes, their 8-bit
forms) and every other C0 or C1 control character; newline and tab stay. ``printable_data`` does
the same to every string of an event's payload, a card or a list of them.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar, cast

from pydantic import BaseModel

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but newline and tab, DEL, and the C1 controls (ESC and CSI among them)."""
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: parameters, intermediates, the final byte (if it came)
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # any other escape, or a lone ESC
)

T = TypeVar("T")


def printable(text: str) -> str:
    """``text`` without terminal control sequences or control characters (newline and tab kept)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


def printable_data(value: T) -> T:
    """``value`` (a payload, a card, a list or a string) with each of its strings ``printable``; the
    very same object when nothing had to change."""
    return cast(T, _cleaned(value))


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        text = printable(value)
        return value if text == value else text
    if isinstance(value, BaseModel):
        updates = {}
        for name in type(value).model_fields:
            field = getattr(value, name)
            cleaned = _cleaned(field)
            if cleaned is not field:
                updates[name] = cleaned
        return value.model_copy(update=updates) if updates else value
    if isinstance(value, tuple | list):
        items = [_cleaned(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, dict):
        pairs = [(_cleaned(key), _cleaned(item)) for key, item in value.items()]
        if all(k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value
