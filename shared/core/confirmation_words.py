"""The words of a change held for the person's yes: the question and card that describe it, and the
yes/no phrasings that answer it (the holding itself is ``shared.core.confirming``).

A tool the app declares with ``effects: "changes"`` runs only after the person says yes: the conductor
asks one short spoken question (``describe_change``) with a card showing the change (``change_card``),
and the person's next transcript is classified by ``verdict`` — a fixed, tested list of phrasings,
never a model call. Pure: no I/O.

The rule of ``verdict``. The transcript is normalised: NFKC, case-folded, apostrophes (straight or
curly) removed (``don't`` = ``dont``), every other character that is not a letter or digit is a word
break (``all-right`` = ``all right``, ``o.k.`` = ``o k``). More than ``MAX_WORDS`` (12) words is OTHER.
Leading fillers (``okay so``, ``so``, ``well``, ``oh``, …) are dropped while words remain after them;
hesitations (``uh``, ``um``, ``hmm``, …) and the courtesies ``please``, ``thanks``, ``thank you`` and
``just`` may stand anywhere and count for nothing. The verdict is YES when the remaining words are,
in order, one or more phrasings of ``YES_PHRASES`` (``yes``, ``yes, go ahead``, ``OK. Do it.``) and
cannot also be read as only phrasings of ``NO_PHRASES``; NO symmetrically (``no no``, ``no, cancel
that``, ``don't do it``); anything else is OTHER: a new request (``yes but change line 12``, ``no,
replace lines 30 to 40``), a mix of the two (``yes no``, ``okay cancel``), or courtesy alone
(``please``). ``no problem``, ``no worries`` and ``not a problem`` are phrasings of YES.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from shared.core.speakable import Card

MAX_WORDS = 12  # a longer transcript is never a bare confirmation
SHOWN_LINES = 200  # new lines of a replacement shown on the card
ARGUMENTS_CHARS = 4000  # the arguments' JSON shown on a generic card
QUESTION_CHARS = 100  # a generic question drops argument values to stay this short
REPLACE_TEXT = "editor.replaceText"


class Verdict(StrEnum):
    YES = "yes"
    NO = "no"
    OTHER = "other"


YES_PHRASES = (
    "yes", "yeah", "yea", "yep", "yup", "yes please", "sure", "sure thing", "ok", "okay", "o k",
    "do it", "do that", "go", "go ahead", "go on", "go for it", "please do", "proceed", "sounds good",
    "looks good", "that's fine", "that's right", "that's correct", "correct", "right", "affirmative",
    "confirm", "confirmed", "apply it", "apply that", "make the change", "make that change",
    "absolutely", "definitely", "of course", "fine", "alright", "all right", "let's do it", "let's go",
    "ship it", "ok then", "okay then", "alright then", "perfect", "great", "no problem", "no worries", "not a problem",
)  # fmt: skip
NO_PHRASES = (
    "no", "nope", "nah", "no way", "negative", "don't", "do not", "don't do it", "don't do that",
    "do not do it", "do not do that", "no don't", "cancel", "cancel it", "cancel that", "stop",
    "stop it", "stop that", "never mind", "nevermind", "forget it", "no thanks", "no thank you",
    "not now", "not yet", "leave it", "skip it", "skip", "hold on", "hold on a sec", "hold on a second", "wait",
    "wait a second", "wait a minute",
)  # fmt: skip
COURTESIES = ("please", "thanks", "thank you", "just", "uh", "uhh", "um", "umm", "uhm", "er", "erm", "hmm", "hm", "mm")
LEADING_FILLERS = ("okay so", "ok so", "alright so", "all right so", "right so", "so", "well", "oh", "ah")

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201b": "'", "\u02bc": "'", "\u2032": "'", "`": "'"})


def _words(text: str) -> tuple[str, ...]:
    text = unicodedata.normalize("NFKC", text).casefold().translate(_QUOTES).replace("'", "")
    return tuple(re.sub(r"[\W_]+", " ", text).split())


# each phrase (as words) -> what it counts as: a verdict, or None for a courtesy
_PHRASES: dict[tuple[str, ...], Verdict | None] = {
    **{_words(p): None for p in COURTESIES},
    **{_words(p): Verdict.YES for p in YES_PHRASES},
    **{_words(p): Verdict.NO for p in NO_PHRASES},
}
_LONGEST = max(map(len, _PHRASES))
_FILLERS = sorted((_words(p) for p in LEADING_FILLERS), key=len, reverse=True)


def verdict(utterance: str) -> Verdict:
    """YES, NO or OTHER for the person's answer to a confirmation question (the rule: module docstring)."""
    words = _words(utterance)
    if len(words) > MAX_WORDS:
        return Verdict.OTHER
    stripped = True
    while stripped:
        stripped = False
        for filler in _FILLERS:
            if len(words) > len(filler) and words[: len(filler)] == filler:
                words, stripped = words[len(filler) :], True
                break
    # readings[i]: the sets of verdicts of every way to read words[i:] as phrasings
    readings: list[set[frozenset[Verdict]]] = [set() for _ in words] + [{frozenset()}]
    for i in range(len(words) - 1, -1, -1):
        for size in range(1, min(_LONGEST, len(words) - i) + 1):
            if (phrase := words[i : i + size]) in _PHRASES:
                said = _PHRASES[phrase]
                readings[i] |= {rest | {said} if said else rest for rest in readings[i + size]}
    found = readings[0]
    if frozenset({Verdict.YES}) in found and frozenset({Verdict.NO}) not in found:
        return Verdict.YES
    if frozenset({Verdict.NO}) in found and frozenset({Verdict.YES}) not in found:
        return Verdict.NO
    return Verdict.OTHER


@dataclass(frozen=True)
class Change:
    """What a change is: the spoken question and what the card shows."""

    question: str  # one short sentence ending with "?"
    card_title: str
    card_body: str
    card_type: Literal["diff", "code"] = "code"
    language: str | None = None
    file: str | None = None  # the path the change is to, when it is to one file


def change_card(change: Change) -> Card:
    """The card shown while the question waits for an answer (``card_patch`` sends it)."""
    return Card(change.card_type, change.card_title, change.card_body, change.language, change.file)


def describe_change(name: str, arguments: dict[str, Any], current: list[str] | str | None = None) -> Change:
    """The question and card for a call of tool ``name``; arguments that make no sense for the tool
    (missing, mistyped, a backwards range) give the generic question. ``current``: for an edit, the
    lines it replaces as they are now (read from the device that runs it), or a note saying why they
    could not be read; None: not read (the card says so). Never raises."""
    if name == REPLACE_TEXT and isinstance(arguments, dict) and (change := _replace_text(arguments, current)):
        return change
    return _generic(name, arguments)


def replaced_range(arguments: dict[str, Any]) -> tuple[str, int, int] | None:
    """An edit's path and its first and last line, when they make sense."""
    path = arguments.get("path")
    start, end = _line_number(arguments.get("startLine")), _line_number(arguments.get("endLine"))
    if not isinstance(path, str) or not _file_name(path) or start is None or end is None or end < start:
        return None
    return path, start, end


def _old_lines(start: int, end: int, current: list[str] | str | None) -> list[str]:
    if isinstance(current, list):
        shown = [f"-{line}" for line in current[:SHOWN_LINES]]
        if (more := len(current) - SHOWN_LINES) > 0:
            shown.append(f"… {more} more line{'s' * (more != 1)}")
        return shown
    if isinstance(current, str):
        return [f"- ({_clip(' '.join(current.split()), 200)})"]
    return [f"- (line {start} as it is now)" if start == end else f"- (lines {start}\u2013{end} as they are now)"]


def _replace_text(arguments: dict[str, Any], current: list[str] | str | None = None) -> Change | None:
    path, text = arguments.get("path"), arguments.get("text")
    start, end = _line_number(arguments.get("startLine")), _line_number(arguments.get("endLine"))
    if not isinstance(path, str) or not isinstance(text, str) or start is None or end is None or end < start:
        return None
    name = _file_name(path)
    if not name:
        return None
    verb = "Delete" if text == "" else "Replace"
    spoken, shown = (
        (f"line {start}", f"line {start}") if start == end else (f"lines {start} to {end}", f"lines {start}\u2013{end}")
    )
    new = re.split(r"\r?\n", text.removesuffix("\n").removesuffix("\r")) if text else []
    body = [
        f"--- {path}",
        f"+++ {path}",
        f"@@ -{start},{end - start + 1} +{start if new else start - 1},{len(new)} @@",
        *_old_lines(start, end, current),
        *(f"+{line}" for line in new[:SHOWN_LINES]),
    ]
    if (more := len(new) - SHOWN_LINES) > 0:
        body.append(f"… {more} more line{'s' * (more != 1)}")
    return Change(
        question=f"{verb} {spoken} of {name}?",
        card_title=f"{verb} {shown} of {name}",
        card_body="\n".join(body),
        card_type="diff",
        language="diff",
        file=path,
    )


def _generic(name: object, arguments: object) -> Change:
    tool = _clip(" ".join(name.split()), 60) if isinstance(name, str) and name.strip() else "this tool"
    values = arguments.items() if isinstance(arguments, dict) else ()
    parts = [f"{_spoken_key(key)} {said}" for key, value in values if (said := _short_value(key, value))][:2]
    question = f"Run {tool}?"
    for count in (2, 1):
        if len(parts) >= count and len(asked := f"Run {tool} with {' and '.join(parts[:count])}?") <= QUESTION_CHARS:
            question = asked
            break
    try:
        body = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        try:
            body = repr(arguments)
        except RecursionError:
            body = "(arguments that can't be shown)"
    if len(body) > ARGUMENTS_CHARS:
        body = body[: ARGUMENTS_CHARS - 2] + "\n…"
    return Change(question=question, card_title=f"Run {tool}", card_body=body, language="json")


def _line_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 1 else None


def _file_name(path: str) -> str:
    """The last component of a path, as it is said: ``Sources/App/main.swift`` is ``main.swift``."""
    return _clip(path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip(), 60)


def _spoken_key(key: str) -> str:
    """``startLine`` and ``start_line`` are said ``start line``."""
    return " ".join(re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_-]+", " ", key).lower().split())


def _short_value(key: object, value: object) -> str | None:
    """A value short enough to say in the question, or None."""
    if not isinstance(key, str) or not key.strip() or len(key) > 30 or isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value) if value == value and abs(value) < 1e9 else None  # not NaN, not huge
    if not isinstance(value, str) or "\n" in value:
        return None
    said = " ".join(value.split())
    if "/" in said and " " not in said and "://" not in said:
        said = _file_name(said)  # a path is said by its last component
    said = said.rstrip(".?!;:,")
    return said if 0 < len(said) <= 30 and not re.search(r"[?!]", said) else None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
